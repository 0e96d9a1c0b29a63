"""The session notices what its tools did to the workspace: a checkpoint at the start and end
of every turn and before every step that calls a tool that can write (file tools, Shell,
sub-agents, and the plugin and MCP tools the configuration names). Tools know nothing of it;
the soul calls these three hooks, and the checkpoints are read back by every face through
`soulwire.sessions.checkpoints.book`."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from functools import partial
from typing import Any

import anyio
import anyio.to_thread

from soulwire.engine.bus import EventBus
from soulwire.sessions.checkpoints.book import CheckpointBook
from soulwire.sessions.jsonl import warn_stderr
from soulwire.wire.checkpoints import CheckpointTaken

WRITING_TOOLS = frozenset({"WriteFile", "StrReplaceFile", "Shell", "Agent"})


class Workspace:
    """Checkpoints of one session's workspace, taken off the event loop unless they are
    quick (`CheckpointBook.quick`)."""

    def __init__(self, book: CheckpointBook, bus: EventBus, *, writing_tools: Sequence[str] = ()) -> None:
        self.book = book
        self.bus = bus
        self._patterns = list(writing_tools)
        self.turn = book.recorded_turns()
        """The number of the current (or last) top-level turn."""
        self._warned = False

    def writes(self, tool: str) -> bool:
        return tool in WRITING_TOOLS or any(fnmatchcase(tool, p) for p in self._patterns)

    async def turn_begin(self) -> None:
        self.turn += 1
        await self._take("turn")

    async def before_tools(self, step: int, tools: Sequence[str]) -> None:
        if any(self.writes(t) for t in tools):
            await self._take("step", step)

    async def turn_end(self) -> None:
        with anyio.CancelScope(shield=True):  # a cancelled turn's changes are recorded too
            await self._take("end")

    async def _take(self, kind: str, step: int | None = None) -> None:
        take = partial(self.book.take, turn=self.turn, kind=kind, step=step)
        try:
            # a few small changed files (the usual step): cheaper here than a thread's round trip
            record = take() if self.book.quick() else await anyio.to_thread.run_sync(take)
        except Exception as exc:  # a checkpoint that fails must not fail the turn
            if not self._warned:
                self._warned = True
                warn_stderr(f"could not take a checkpoint of the workspace: {exc}")
            return
        self.bus.emit(taken_event(record))

    def after_rewind(self) -> None:
        """The conversation may have been cut: count its turns again."""
        self.turn = self.book.recorded_turns()


def taken_event(record: dict[str, Any]) -> CheckpointTaken:
    return CheckpointTaken(
        id=record["id"],
        turn=record["turn"],
        kind=record["kind"],
        step=record.get("step"),
        files=record.get("files", 0),
        files_changed=record.get("files_changed", 0),
        bytes_stored=record.get("bytes_stored", 0),
        skipped=record.get("skipped", []),
    )
