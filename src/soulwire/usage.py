"""The argparse conventions every `soulwire` command shares: a usage mistake is one line on
stderr that names the problem and where help is (exit 2), with a "did you mean" for a mistyped
flag, and `--help` ends with examples. It sits outside the layers so that `soulwire serve`
(server) and the CLI's own commands can both use it; it imports nothing of Soulwire."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

EXIT_USAGE = 2


class UsageError(Exception):
    """Invalid usage of a command; reported as one line on stderr with exit code 2."""

    def __init__(self, message: str, prog: str = "soulwire", *, point_to_help: bool = True) -> None:
        super().__init__(message)
        self.prog = prog
        self.point_to_help = point_to_help

    def line(self) -> str:
        """The one line a person reads: what is wrong, and how to fix it (or where the help is,
        when the message alone does not say)."""
        where = f"; see '{self.prog} --help'" if self.point_to_help else ""
        return f"{self.prog}: error: {self}{where}"


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one actionable line (exit 2) and whose help ends
    with examples. Subparsers made from it behave the same."""

    def __init__(self, *args: Any, examples: Sequence[str] = (), **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        if examples:
            shown = "\n".join(f"  {example}" for example in examples)
            epilog = kwargs.get("epilog")
            kwargs["epilog"] = f"examples:\n{shown}" + (f"\n\n{epilog}" if epilog else "")
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(self._with_suggestion(message), self.prog)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """Parse, or print the one-line error and exit 2 (the top-level parser of the main
        command catches UsageError itself, through `parse_or_raise`)."""
        try:
            return self.parse_or_raise(args, namespace)
        except UsageError as exc:
            sys.stderr.write(exc.line() + "\n")
            raise SystemExit(EXIT_USAGE) from None

    def parse_or_raise(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:
        """Parse; a usage mistake raises UsageError instead of exiting."""
        return super().parse_args(args, namespace)

    def _with_suggestion(self, message: str) -> str:
        prefix = "unrecognized arguments: "
        if not message.startswith(prefix):
            return message
        import difflib  # only on this error path: not worth its import at every start

        unknown = message.removeprefix(prefix).split()
        known = [flag for flag in self._option_string_actions if flag.startswith("--")]
        for word in unknown:
            if not word.startswith("--"):
                continue
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.75)
            if close:
                return f"{message} (did you mean {close[0]}?)"
        return message
