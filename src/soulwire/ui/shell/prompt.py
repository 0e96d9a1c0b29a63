"""The line editor: prompt_toolkit's PromptSession with history per work dir, completion of
slash commands and `@path` mentions, Ctrl-J for a new line, and the keys of the pickers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import AnyFormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import ColorDepth

if TYPE_CHECKING:
    from soulwire.ui.shell.modals import Picker

MAX_MENTION_FILES = 5000
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}


def history_path(share_dir: Path, work_dir: Path) -> Path:
    """`<share>/user-history/<md5 of the work dir>.txt`: Up/Down recall this directory's prompts."""
    from soulwire.sessions.paths import work_dir_hash

    return share_dir / "user-history" / f"{work_dir_hash(work_dir)}.txt"


class ShellCompleter(Completer):
    """`/command` at the start of the input, `@path` anywhere (files under the work dir)."""

    def __init__(self, commands: Callable[[], list[tuple[str, str]]], work_dir: Path) -> None:
        self._commands = commands
        self._work_dir = work_dir
        self._files: list[str] | None = None

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and " " not in before:
            typed = before[1:]
            for name, description in self._commands():
                if name.startswith(typed):
                    yield Completion("/" + name, start_position=-len(before), display_meta=description)
            return
        word = before.split()[-1] if before.split() and not before.endswith((" ", "\n")) else ""
        if word.startswith("@"):
            for shown, path in enumerate(self._mention_candidates(word[1:])):
                if shown >= 50:
                    return
                yield Completion("@" + path, start_position=-len(word))

    def _mention_candidates(self, typed: str) -> Iterator[str]:
        files = self._walk()
        lowered = typed.lower()
        prefix = [f for f in files if f.lower().startswith(lowered)]
        yield from prefix
        if lowered:
            yield from (f for f in files if lowered in f.lower() and f not in prefix)

    def _walk(self) -> list[str]:
        if self._files is not None:
            return self._files
        found: list[str] = []
        for root, dirs, files in os.walk(self._work_dir):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            rel = os.path.relpath(root, self._work_dir)
            for name in sorted(files):
                found.append(name if rel == "." else os.path.join(rel, name))
            if len(found) >= MAX_MENTION_FILES:
                break
        self._files = found
        return found


class Keys:
    """What the shell does on the keys it binds (implemented by the app)."""

    def interrupt(self) -> None: ...

    def picker(self) -> Picker | None: ...

    def toggle_plan_mode(self) -> None: ...

    def rewind_picker(self) -> None: ...


def build_session(
    *,
    colors: str | None,
    history: Path,
    message: Callable[[], AnyFormattedText],
    toolbar: Callable[[], AnyFormattedText],
    completer: Completer,
    keys: Keys,
) -> PromptSession[str]:
    history.parent.mkdir(parents=True, exist_ok=True)
    bindings = KeyBindings()
    choosing = Condition(lambda: (p := keys.picker()) is not None and not p.typing)
    typing = Condition(lambda: (p := keys.picker()) is not None and p.typing)

    @bindings.add("c-c", eager=True)
    def _(event: KeyPressEvent) -> None:
        keys.interrupt()

    @bindings.add("s-tab", filter=~choosing)
    def _(event: KeyPressEvent) -> None:
        keys.toggle_plan_mode()

    empty = Condition(lambda: not session.default_buffer.text)

    @bindings.add("escape", "escape", filter=~choosing & ~typing & empty)
    def _(event: KeyPressEvent) -> None:
        keys.rewind_picker()  # Esc-Esc at an empty prompt: the turns to go back to

    @bindings.add("c-j", filter=~choosing)
    def _(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    def pick(event: KeyPressEvent) -> Picker:
        picker = keys.picker()
        assert picker is not None
        event.app.invalidate()
        return picker

    @bindings.add("up", filter=choosing, eager=True)
    def _(event: KeyPressEvent) -> None:
        pick(event).move(-1)

    @bindings.add("down", filter=choosing, eager=True)
    def _(event: KeyPressEvent) -> None:
        pick(event).move(1)

    @bindings.add("enter", filter=choosing, eager=True)
    def _(event: KeyPressEvent) -> None:
        pick(event).choose()

    @bindings.add(" ", filter=choosing, eager=True)
    def _(event: KeyPressEvent) -> None:
        pick(event).toggle()

    @bindings.add("escape", filter=choosing | typing, eager=True)
    def _(event: KeyPressEvent) -> None:
        pick(event).cancel()

    for digit in "123456789":

        @bindings.add(digit, filter=choosing, eager=True)
        def _(event: KeyPressEvent, digit: str = digit) -> None:
            pick(event).choose(int(digit) - 1)

    @bindings.add("enter", filter=typing, eager=True)
    def _(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        text = buffer.text
        buffer.reset()
        pick(event).submit_text(text.strip())

    @bindings.add("<any>", filter=choosing)
    def _(event: KeyPressEvent) -> None:
        """Other keys do nothing while a choice is open (typed text is not mixed in)."""

    completing = Condition(lambda: _wants_completion(session.default_buffer.document))
    session: PromptSession[str] = PromptSession(
        message=message,
        history=FileHistory(str(history)),
        completer=completer,
        complete_while_typing=completing,
        bottom_toolbar=toolbar,
        key_bindings=bindings,
        prompt_continuation=lambda width, line_number, wrap_count: "  ",
        enable_history_search=False,
        enable_open_in_editor=True,  # Ctrl-X Ctrl-E: compose the message in $EDITOR
        reserve_space_for_menu=4,
        color_depth=_COLOR_DEPTHS[colors],
    )
    session.app.ttimeoutlen = 0.05  # Escape answers at once instead of waiting for a sequence
    session.app.min_redraw_interval = 1 / 30  # one repaint per frame at most while streaming
    return session


_COLOR_DEPTHS = {
    None: ColorDepth.DEPTH_1_BIT,
    "standard": ColorDepth.DEPTH_4_BIT,
    "256": ColorDepth.DEPTH_8_BIT,
    "truecolor": ColorDepth.DEPTH_24_BIT,
}


def _wants_completion(document: Document) -> bool:
    before = document.text_before_cursor
    if before.startswith("/") and " " not in before:
        return True
    words = before.split()
    return bool(words) and words[-1].startswith("@") and not before.endswith((" ", "\n"))
