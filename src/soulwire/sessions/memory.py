"""An in-memory session store: for embedding, tests and throw-away agents (e.g. /init)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from soulwire.sessions.store import new_session_id


@dataclass(eq=False)  # compared by identity (and cheaper to define)
class MemorySession:
    """What one session holds; records are stored as JSON text so that a caller mutating
    a dict after writing it cannot change what was stored (as with a file)."""

    context: list[str] = field(default_factory=list)
    archives: list[list[str]] = field(default_factory=list)
    wire: list[str] = field(default_factory=list)
    state: str | None = None
    objects: dict[str, bytes] = field(default_factory=dict)
    checkpoints: list[str] = field(default_factory=list)


class MemoryBackend:
    """Sessions by id. Stores opened on the same backend and id share their data, the way
    file stores opened on the same directory do."""

    def __init__(self) -> None:
        self.sessions: dict[str, MemorySession] = {}

    def open(self, session_id: str | None = None) -> MemorySessionStore:
        return MemorySessionStore(session_id or new_session_id(), backend=self)


class MemorySessionStore:
    """The SessionStore protocol over a `MemoryBackend` (a private one by default)."""

    local_checkpoints = True

    def __init__(self, session_id: str | None = None, *, backend: MemoryBackend | None = None) -> None:
        self.session_id = session_id or new_session_id()
        self._backend = backend or MemoryBackend()

    @property
    def _data(self) -> MemorySession:
        return self._backend.sessions.setdefault(self.session_id, MemorySession())

    def exists(self) -> bool:
        data = self._backend.sessions.get(self.session_id)
        return data is not None and bool(data.context or data.wire or data.archives)

    def load_context(self) -> Iterator[dict[str, Any]]:
        return (json.loads(r) for r in list(self._data.context))

    def append_context(self, records: list[dict[str, Any]]) -> None:
        self._data.context.extend(json.dumps(r, ensure_ascii=False) for r in records)

    def replace_context(self, records: list[dict[str, Any]]) -> None:
        data = self._data
        if data.context:
            data.archives.append(data.context)
        data.context = [json.dumps(r, ensure_ascii=False) for r in records]

    def archived_contexts(self) -> int:
        return len(self._data.archives)

    def load_archived_context(self, index: int) -> Iterator[dict[str, Any]]:
        archives = self._data.archives
        if not 1 <= index <= len(archives):
            return iter(())
        return (json.loads(r) for r in list(archives[index - 1]))

    def record_wire(self, message: dict[str, Any]) -> None:
        self._data.wire.append(json.dumps(message, ensure_ascii=False))

    def wire_records(self) -> Iterator[dict[str, Any]]:
        return (json.loads(r) for r in list(self._data.wire))

    def wire_records_verbatim(self) -> Iterator[tuple[dict[str, Any], bytes]]:
        return ((json.loads(r), r.encode("utf-8")) for r in list(self._data.wire))

    def has_wire_records(self) -> bool:
        data = self._backend.sessions.get(self.session_id)
        return data is not None and bool(data.wire)

    def has_open_turn(self) -> bool:
        for raw in reversed(self._data.wire):
            kind = json.loads(raw).get("type")
            if kind in ("TurnBegin", "TurnEnd"):
                return kind == "TurnBegin"
        return False

    def load_state(self) -> dict[str, Any]:
        raw = self._data.state
        return json.loads(raw) if raw else {}

    def save_state(self, state: dict[str, Any], *, wait: bool = True) -> None:  # always at once
        self._data.state = json.dumps(copy.deepcopy(state), ensure_ascii=False)

    def put_objects(self, objects: Mapping[str, bytes]) -> None:
        kept = self._data.objects
        for digest, data in objects.items():
            kept.setdefault(digest, bytes(data))

    def get_object(self, digest: str) -> bytes | None:
        return self._data.objects.get(digest)

    def has_object(self, digest: str) -> bool:
        return digest in self._data.objects

    def append_checkpoint(self, record: dict[str, Any]) -> None:
        self._data.checkpoints.append(json.dumps(record, ensure_ascii=False))

    def checkpoint_records(self) -> Iterator[dict[str, Any]]:
        return (json.loads(r) for r in list(self._data.checkpoints))

    def truncate_history(self, context_records: int, wire_messages: int) -> None:
        data = self._data
        data.context = data.context[:context_records]
        data.wire = data.wire[:wire_messages]

    def wait_for_state(self) -> None:
        pass

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass

    def delete(self) -> None:
        self._backend.sessions.pop(self.session_id, None)
