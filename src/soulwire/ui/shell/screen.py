"""The terminal: finished blocks are printed into the normal scrollback (above the prompt
while it runs), and rich renders everything to ANSI text at the terminal's current width."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from prompt_toolkit.application import Application
    from rich.console import RenderableType


def color_system() -> str | None:
    """What the terminal can show, from the environment (read without loading rich):
    nothing with NO_COLOR or TERM=dumb, 24-bit with COLORTERM=truecolor, 256 colours with a
    `*-256color` TERM, else the 16 standard colours."""
    term = os.environ.get("TERM", "")
    if os.environ.get("NO_COLOR") or term == "dumb":
        return None
    if os.environ.get("COLORTERM", "").lower() in ("truecolor", "24bit"):
        return "truecolor"
    if "256color" in term:
        return "256"
    return "standard"


class Screen:
    """Renders to ANSI and writes in order, batching writes while the prompt is shown."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.colors = color_system()
        self._queue: list[str] = []
        self._scheduled = False

    @property
    def plain(self) -> bool:
        """No colours, no styles."""
        return self.colors is None

    def width(self) -> int:
        return max(20, shutil.get_terminal_size((80, 24)).columns)

    def height(self) -> int:
        return max(5, shutil.get_terminal_size((80, 24)).lines)

    def ansi(self, renderable: RenderableType, width: int | None = None) -> str:
        from rich.console import Console

        console = Console(
            force_terminal=self.colors is not None,
            color_system=self.colors,  # pyright: ignore[reportArgumentType]
            no_color=self.colors is None,
            width=width or self.width(),
            highlight=False,
            emoji=False,
            soft_wrap=False,
        )
        with console.capture() as capture:
            console.print(renderable)
        # Padding that is plain spaces at a line's end (not a code block's background) is dropped:
        # text copied from the scrollback has no trailing blanks.
        return "\n".join(line.rstrip(" ") for line in capture.get().split("\n"))

    def print(self, renderable: RenderableType) -> None:
        self.write(self.ansi(renderable))

    def write(self, text: str) -> None:
        """Queue text for the scrollback; written at once, or above a running prompt."""
        self._queue.append(text)
        from prompt_toolkit.application import get_app_or_none

        app = get_app_or_none()
        if app is None or not app.is_running:
            self.flush()
        elif not self._scheduled:
            import asyncio

            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._write_above, app)

    def _write_above(self, app: Application[Any]) -> None:
        """Write the queue above the prompt: erase the prompt, write, draw the prompt again.

        Not with prompt_toolkit's `run_in_terminal`: it hands the terminal back to the line
        discipline (cooked mode) while the text is written, and a Ctrl-D pressed in that
        moment is taken by the tty as end-of-file and reaches the prompt as a NUL: the shell
        did not exit (a turn's last lines are written just as a person presses it). Keys
        typed meanwhile stay in the kernel's buffer, unechoed, for the prompt to read."""
        self._scheduled = False
        if not self._queue:
            return  # (flushed meanwhile: nothing to erase the prompt for)
        if not app.is_running:
            self.flush()
            return
        if getattr(app, "_running_in_terminal", False):
            # An editor (Ctrl-X Ctrl-E) has the terminal: after it, in turn.
            from prompt_toolkit.application import run_in_terminal

            self._scheduled = True
            run_in_terminal(self._flush_scheduled)
            return
        app.renderer.erase()
        self.flush()
        app.renderer.reset()
        app.renderer.request_absolute_cursor_position()
        app.invalidate()

    def _flush_scheduled(self) -> None:
        self._scheduled = False
        self.flush()

    def flush(self) -> None:
        if not self._queue:
            return
        text, self._queue = "".join(self._queue), []
        self.out.write(text)
        self.out.flush()
