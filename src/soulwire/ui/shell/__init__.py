"""The interactive terminal shell: `soulwire` with no mode flag.

A front end over the runtime and the Wire event vocabulary, like `--wire` and `--print`:
prompt_toolkit for the line editor, rich for Markdown, highlighting and diffs. Both are
imported only from here, at first use. A terminal that cannot do it (TERM=dumb, or stdin or
stdout not a terminal) gets the plain line mode instead."""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from contextlib import contextmanager

from soulwire.runtime.options import SessionOptions


def wants_plain_mode() -> bool:
    return os.environ.get("TERM") == "dumb" or not (sys.stdin.isatty() and sys.stdout.isatty())


def run_shell(options: SessionOptions, *, prompt: str | None = None) -> int:
    """Run the shell until the user leaves; returns the exit code."""
    if wants_plain_mode():
        from dataclasses import replace

        from soulwire.ui.shell.plain import run_plain

        if options.session_id == "":  # no picker in line mode: a new session
            options = replace(options, session_id=None)

        return run_plain(options, first_prompt=prompt)
    with _typeahead_not_echoed():
        from soulwire.ui.shell.app import run_app

        return run_app(options, first_prompt=prompt)


@contextmanager
def _typeahead_not_echoed() -> Generator[None]:
    """Keys typed while the shell loads wait, unechoed, for the input line (which shows them;
    an Enter among them sends the message); the terminal's own settings are put back exactly
    as they were at the end."""
    import termios

    fd = sys.stdin.fileno()
    try:
        original = termios.tcgetattr(fd)
        quiet = termios.tcgetattr(fd)
        quiet[3] &= ~termios.ECHO
        quiet[0] &= ~termios.ICRNL  # an early Enter stays Enter (not Ctrl-J, a new line)
        termios.tcsetattr(fd, termios.TCSANOW, quiet)  # TCSANOW: typed keys are kept
    except termios.error:
        yield
        return
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, original)
