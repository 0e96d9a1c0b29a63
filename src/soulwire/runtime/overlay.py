"""Transactional turns in a live session: the overlay switched on from the options and the
config (with the one line that says why not, when it cannot be), a commit a killed engine
left half done finished, and the commit/discard a face asks for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

from soulwire.engine.overlay import OVERLAY_DIR, OverlayError, OverlayTurns
from soulwire.sessions.jsonl import warn_stderr
from soulwire.wire.checkpoints import OverlayPolicy

if TYPE_CHECKING:
    from soulwire.runtime.builder import Runtime

FALLBACK = "--overlay {mode} is not available here ({why}); turns write the work dir directly"


def overlay_mode(runtime: Runtime) -> str:
    options, config = runtime.options, runtime.config
    return options.overlay or config.overlay


def enable_overlay(runtime: Runtime) -> None:
    """Give the soul its overlay turns when asked for and possible; else one line on stderr
    (checkpoints, when on, still record every turn)."""
    from soulwire.sessions.checkpoints.overlay import MARKER, finish_interrupted
    from soulwire.tools.overlay import Overlay

    soul = runtime.soul
    sandbox = soul.sandbox
    storage = runtime.session.store.dir / OVERLAY_DIR
    if sandbox is not None and (storage / MARKER).exists():  # a commit cut short: finish it
        finish_interrupted(storage, Overlay.for_roots(sandbox.workspace, storage).roots)
    mode = overlay_mode(runtime)
    if mode == "off" or sandbox is None:
        return
    why = _unavailable(runtime)
    if why is not None:
        warn_stderr(FALLBACK.format(mode=mode, why=why))
        return
    policy = cast(OverlayPolicy, mode)  # validated by the config model and the flag's choices
    turns = OverlayTurns(sandbox, runtime.session.store.dir, runtime.bus, policy)
    turns.workspace = soul.workspace
    soul.overlay = turns


def _unavailable(runtime: Runtime) -> str | None:
    sandbox = runtime.soul.sandbox
    if sandbox is None or not sandbox.active:
        return "it needs the sandbox: --sandbox workspace-write"
    from soulwire.tools.overlay import overlay_problem

    return overlay_problem()


async def resolve_overlay(runtime: Runtime, action: Literal["commit", "discard"]) -> dict[str, Any]:
    """Commit or discard the pending overlay while no turn runs; background tasks (they ran
    in the overlay) are stopped first."""
    from soulwire.runtime.checkpoints import stop_background

    turns = runtime.soul.overlay
    if turns is None:
        raise OverlayError("this session runs no overlay (--sandbox workspace-write --overlay ask)")
    stopped = await stop_background(runtime)
    runtime.bus.flush()
    result = await (turns.commit() if action == "commit" else turns.discard())
    return {**result, "stopped_tasks": stopped}
