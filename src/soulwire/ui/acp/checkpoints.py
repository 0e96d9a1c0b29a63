"""The checkpoint commands of an ACP session, offered as available commands when the session
takes checkpoints: `/changes [N]` (a turn's diff), `/undo [--force]` (the last turn, files and
conversation), `/rewind` (the turns to pick from) and `/rewind N [files|context] [--force]`.
Each answers with one agent message; a rewind refused because files were edited by hand names
them and says how to force it. A rewind that took back the conversation asks for the editor's
view to be redrawn (`Answer.redraw`, `answer_text`). The commands read and rewind through a
`CheckpointAccess`: the runtime's operations for a local session (`RuntimeCheckpoints`, as the
Wire methods and the terminal UI do: runtime/checkpoints.py), the session's Wire methods for
one reached through `soulwire serve` (remote.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from soulwire.runtime.builder import Runtime


class CheckpointAccess(Protocol):
    """What the commands need of a session's checkpoints. Errors are the book's
    (`CheckpointError`, `RewindConflict` naming the files edited by hand)."""

    def enabled(self) -> bool: ...

    async def turns(self) -> list[int]:
        """The turns with a checkpoint."""
        ...

    async def prompts(self) -> list[str]:
        """The prompt of each turn of the conversation as it now is (turn 1 first)."""
        ...

    async def changes(self, turn: int, *, diffs: bool = True) -> dict[str, Any]: ...

    async def rewind(self, turn: int, *, files: bool, context: bool, force: bool) -> dict[str, Any]: ...


class RuntimeCheckpoints:
    """The checkpoints of a session running in this process."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def enabled(self) -> bool:
        return self.runtime.soul.workspace is not None

    async def turns(self) -> list[int]:
        from soulwire.runtime.checkpoints import book_of

        return book_of(self.runtime).turns()

    async def prompts(self) -> list[str]:
        from soulwire.runtime.checkpoints import turn_prompts

        return turn_prompts(self.runtime)

    async def changes(self, turn: int, *, diffs: bool = True) -> dict[str, Any]:
        from soulwire.runtime.checkpoints import book_of

        return book_of(self.runtime).changes(turn, diffs=diffs)

    async def rewind(self, turn: int, *, files: bool, context: bool, force: bool) -> dict[str, Any]:
        from soulwire.runtime.checkpoints import rewind

        return await rewind(self.runtime, turn=turn, files=files, context=context, force=force)


COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("changes", "Show what a turn did to the files (default: the last turn)", "turn number (optional)"),
    ("undo", "Undo the last turn: its file changes and its messages", "--force to overwrite hand edits"),
    ("rewind", "Go back to before a turn (no argument: list the turns)", "N [files|context] [--force]"),
)
NAMES = frozenset(name for name, _, _ in COMMANDS)
STALE_VIEW = (
    "Your editor still shows the turns taken back: open this session again to redraw it "
    "(loading a session replays the conversation as it now is)."
)


@dataclass(frozen=True)
class Answer:
    text: str
    redraw: bool = False
    """The conversation was rewound: what the editor shows of it is out of date."""


USAGE = "Usage: /rewind N [files|context] [--force] (N: a turn; /rewind alone lists them)"


def available(access: CheckpointAccess) -> list[dict[str, Any]]:
    """The commands' `availableCommands` entries (none when checkpoints are off)."""
    if not access.enabled():
        return []
    return [{"name": n, "description": d, "input": {"hint": h}} for n, d, h in COMMANDS]


def parse(text: str) -> tuple[str, list[str]] | None:
    """(command, arguments) of a prompt that is one of these commands, else None."""
    words = text.strip().split()
    if not words or not words[0].startswith("/") or words[0][1:] not in NAMES:
        return None
    return words[0][1:], words[1:]


def command_of(access: CheckpointAccess, blocks: list[Any]) -> tuple[str, list[str]] | None:
    """The command of a prompt of one text block that is one of these (the session takes them)."""
    if not access.enabled() or len(blocks) != 1 or getattr(blocks[0], "type", None) != "text":
        return None
    return parse(str(getattr(blocks[0], "text", "")))


async def answer_text(
    access: CheckpointAccess,
    command: tuple[str, list[str]],
    redraw: Callable[[], Awaitable[None]] | None,
) -> str:
    """Run the command; the text to answer with. After a rewind of the conversation, `redraw`
    (an editor that offered `_soulwire/redraw`: clear its view and replay the session) is
    awaited; without it the answer says the view is stale (ACP cannot take messages back)."""
    answer = await run(access, *command)
    if not answer.redraw:
        return answer.text
    if redraw is None:
        return answer.text + "\n\n" + STALE_VIEW
    await redraw()
    return answer.text


async def run(access: CheckpointAccess, name: str, args: list[str]) -> Answer:
    """Run one command; its answer as Markdown."""
    from soulwire.sessions.checkpoints.book import CheckpointError

    if not access.enabled():
        return Answer("Checkpoints are off: start with --checkpoints (or [checkpoints] enabled = true).")
    try:
        if name == "changes":
            return Answer(await _changes(access, args))
        if name == "undo":
            turns = await _turns(access)
            if not turns:
                return Answer("There is no turn to undo.")
            return await _rewind(access, turns[-1], args)
        if not args:
            return Answer(await _listing(access))
        try:
            turn = int(args[0])
        except ValueError:
            return Answer(USAGE)
        return await _rewind(access, turn, args[1:])
    except CheckpointError as exc:
        return Answer(str(exc))


async def _turns(access: CheckpointAccess, prompts: list[str] | None = None) -> list[int]:
    """The turns with a checkpoint that the conversation still holds."""
    recorded = len(await access.prompts() if prompts is None else prompts)
    return [t for t in await access.turns() if t <= recorded]


async def _changes(access: CheckpointAccess, args: list[str]) -> str:
    turns = await access.turns()
    try:
        turn = int(args[0]) if args else (turns[-1] if turns else 0)
    except ValueError:
        turn = 0
    if turn not in turns:
        return f"/changes takes a turn with a checkpoint: {', '.join(map(str, turns)) or 'none yet'}."
    changes = await access.changes(turn)
    if not changes["files"]:
        return f"Turn {turn} changed no files."
    lines = [f"Turn {turn} changed:"]
    for change in changes["files"]:
        diff = change.get("diff")
        if diff:
            lines.append(f"```diff\n{diff.rstrip()}\n```")
        elif change["status"] == "mode":
            lines.append(f"- `{change['path']}`: mode {change.get('old_mode')} → {change.get('new_mode')}")
        else:
            binary = " (binary)" if change.get("binary") else ""
            lines.append(f"- `{change['path']}`: {change['status']}{binary}")
    return "\n".join(lines)


async def _listing(access: CheckpointAccess) -> str:
    from soulwire.runtime.checkpoints import paths_summary

    prompts = await access.prompts()
    turns = await _turns(access, prompts)
    if not turns:
        return "There is no turn to rewind to."
    lines = ["Go back to before which turn? `/rewind N` (files and conversation; add `files` or `context` "
             "for one of them):"]  # fmt: skip
    for turn in reversed(turns):
        prompt = " ".join(prompts[turn - 1].split())[:60]
        lines.append(f"- **{turn}** {prompt} — {paths_summary(await access.changes(turn, diffs=False))}")
    return "\n".join(lines)


async def _rewind(access: CheckpointAccess, turn: int, args: list[str]) -> Answer:
    from soulwire.sessions.checkpoints.book import RewindConflict

    unknown = [a for a in args if a not in ("files", "context", "--force")]
    if unknown or ("files" in args and "context" in args):
        return Answer(USAGE)
    files, context = "context" not in args, "files" not in args
    force = "--force" in args
    try:
        result = await access.rewind(turn, files=files, context=context, force=force)
    except RewindConflict as conflict:
        named = ", ".join(f"`{p}`" for p in conflict.paths)
        again = " ".join(["/rewind", str(turn), *[a for a in args if a != "--force"], "--force"])
        return Answer(
            f"Not rewound: these files were changed since the session recorded them: {named}. "
            f"`{again}` overwrites them (a copy is kept: `/rewind` can bring it back)."
        )
    what = {(True, True): "files and conversation", (True, False): "files", (False, True): "conversation"}
    restored, forced = len(result["restored"]), len(result["forced"])
    parts = [f"Back to before turn {turn} ({what[files, context]}): {restored} file(s) restored"]
    if forced:
        parts.append(f"{forced} edited by hand overwritten (kept in checkpoint {result['before']})")
    if result["stopped_tasks"]:
        parts.append(f"stopped {len(result['stopped_tasks'])} background task(s) first")
    if context:
        parts.append("the conversation now ends before that turn")
    return Answer("; ".join(parts) + ".", redraw=context)
