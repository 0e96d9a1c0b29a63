"""Slash commands of the shell itself (/help, /exit, /sessions, /model, /output, /export,
/new, and the checkpoint commands /changes, /undo, /rewind). The engine's commands (/clear,
/compact, /yolo, /plan, /init …) run as turns; an unknown command is answered here and never
reaches the model."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from soulwire.engine.catalog import describe_builtin
from soulwire.engine.skills import session_skills
from soulwire.ui.shell.checkpoint_commands import COMMANDS as CHECKPOINT_COMMANDS
from soulwire.ui.shell.checkpoint_commands import CheckpointCommands

if TYPE_CHECKING:
    from soulwire.sessions.listing import SessionSummary
    from soulwire.ui.shell.app import ShellApp

UI_COMMANDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("help", "List the commands and keys", ("?",)),
    ("exit", "Leave the shell", ("quit", "q")),
    ("sessions", "Pick one of this directory's sessions and resume it (/sessions ID: that one)", ("resume",)),
    ("new", "Start a new session", ()),
    ("model", "List the configured models; /model NAME switches", ()),
    ("output", "Show the whole output of a tool call: /output [N] (default: the last)", ()),
    ("export", "Write the conversation as Markdown: /export [FILE]", ()),
    *CHECKPOINT_COMMANDS,
)
_COMMAND = re.compile(r"^/([A-Za-z0-9_?:-]+)(?:\s+(.*))?$", re.DOTALL)
KEYS_HELP = (
    "Enter sends · Ctrl-J new line · ↑/↓ history · Tab completes /commands and @files · "
    "Shift-Tab plan mode · Esc Esc rewind (with checkpoints) · Ctrl-X Ctrl-E edit in $EDITOR · "
    "Ctrl-C interrupts a turn (twice at an empty prompt: exit) · Ctrl-D exits"
)


class UICommands:
    def __init__(self, app: ShellApp) -> None:
        self.app = app
        checkpoints = CheckpointCommands(app)
        self._changes, self._undo, self._rewind = checkpoints.changes, checkpoints.undo, checkpoints.rewind
        self._overlay = self.overlay_choice = checkpoints.overlay

    def engine_commands(self) -> list[dict[str, object]]:
        """The engine's commands the shell does not answer itself (its /model lists and picks)."""
        runtime = self.app.runtime
        if runtime is not None:
            commands = runtime.soul.slash_commands.describe()
        else:
            options = self.app.options  # still starting: the same list, from the light modules
            skills = session_skills(
                options.work_dir, options.share_dir, options.skills_dirs, options.raw_config
            )
            commands = [*describe_builtin(), *skills.describe()]
        own = {name for name, _description, _aliases in UI_COMMANDS}
        return [c for c in commands if c["name"] not in own]

    def completions(self) -> list[tuple[str, str]]:
        out = [(name, description) for name, description, _ in UI_COMMANDS]
        out += [(str(c["name"]), str(c["description"])) for c in self.engine_commands()]
        return out

    def _find_ui(self, name: str) -> str | None:
        for command, _description, aliases in UI_COMMANDS:
            if name == command or name in aliases:
                return command
        return None

    def _is_engine(self, name: str) -> bool:
        for command in self.engine_commands():
            aliases = command.get("aliases")
            if name == command["name"] or (isinstance(aliases, list) and name in aliases):
                return True
        return False

    async def handle(self, text: str) -> bool:
        """Run a UI command, or answer an unknown one; False lets the text go to the engine."""
        match = _COMMAND.match(text)
        if match is None:
            return False  # e.g. a path such as /usr/bin: an ordinary message
        name, args = match.group(1), (match.group(2) or "").strip()
        command = self._find_ui(name)
        if command is None:
            if self._is_engine(name):
                if self.app._turn_running:
                    self.app.view.note(f"/{name} waits for the turn to end (Ctrl-C interrupts it).", "yellow")
                    return True
                return False
            self.app.view.note(f"Unknown command /{name}. /help lists the commands.", "yellow")
            return True
        # As a task: a command that opens a picker needs the prompt running to be answered.
        self.app.spawn(getattr(self, "_" + command), args)
        return True

    # -- the commands -----------------------------------------------------------
    async def _help(self, args: str) -> None:
        table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for name, description, aliases in UI_COMMANDS:
            table.add_row("/" + name + "".join(f", /{a}" for a in aliases), Text(description))
        for command in self.engine_commands():
            aliases = command.get("aliases")
            names = "/" + str(command["name"])
            if isinstance(aliases, list):
                names += "".join(f", /{a}" for a in aliases)
            table.add_row(names, Text(str(command["description"])))
        self.app.view.print(table)
        self.app.view.print(Text(KEYS_HELP, style="dim"))

    async def _exit(self, args: str) -> None:
        self.app.leave(0)

    async def _output(self, args: str) -> None:
        outputs = self.app.view.outputs
        if not outputs:
            self.app.view.note("No tool has run yet.")
            return
        try:
            index = int(args) if args else len(outputs)
        except ValueError:
            index = 0
        if not 1 <= index <= len(outputs):
            self.app.view.note(f"/output takes a number from 1 to {len(outputs)}.", "yellow")
            return
        label, output = outputs[index - 1]
        self.app.view.print(Text(f"── output {index}: {label} ──", style="dim"))
        self.app.view.print(Text(output or "(no output)"))
        self.app.view.print(Text(f"── end of output {index} ──", style="dim"))

    def _idle(self, what: str) -> bool:
        if self.app._turn_running:
            self.app.view.note(f"{what} waits for the turn to end (Ctrl-C interrupts it).", "yellow")
            return False
        return True

    async def _sessions(self, args: str) -> None:
        from soulwire.sessions.listing import SessionNotFound, find_session, list_sessions

        options = self.app.options
        if args:
            if not self._idle("/sessions"):
                return
            try:
                found = find_session(options.share_dir, options.work_dir, args)
            except SessionNotFound as exc:
                self.app.view.note(str(exc), "yellow")
                return
            await self.app.switch(replace(options, session_id=found.id, continue_last=False))
            return
        sessions = list_sessions(options.share_dir, options.work_dir)
        if not sessions:
            self.app.view.note("No sessions in this directory yet.")
            return
        await self.pick_session(sessions[:15])

    async def pick_session(self, sessions: list[SessionSummary]) -> None:
        """A picker of sessions; the chosen one is resumed (Escape keeps the current one)."""
        from soulwire.ui.shell.modals import Picker

        current = self.app.runtime.session.id if self.app.runtime else None
        options: list[tuple[str, str]] = []
        for s in sessions:
            when = datetime.fromtimestamp(s.updated).strftime("%Y-%m-%d %H:%M")
            mark = " (this one)" if s.id == current else ""
            options.append((s.id, f"{when}  {s.turns:>3} turns  {(s.title or '')[:50]}  {s.id[:8]}{mark}"))
        picker = Picker(
            title="Resume which session?",
            options=options,
            hint="Enter resumes · ↑/↓ or digits move · Esc keeps this one",
        )
        chosen = (await self.app.pick(picker)).result
        if not chosen or chosen == current or not self._idle("/sessions"):
            return
        await self.app.switch(replace(self.app.options, session_id=chosen, continue_last=False))

    async def _new(self, args: str) -> None:
        if self._idle("/new"):
            options = self.app.options
            await self.app.switch(replace(options, session_id=None, continue_last=False))
            self.app.view.note("New session started.")

    async def _model(self, args: str) -> None:
        runtime = self.app.runtime
        if runtime is None:
            self.app.view.note("The engine is still starting.")
            return
        models = list(runtime.config.models)
        if not args:
            current = self.app.options.model or runtime.config.default_model
            if not models:
                self.app.view.note("No models are configured ([models] in the config file).")
            for name in models:
                self.app.view.note(
                    ("❯ " if name == current else "  ") + name, "bold" if name == current else ""
                )
            self.app.view.note("/model NAME switches (the conversation is kept).")
            return
        if args not in models:
            self.app.view.note(f"No model named {args!r}. /model lists them.", "yellow")
            return
        if self._idle("/model"):
            options = replace(
                self.app.options, model=args, session_id=runtime.session.id, continue_last=False
            )
            if await self.app.switch(options):
                self.app.view.note(f"Model: {args}")

    async def _export(self, args: str) -> None:
        from soulwire.sessions.export import context_to_markdown

        runtime = self.app.runtime
        if runtime is None:
            return
        session_id = runtime.session.id
        target = Path(args).expanduser() if args else Path(f"soulwire-{session_id[:8]}.md")
        if not target.is_absolute():
            target = self.app.options.work_dir / target
        text = context_to_markdown(
            runtime.session.store.load_context(),
            session_id=session_id,
            work_dir=str(self.app.options.work_dir),
        )
        try:
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            self.app.view.note(f"Cannot write {target}: {exc.strerror or exc}", "red")
            return
        self.app.view.note(f"Exported to {target}")
