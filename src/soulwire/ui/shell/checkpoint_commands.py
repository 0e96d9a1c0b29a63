"""The shell's checkpoint commands: `/changes [N]` (a turn's diff), `/undo` (the last turn,
files and conversation, after a confirmation that lists the files) and `/rewind` (a picker of
turns with each one's prompt and changed files). They read and rewind through the same
runtime operations as the Wire methods (runtime/checkpoints.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

if TYPE_CHECKING:
    from soulwire.ui.shell.app import ShellApp

COMMANDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("changes", "Show what a turn did to the files: /changes [N] (default: the last turn)", ()),
    ("undo", "Undo the last turn: its file changes and its messages (asks first)", ()),
    ("rewind", "Pick a turn and go back to before it, files and conversation", ()),
    ("overlay", "Commit or discard the changes waiting in the sandbox's overlay (--overlay ask)", ()),
)


def _diff_text(changes: dict[str, Any]) -> Text:
    out = Text()
    for change in changes["files"]:
        status, path = change["status"], change["path"]
        diff = change.get("diff")
        if not diff:
            extra = " (binary)" if change.get("binary") else ""
            if status == "mode":
                extra = f" (mode {change.get('old_mode')} → {change.get('new_mode')})"
            out.append(f"{status} {path}{extra}\n", style="bold")
            continue
        for line in diff.splitlines():
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
            if line.startswith(("+++", "---")):
                style = "bold"
            out.append(line + "\n", style=style)
    return out


def _paths(changes: dict[str, Any]) -> str:
    from soulwire.runtime.checkpoints import paths_summary

    return paths_summary(changes)


class CheckpointCommands:
    def __init__(self, app: ShellApp) -> None:
        self.app = app

    def _book(self) -> Any:
        runtime = self.app.runtime
        workspace = runtime.soul.workspace if runtime is not None else None
        if workspace is None:
            self.app.view.note(
                "Checkpoints are off: start with --checkpoints (or [checkpoints] enabled = true)."
            )
            return None
        return workspace.book

    def _prompts(self) -> list[str]:
        """The prompt of each turn (1 first), as recorded."""
        from soulwire.runtime.checkpoints import turn_prompts

        assert self.app.runtime is not None
        return turn_prompts(self.app.runtime)

    async def changes(self, args: str) -> None:
        book = self._book()
        if book is None:
            return
        turns = book.turns()
        try:
            turn = int(args) if args else (turns[-1] if turns else 0)
        except ValueError:
            turn = 0
        if turn not in turns:
            self.app.view.note(
                f"/changes takes a turn with a checkpoint: {', '.join(map(str, turns)) or 'none yet'}.",
                "yellow",
            )
            return
        changes = book.changes(turn)
        if not changes["files"]:
            self.app.view.note(f"Turn {turn} changed no files.")
            return
        self.app.view.print(Text(f"── turn {turn}: {_paths(changes)} ──", style="dim"))
        self.app.view.print(_diff_text(changes))

    async def undo(self, args: str) -> None:
        book = self._book()
        if book is None:
            return
        turns = [t for t in book.turns() if t <= len(self._prompts())]
        if not turns:
            self.app.view.note("There is no turn to undo.")
            return
        await self._rewind_to(turns[-1], confirm=True)

    async def rewind(self, args: str) -> None:
        from soulwire.ui.shell.modals import Picker

        book = self._book()
        if book is None:
            return
        prompts = self._prompts()
        turns = [t for t in book.turns() if t <= len(prompts)]
        if not turns:
            self.app.view.note("There is no turn to rewind to.")
            return
        options: list[tuple[str, str]] = []
        for turn in reversed(turns):
            prompt = " ".join(prompts[turn - 1].split())[:50]
            options.append((str(turn), f"{turn:>3}  {prompt}  — {_paths(book.changes(turn, diffs=False))}"))
        picker = Picker(
            title="Go back to before which turn?",
            options=options,
            hint="Enter rewinds files and conversation · ↑/↓ move · Esc keeps everything",
        )
        chosen = (await self.app.pick(picker)).result
        if chosen:
            await self._rewind_to(int(chosen), confirm=False)

    async def overlay(self, args: str, *, after_turn: bool = False) -> None:
        """The choice for the overlay's pending changes: commit, discard, or keep them pending
        (they carry into the next turn). After a turn only when something is pending."""
        from soulwire.runtime.overlay import resolve_overlay
        from soulwire.sessions.checkpoints.book import CheckpointError
        from soulwire.ui.shell.modals import Picker

        runtime = self.app.runtime
        turns = runtime.soul.overlay if runtime is not None else None
        if runtime is None or turns is None:
            if not after_turn:
                self.app.view.note("No overlay: start with --sandbox workspace-write --overlay ask.")
            return
        files = await turns.pending()
        if not files:
            if not after_turn:
                self.app.view.note("Nothing is waiting in the overlay.")
            return
        listed = "\n".join(f"  {f.status:<8} {f.path}" for f in files[:20])
        more = f"\n  … and {len(files) - 20} more" if len(files) > 20 else ""
        picker = Picker(
            title=f"This turn's changes are in the sandbox's overlay ({len(files)} file(s)):",
            body=listed + more,
            options=[
                ("commit", "Commit them to the work dir"),
                ("discard", "Discard them: the work dir stays as it was"),
                ("keep", "Decide later (/overlay); the next turn continues in the overlay"),
            ],
            hint="Enter chooses · Esc decides later",
        )
        chosen = (await self.app.pick(picker)).result
        if chosen not in ("commit", "discard"):
            self.app.view.note("The changes stay in the overlay: /overlay commits or discards them.")
            return
        try:
            result = await resolve_overlay(runtime, chosen)
        except CheckpointError as exc:
            self.app.view.note(str(exc), "yellow")
            return
        done = "Committed" if chosen == "commit" else "Discarded"
        where = " to the work dir" if chosen == "commit" else ""
        self.app.view.note(f"{done} {len(result['files'])} file(s){where}.", "green")

    async def _rewind_to(self, turn: int, *, confirm: bool) -> None:
        from soulwire.runtime.checkpoints import rewind
        from soulwire.sessions.checkpoints.book import CheckpointError, RewindConflict
        from soulwire.ui.shell.modals import Picker

        runtime = self.app.runtime
        book = self._book()
        if runtime is None or book is None:
            return
        if confirm:
            picker = Picker(
                title=f"Undo turn {turn}?",
                options=[
                    ("yes", f"Undo it: restore {_paths(book.changes(turn, diffs=False))}"),
                    ("no", "Keep it"),
                ],
                hint="Enter chooses · Esc keeps it",
            )
            if (await self.app.pick(picker)).result != "yes":
                return
        force = False
        while True:
            try:
                result = await rewind(runtime, turn=turn, force=force)
                break
            except RewindConflict as conflict:
                picker = Picker(
                    title="These files were changed since the session recorded them:",
                    body=", ".join(conflict.paths),
                    options=[
                        ("force", "Overwrite them (a copy is kept: /rewind can bring it back)"),
                        ("no", "Keep them: do nothing"),
                    ],
                    hint="Enter chooses · Esc does nothing",
                )
                if (await self.app.pick(picker)).result != "force":
                    return
                force = True
            except CheckpointError as exc:
                self.app.view.note(str(exc), "yellow")
                return
        restored = result["restored"]
        stopped = (
            f"; stopped {len(result['stopped_tasks'])} background task(s)" if result["stopped_tasks"] else ""
        )
        self.app.view.note(
            f"Back to before turn {turn}: {len(restored)} file(s) restored, the conversation cut{stopped}.",
            "green",
        )
