"""`replay` (Wire 1.3): re-stream a session's recorded messages to the client.

Records are read in chunks and written as they are decoded, so memory stays flat however
long the session is; the loop yields to the event loop regularly so that `cancel` lands."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio.lowlevel

from soulwire.wire.jsonrpc import encode, request_line
from soulwire.wire.messages import EVENT_TYPES, LEGACY_NAMES, REQUEST_TYPES, legacy_subagent_envelope

YIELD_EVERY = 256
_EVENT_NAMES = frozenset(EVENT_TYPES) | {"ContentPart"}


@dataclass
class ReplayCounts:
    events: int = 0
    requests: int = 0


_EVENT_HEAD = b'{"jsonrpc":"2.0","method":"event","params":'


def _event_line(kind: str, payload: dict[str, Any]) -> bytes:
    return (
        encode({"jsonrpc": "2.0", "method": "event", "params": {"type": kind, "payload": payload}}) + "\n"
    ).encode()


async def replay_records(
    records: Iterable[tuple[dict[str, Any], bytes]],
    write: Callable[[bytes], None],
    *,
    hidden: frozenset[str] = frozenset(),
    counts: ReplayCounts | None = None,
    legacy_subagents: bool = False,
) -> ReplayCounts:
    """Write every replayable record as an `event` or a `request` (JSON-RPC id = payload
    id) and count them. `records` pairs each message with its stored JSON text, which events
    reuse as they are instead of being encoded again. Records of unknown types, with a bad
    payload, or of types the client does not know (`hidden`) are skipped, also inside a
    SubagentEvent; legacy names are written under their new name, and SubagentEvents in the
    1.5 shape when `legacy_subagents` (as the live stream sends them to such a client)."""
    counts = counts if counts is not None else ReplayCounts()
    for index, (message, text) in enumerate(records):
        if index % YIELD_EVERY == 0:
            await anyio.lowlevel.checkpoint()
        kind = message.get("type")
        payload = message.get("payload", {})
        if not isinstance(kind, str) or not isinstance(payload, dict):
            continue
        if kind in hidden:
            continue
        if kind == "SubagentEvent":
            inner = payload.get("event")
            if isinstance(inner, dict) and inner.get("type") in hidden:
                continue
            if legacy_subagents:
                parent = payload.get("parent_tool_call_id") or payload.get("task_tool_call_id")
                envelope = legacy_subagent_envelope(parent if isinstance(parent, str) else None, inner)
                write(_event_line(kind, envelope["payload"]))
                counts.events += 1
                continue
        if kind in REQUEST_TYPES:
            write(request_line(str(payload.get("id", "")), kind, payload))
            counts.requests += 1
        elif kind in _EVENT_NAMES and "payload" in message:
            write(_EVENT_HEAD + text + b"}\n")
            counts.events += 1
        elif kind in LEGACY_NAMES or kind in _EVENT_NAMES:
            kind = LEGACY_NAMES.get(kind, kind)
            if kind not in hidden:
                write(_event_line(kind, payload))
                counts.events += 1
    return counts
