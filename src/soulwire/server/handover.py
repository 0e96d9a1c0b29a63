"""Handing sessions over to other replicas on a shared store: drain → release → re-attach.

A session handed over is closed here once it is idle (a running turn is never cut short for
it): its clients' connections are closed with code 1012 ("service restart": re-attach), its
ownership is released, and the next replica a client reaches takes it from the store, where
the client re-attaches from its last `seq`. Draining a replica (before an upgrade) hands all
its sessions over and keeps it from taking any: its `/healthz` answers 503 so the load
balancer takes it out of the ring, and a session opened here meanwhile is refused with 503
(clients retry, and reach another replica)."""

from __future__ import annotations

import anyio

from soulwire.server.hub import LiveSession
from soulwire.server.registry import SessionError, SessionRegistry

HANDED_OVER = (1012, "the session was handed over to another replica: re-attach")
"""The close code and reason of a handed-over session's connections."""
_IDLE_POLL_S = 0.1
RELEASE_S = 30.0
"""How long a session that has ended may take to release its ownership in the store."""


async def hand_over(registry: SessionRegistry, session_id: str, *, wait_s: float = 0.0) -> bool:
    """Release one session this replica runs once it is idle (within `wait_s`: 409 when a
    turn still runs then); False when it does not run here (nothing to release)."""
    _shared(registry)
    live = registry.live.get(session_id)
    if live is None or live.closed:
        registry.locate(session_id)  # 404 for a session that does not exist
        return False
    with anyio.move_on_after(wait_s):
        while live.busy:
            await anyio.sleep(_IDLE_POLL_S)  # the turn's end has no event of its own to wait on
    if live.busy:
        raise SessionError(409, f"session {session_id} is running a turn; hand it over when it is idle")
    await _release(registry, live)
    return True


async def drain(registry: SessionRegistry, *, wait_s: float) -> dict[str, int]:
    """Take no more sessions and hand every live one over, each as soon as it is idle (at
    most `wait_s`); how many were handed over and how many still run a turn."""
    _shared(registry)
    registry.draining = True
    handed = 0
    with anyio.move_on_after(wait_s):
        while registry.live:
            idle = [live for live in registry.live.values() if not live.busy and not live.closed]
            for live in idle:
                await _release(registry, live)
            handed += len(idle)
            if registry.live:
                await anyio.sleep(_IDLE_POLL_S)
    return {"handed_over": handed, "running": len(registry.live)}


def _shared(registry: SessionRegistry) -> None:
    if registry.replica is None:
        raise SessionError(422, "sessions are handed over between replicas of a shared store (serve --store)")


async def _release(registry: SessionRegistry, live: LiveSession) -> None:
    live.close_code = HANDED_OVER
    live.close()
    await live.finished.wait()
    held = registry.replica.ownership.held if registry.replica else set[str]()
    with anyio.move_on_after(RELEASE_S):
        while live.id in held:  # released by the registry as the session ends, on a worker thread
            await anyio.sleep(0.01)
    if live.id in held:
        raise SessionError(503, f"session {live.id} has ended here but its ownership was not released")


__all__ = ["HANDED_OVER", "drain", "hand_over"]
