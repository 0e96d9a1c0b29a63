"""Opening a session a killed engine left inside a turn: the turn is closed in both records.

The model's view (context.jsonl) gets an error result for every tool call that never got one
and a note that the request was interrupted; the wire record gets the messages that end the
turn (sessions/interrupted.py), the approvals the client was asked and never answered among
them (their ids are in the state while they wait). The context is written first: a process
killed between the two leaves the turn open, and the next one closes it again — both halves
are idempotent."""

from __future__ import annotations

from soulwire.engine.context import Context
from soulwire.engine.state import PENDING_APPROVALS_KEY
from soulwire.sessions.interrupted import ENGINE_STOPPED, close_open_turn
from soulwire.sessions.store import SessionStore
from soulwire.wire.messages import envelope


def close_interrupted_turn(store: SessionStore, context: Context, why: str = ENGINE_STOPPED) -> list[str]:
    """Close the store's last turn if a killed process left it open; returns the ids of the
    sub-agents that turn left running (their own records are theirs to close)."""
    if not store.has_open_turn():
        return []
    state = store.load_state()
    asked = state.get(PENDING_APPROVALS_KEY)
    approvals = [i for i in asked if isinstance(i, str)] if isinstance(asked, list) else []
    open_turn = close_open_turn(store.wire_records(), why, approvals=approvals)
    context.close_interrupted(why)
    if open_turn is None:
        return []
    for message in open_turn.messages:
        store.record_wire(envelope(message))
    if PENDING_APPROVALS_KEY in state:  # answered now
        del state[PENDING_APPROVALS_KEY]
        store.save_state(state)
    return open_turn.subagents


__all__ = ["close_interrupted_turn"]
