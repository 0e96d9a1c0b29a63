"""Copy one session between any two stores (the file store and PostgreSQL, either way).

Everything the protocol holds is copied through the protocol itself: archived contexts in
order, the live context, the wire record (its messages' JSON text unchanged), the state, and the
workspace checkpoints with the objects they name. The destination must not hold the session
yet, so a copy never merges two histories."""

from __future__ import annotations

from dataclasses import dataclass

from soulwire.errors import SoulwireError
from soulwire.sessions.store import SessionStore


class TransferError(SoulwireError):
    """The copy cannot be made; the message is one line for a person."""


@dataclass
class Copied:
    contexts: int
    context_records: int
    wire_messages: int


def copy_session(source: SessionStore, target: SessionStore) -> Copied:
    """Copy `source` into `target` (an empty session of the same id or another)."""
    if not source.exists():
        raise TransferError(f"session {source.session_id} holds nothing to copy")
    if target.exists():
        raise TransferError(f"session {target.session_id} already exists at the destination")
    archived = source.archived_contexts()
    records = 0
    for index in range(1, archived + 1):
        archive = list(source.load_archived_context(index))
        records += len(archive)
        if index == 1:
            target.append_context(archive)
        else:
            target.replace_context(archive)
    live = list(source.load_context())
    records += len(live)
    if archived:
        target.replace_context(live)  # the last archive becomes one, as in the source
    else:
        target.append_context(live)
    messages = 0
    for message in source.wire_records():
        target.record_wire(message)
        messages += 1
    state = source.load_state()
    if state:
        target.save_state(state)
    target.sync()
    return Copied(contexts=archived + 1, context_records=records, wire_messages=messages)
