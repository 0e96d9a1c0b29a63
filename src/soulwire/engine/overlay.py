"""Transactional turns: with the sandbox on and an overlay policy, each turn runs in an overlay
(`soulwire.tools.overlay`) and its writes reach the work dir only when committed.

The soul calls `turn_begin` (mount; commands and file tools then go through it) and
`turn_end` (unmount; then the policy: `commit`, `discard`, or `ask` — the changes stay pending,
announced by `OverlayPending`, until a face commits or discards them; a next turn continues
in the same overlay meanwhile). A commit is recorded as a checkpoint of the turn, so it shows
in the turn's changes and can be rewound."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from soulwire.engine.bus import EventBus
from soulwire.sessions.checkpoints import overlay as layers
from soulwire.sessions.checkpoints.book import CheckpointError
from soulwire.sessions.jsonl import warn_stderr
from soulwire.tools.overlay import Overlay, OverlayUnavailable
from soulwire.tools.sandbox import SandboxPolicy
from soulwire.wire.checkpoints import OverlayApplied, OverlayFile, OverlayPending, OverlayPolicy

if TYPE_CHECKING:
    from soulwire.engine.workspace import Workspace

OVERLAY_DIR = "overlay"
"""The overlay's layers, in the session's directory."""


class OverlayError(CheckpointError):
    """An overlay operation that cannot be done now (no overlay, a turn running in it)."""


class OverlayTurns:
    def __init__(
        self, sandbox: SandboxPolicy, session_dir: Path, bus: EventBus, policy: OverlayPolicy
    ) -> None:
        self.sandbox = sandbox
        self.overlay = Overlay.for_roots(sandbox.workspace, session_dir / OVERLAY_DIR)
        self.bus = bus
        self.policy: OverlayPolicy = policy
        self.workspace: Workspace | None = None
        """The session's checkpoints, when on: a commit is recorded there."""
        self._lock = anyio.Lock()

    @property
    def roots(self) -> tuple[Path, ...]:
        return self.overlay.roots

    async def turn_begin(self) -> None:
        try:
            await anyio.to_thread.run_sync(self.overlay.mount)
        except OverlayUnavailable as exc:
            warn_stderr(f"this turn runs without its overlay (checkpoints only): {exc}")
            return
        self.sandbox.overlay = self.overlay

    async def turn_end(self) -> None:
        with anyio.CancelScope(shield=True):  # a cancelled turn's writes are kept pending too
            if self.sandbox.overlay is None:
                return
            self.sandbox.overlay = None
            await anyio.to_thread.run_sync(self.overlay.unmount)
            files = await self.pending()
            if not files:
                return
            if self.policy == "commit":
                await self._resolve("commit", record=False)  # the turn's end checkpoint holds it
            elif self.policy == "discard":
                await self._resolve("discard", record=False)
            else:
                self.bus.emit(OverlayPending(files=files))

    async def pending(self) -> list[OverlayFile]:
        found = await anyio.to_thread.run_sync(layers.pending, self.overlay.storage, self.roots)
        return [OverlayFile.model_validate(f) for f in found]

    async def changes(self, *, diffs: bool = True) -> list[dict[str, Any]]:
        """The pending files with their diffs (the work dir's file against the overlay's)."""
        found = await anyio.to_thread.run_sync(
            partial(layers.changes, self.overlay.storage, self.roots, diffs=diffs)
        )
        return [f.model_dump(exclude_none=True) for f in found]

    async def commit(self) -> dict[str, Any]:
        return await self._resolve("commit", record=True)

    async def discard(self) -> dict[str, Any]:
        return await self._resolve("discard", record=False)

    async def _resolve(self, action: Literal["commit", "discard"], *, record: bool) -> dict[str, Any]:
        async with self._lock:
            if self.overlay.mounted:
                raise OverlayError("a turn is running in the overlay; wait for it to end")
            files = await self.pending()
            storage = self.overlay.storage
            if action == "commit":
                await anyio.to_thread.run_sync(layers.commit, storage, self.roots)
            else:
                await anyio.to_thread.run_sync(layers.discard, storage)
            checkpoint = None
            if record and files and self.workspace is not None:
                checkpoint = await self._record()
            event = OverlayApplied(action=action, files=files, checkpoint=checkpoint)
            self.bus.emit(event)
            return event.model_dump(exclude_none=True)

    async def _record(self) -> str | None:
        """A checkpoint of the committed files, counted in the last turn's changes."""
        from soulwire.engine.workspace import taken_event

        workspace = self.workspace
        assert workspace is not None
        take = partial(workspace.book.take, turn=workspace.turn, kind="overlay")
        try:
            record = await anyio.to_thread.run_sync(take)
        except Exception as exc:  # the files are committed: a failed record must not undo that
            warn_stderr(f"could not take a checkpoint of the committed overlay: {exc}")
            return None
        self.bus.emit(taken_event(record))
        return str(record["id"])
