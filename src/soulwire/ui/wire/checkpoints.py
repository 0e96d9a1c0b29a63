"""The Wire methods of workspace checkpoints (`checkpoints`, `changes`, `rewind`, `fork`),
answered only to a client that negotiated `capabilities.supports_checkpoints` in `initialize`:
any other client gets "method not found", exactly as before they existed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from soulwire.engine.overlay import OverlayError
from soulwire.sessions.checkpoints.book import CheckpointError, CheckpointsOff, RewindConflict
from soulwire.wire import jsonrpc
from soulwire.wire.checkpoints import ChangesParams, ForkParams, OverlayChangesParams, RewindParams
from soulwire.wire.jsonrpc import RPCError, busy_error
from soulwire.wire.peer import Method, validation_error

if TYPE_CHECKING:
    from soulwire.ui.wire.server import WireServer

OFF = "checkpoints_off"
"""`data.reason` of the INVALID_STATE error of a method that needs checkpoints they are off."""
OVERLAY = "overlay"
"""`data.reason` of the INVALID_STATE error of an overlay method the session cannot do now."""
CONFLICTS = "conflicts"
"""`data.reason` of the INVALID_STATE error of a refused rewind (`data.conflicts`: the paths)."""


def _params(name: str, model: type[BaseModel], raw: Any) -> Any:
    try:
        return model.model_validate({} if raw is None else raw, strict=True)
    except ValidationError as exc:
        raise validation_error(name, exc) from None


def _error(exc: CheckpointError) -> RPCError:
    if isinstance(exc, RewindConflict):
        return RPCError(jsonrpc.INVALID_STATE, str(exc), {"reason": CONFLICTS, "conflicts": exc.paths})
    if isinstance(exc, OverlayError):
        return RPCError(jsonrpc.INVALID_STATE, str(exc), {"reason": OVERLAY})
    if isinstance(exc, CheckpointsOff):
        return RPCError(jsonrpc.INVALID_STATE, str(exc), {"reason": OFF})
    return RPCError(jsonrpc.INVALID_PARAMS, str(exc))


class CheckpointMethods:
    def __init__(self, server: WireServer) -> None:
        self.server = server

    def table(self) -> dict[str, Method]:
        return {
            "checkpoints": Method(self._guard("checkpoints", self._list)),
            "changes": Method(self._guard("changes", self._changes)),
            "rewind": Method(self._guard("rewind", self._rewind)),
            "fork": Method(self._guard("fork", self._fork)),
            "overlay_changes": Method(self._guard("overlay_changes", self._overlay_changes)),
            "overlay_commit": Method(self._guard("overlay_commit", self._overlay_commit)),
            "overlay_discard": Method(self._guard("overlay_discard", self._overlay_discard)),
        }

    def _guard(self, name: str, handler: Callable[[Any], Any]) -> Callable[[Any, str], Any]:
        @wraps(handler)  # its docstring documents the method (docs/_gen/reference.py)
        def guarded(params: Any, _id: str) -> Any:
            if not self.server.hello.supports_checkpoints:
                raise RPCError(jsonrpc.METHOD_NOT_FOUND, f"Unexpected method received: {name}")
            try:
                return handler(params)
            except CheckpointError as exc:
                raise _error(exc) from None

        return guarded

    def _list(self, _params: Any) -> dict[str, Any]:
        """Every checkpoint and rewind of the session, oldest first (negotiated: see
        `capabilities.supports_checkpoints` of `initialize`)."""
        workspace = self.server.runtime.soul.workspace
        if workspace is None:
            return {"enabled": False, "checkpoints": []}
        return {"enabled": True, "checkpoints": workspace.book.checkpoints()}

    def _changes(self, raw: Any) -> dict[str, Any]:
        """What one turn changed (files with unified diffs, and which step changed which)."""
        from soulwire.runtime.checkpoints import book_of

        params = _params("changes", ChangesParams, raw)
        return book_of(self.server.runtime).changes(params.turn, diffs=params.diffs)

    def _rewind(self, raw: Any) -> Any:
        """Rewind to the start of a turn (files, conversation or both) or undo the last rewind."""
        from soulwire.runtime.checkpoints import rewind

        params = _params("rewind", RewindParams, raw)
        if params.turn is None and not params.undo:
            raise RPCError(jsonrpc.INVALID_PARAMS, "rewind: give a turn, or undo: true")
        runtime = self.server.runtime
        return self._exclusive(
            lambda: rewind(
                runtime,
                turn=params.turn,
                files=params.files,
                context=params.context,
                force=params.force,
                undo=params.undo,
            )
        )

    def _fork(self, raw: Any) -> Any:
        """A new session from the first turns of this one, optionally with its own work dir."""
        from soulwire.runtime.checkpoints import fork

        params = _params("fork", ForkParams, raw)
        if params.checkpoint is not None and params.turn is not None:
            raise RPCError(jsonrpc.INVALID_PARAMS, "fork: give a turn or a checkpoint, not both")
        runtime = self.server.runtime
        return self._exclusive(
            lambda: fork(
                runtime,
                turn=params.turn,
                work_dir=params.work_dir,
                title=params.title,
                checkpoint=params.checkpoint,
            )
        )

    def _overlay_changes(self, raw: Any) -> Any:
        """The pending overlay's files as a turn's changes are shown: each with a unified diff
        of the work dir's file against the overlay's (`diffs: false`: the list alone)."""
        params = _params("overlay_changes", OverlayChangesParams, raw)
        turns = self.server.runtime.soul.overlay
        if turns is None:
            raise OverlayError("this session runs no overlay (--sandbox workspace-write --overlay ask)")

        async def run() -> dict[str, Any]:
            try:
                return {"files": await turns.changes(diffs=params.diffs)}
            except CheckpointError as exc:
                raise _error(exc) from None

        return run()

    def _overlay_commit(self, _params: Any) -> Any:
        """Apply the pending overlay's changes to the work dir (each file renamed into place:
        old or new, never half-written) and record them as a checkpoint of the last turn.
        Background tasks of the session are stopped first (they ran in the overlay)."""
        from soulwire.runtime.overlay import resolve_overlay

        runtime = self.server.runtime
        return self._exclusive(lambda: resolve_overlay(runtime, "commit"))

    def _overlay_discard(self, _params: Any) -> Any:
        """Throw the pending overlay's changes away: the work dir stays as it was."""
        from soulwire.runtime.overlay import resolve_overlay

        runtime = self.server.runtime
        return self._exclusive(lambda: resolve_overlay(runtime, "discard"))

    def _exclusive(self, start: Callable[[], Awaitable[dict[str, Any]]]) -> Awaitable[dict[str, Any]]:
        """Run the job while no turn runs: refused as busy during one, and a prompt is
        refused as busy while it runs (taken at once, not when the job's task starts)."""
        server = self.server
        if server.busy:
            raise busy_error()
        server.busy = True

        async def run() -> dict[str, Any]:
            try:
                return await start()
            except CheckpointError as exc:
                raise _error(exc) from None
            finally:
                server.busy = False

        return run()
