"""Workspace checkpoints from the SDK: list them, read what a turn changed, rewind (files,
conversation or both; undoable), fork at a turn with its own work dir. Over Wire only (the
engine negotiates them in `initialize`; they need `Options(checkpoints=True)` or an engine
configured with `[checkpoints] enabled = true`)."""

from __future__ import annotations

import os
from typing import Any

from soulwire.sdk.errors import InvalidStateError
from soulwire.sdk.jsonutil import as_object
from soulwire.wire.checkpoints import ChangesResult, ForkResult, OverlayApplied, RewindResult


class RewindConflictError(InvalidStateError):
    """The rewind would overwrite files changed by hand since the session recorded them
    (`paths`); `rewind(..., force=True)` overwrites them, keeping a copy to undo."""

    def __init__(self, error: InvalidStateError, paths: list[str]) -> None:
        super().__init__(error.code, error.message, error.data, method="rewind")
        self.paths = paths


class CheckpointCalls:
    """The checkpoint methods of a `Session` (a mixin: it lends them its connection)."""

    async def _checkpoint_call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        connection: Any = self._connection()  # pyright: ignore[reportAttributeAccessIssue]
        try:
            return as_object(await connection.call(method, params)) or {}
        except InvalidStateError as exc:
            data = exc.data if isinstance(exc.data, dict) else {}
            if data.get("reason") == "conflicts":
                raise RewindConflictError(exc, [str(p) for p in data.get("conflicts") or []]) from None
            raise

    async def checkpoints(self) -> list[dict[str, Any]]:
        """Every checkpoint and rewind of the session, oldest first (empty when they are off)."""
        result = await self._checkpoint_call("checkpoints", {})
        return [c for c in result.get("checkpoints") or [] if isinstance(c, dict)]

    async def changes(self, turn: int, *, diffs: bool = True) -> ChangesResult:
        """What turn `turn` (from 1) changed in the work dir: each file, with a unified diff."""
        return ChangesResult.model_validate(
            await self._checkpoint_call("changes", {"turn": turn, "diffs": diffs})
        )

    async def rewind(
        self,
        turn: int | None = None,
        *,
        files: bool = True,
        context: bool = True,
        force: bool = False,
        undo: bool = False,
    ) -> RewindResult:
        """Back to the start of turn `turn`: its files and/or the conversation before it (or
        `undo=True`: undo the last rewind). RewindConflictError names files changed by hand."""
        params: dict[str, Any] = {"files": files, "context": context, "force": force, "undo": undo}
        if turn is not None:
            params["turn"] = turn
        return RewindResult.model_validate(await self._checkpoint_call("rewind", params))

    async def fork(
        self,
        turn: int | None = None,
        *,
        work_dir: str | os.PathLike[str] | None = None,
        title: str | None = None,
        checkpoint: str | None = None,
    ) -> ForkResult:
        """A new session holding this one's first `turn` turns (all: None); with `work_dir`,
        that new directory holds the files as at the end of the turn. `checkpoint` (an id of
        `checkpoints()`) forks there instead: its files, the turns finished before it. Resume
        the fork with `Session(session_id=result.session_id, work_dir=result.work_dir)`."""
        params: dict[str, Any] = {}
        if checkpoint is not None:
            params["checkpoint"] = checkpoint
        if turn is not None:
            params["turn"] = turn
        if work_dir is not None:
            params["work_dir"] = os.path.abspath(os.fspath(work_dir))
        if title is not None:
            params["title"] = title
        return ForkResult.model_validate(await self._checkpoint_call("fork", params))

    async def commit_overlay(self) -> OverlayApplied:
        """Apply the pending overlay's changes to the work dir (`Options(sandbox=
        "workspace-write", overlay="ask")`): each file renamed into place, recorded as a
        checkpoint of the last turn. InvalidStateError when the session runs no overlay."""
        return OverlayApplied.model_validate(await self._checkpoint_call("overlay_commit", {}))

    async def discard_overlay(self) -> OverlayApplied:
        """Throw the pending overlay's changes away; the work dir stays as it was."""
        return OverlayApplied.model_validate(await self._checkpoint_call("overlay_discard", {}))


__all__ = ["CheckpointCalls", "RewindConflictError"]
