"""The argparse conventions every `soulwire` command shares: a usage mistake is one line on
stderr that names the problem and where help is (exit 2), with a "did you mean" for a mistyped
flag, and `--help` ends with examples. It sits outside the layers so that `soulwire serve`
(server) and the CLI's own commands can both use it; it imports nothing of Soulwire."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from soulwire.errors import SoulwireError

EXIT_USAGE = 2


class UsageError(SoulwireError):
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


class CommandFailed(SoulwireError):
    """A command could not do what it was asked; reported as one line on stderr with exit
    code 1 (each command words the line as its reference does)."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one actionable line (exit 2) and whose help ends
    with examples. Subparsers made from it behave the same."""

    def __init__(
        self, *args: Any, examples: Sequence[str] = (), commands: Sequence[str] = (), **kwargs: Any
    ) -> None:
        self.commands = list(commands)  # subcommands dispatched before parsing, for suggestions
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
        """The message, with the closest known flag, command or choice to a mistyped one."""
        import difflib  # only on this error path: not worth its import at every start
        import re

        def closest(word: str, known: list[str]) -> str | None:
            found = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
            return found[0] if found else None

        choice = re.search(r"^(.*)invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:  # argparse's wording changes between Pythons: one stable line instead
            lead, word = choice.group(1), choice.group(2)
            known = [c.strip().strip("'") for c in choice.group(3).split(",")]
            guess = closest(word, known)
            hint = f" (did you mean {guess}?)" if guess else ""
            return f"{lead}invalid choice {word!r}; choose from {', '.join(known)}{hint}"
        prefix = "unrecognized arguments: "
        if not message.startswith(prefix):
            return message
        words = message.removeprefix(prefix).split()
        flags = [flag for flag in self._option_string_actions if flag.startswith("--")]
        for word in words:
            if word.startswith("--"):
                guess = closest(word.split("=", 1)[0], flags)
                if guess:
                    return f"{message} (did you mean {guess}?)"
        if words and not words[0].startswith("-") and self.commands:
            guess = closest(words[0], list(self.commands))
            hint = (
                f"did you mean {guess}?"
                if guess
                else f"commands: {', '.join(self.commands)}; a prompt goes after -p"
            )
            return f"unknown command {words[0]!r} ({hint})"
        return message
