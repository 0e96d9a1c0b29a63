"""The session store: a session's context records, wire record and state."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from soulwire.sessions.jsonl import JsonlAppender, read_jsonl
from soulwire.sessions.paths import ensure_private_dir, normalise_work_dir, session_dir

WIRE_METADATA_TYPE = "metadata"


class SessionStore(Protocol):
    """Persistence of one session. Records are plain JSON objects."""

    session_id: str

    def load_context(self) -> list[dict[str, Any]]: ...

    def append_context(self, records: list[dict[str, Any]]) -> None: ...

    def rotate_context(self) -> None: ...

    def record_wire(self, message: dict[str, Any]) -> None: ...

    def wire_records(self) -> Iterator[dict[str, Any]]: ...

    def load_state(self) -> dict[str, Any]: ...

    def save_state(self, state: dict[str, Any]) -> None: ...


class FileSessionStore:
    """The on-disk layout existing clients read (spec §7): context.jsonl, wire.jsonl, state.json."""

    def __init__(self, share: Path, work_dir: str | Path, session_id: str, *, protocol_version: str) -> None:
        self.share = share
        self.work_dir = normalise_work_dir(work_dir)
        self.session_id = session_id
        self.dir = session_dir(share, work_dir, session_id)
        self.protocol_version = protocol_version
        self.existed = (self.dir / "context.jsonl").exists() or (self.dir / "wire.jsonl").exists()
        self._context = JsonlAppender(self.dir / "context.jsonl")
        self._wire = JsonlAppender(self.dir / "wire.jsonl")
        self._wire_has_header: bool | None = None

    @classmethod
    def new_id(cls) -> str:
        return str(uuid.uuid4())

    def ensure_dir(self) -> None:
        ensure_private_dir(self.dir)

    # context -----------------------------------------------------------
    def load_context(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self.dir / "context.jsonl"))

    def append_context(self, records: list[dict[str, Any]]) -> None:
        self._context.append_many(records)

    def rotate_context(self) -> None:
        """Move context.jsonl aside to the next free context_<k>.jsonl."""
        self._context.close()
        current = self.dir / "context.jsonl"
        if not current.exists():
            return
        k = 1
        while (self.dir / f"context_{k}.jsonl").exists():
            k += 1
        current.rename(self.dir / f"context_{k}.jsonl")

    # wire record -------------------------------------------------------
    def record_wire(self, message: dict[str, Any]) -> None:
        records: list[dict[str, Any]] = []
        if self._wire_has_header is None:
            self._wire_has_header = not self._wire.is_empty()
        if not self._wire_has_header:
            records.append({"type": WIRE_METADATA_TYPE, "protocol_version": self.protocol_version})
            self._wire_has_header = True
        records.append({"timestamp": time.time(), "message": message})
        self._wire.append_many(records)

    def wire_records(self) -> Iterator[dict[str, Any]]:
        for record in read_jsonl(self.dir / "wire.jsonl"):
            message = record.get("message")
            if record.get("type") == WIRE_METADATA_TYPE or not isinstance(message, dict):
                continue
            yield message  # pyright: ignore[reportUnknownVariableType]

    def has_wire_records(self) -> bool:
        return any(True for _ in self.wire_records())

    # state -------------------------------------------------------------
    def load_state(self) -> dict[str, Any]:
        try:
            value = json.loads((self.dir / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}  # pyright: ignore[reportUnknownVariableType]

    def save_state(self, state: dict[str, Any]) -> None:
        """Atomic replace: a crash leaves the old or the new state, never half of one."""
        self.ensure_dir()
        tmp = self.dir / f".state.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle, ensure_ascii=False, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.dir / "state.json")

    def close(self) -> None:
        self._context.close()
        self._wire.close()


def update_work_dir_index(share: Path, work_dir: str, last_session_id: str | None) -> None:
    """Record the work dir and its last session in `<share>/kimi.json` (read by the Node SDK)."""
    path = share / "kimi.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    entries: list[Any] = data.get("work_dirs") if isinstance(data.get("work_dirs"), list) else []  # type: ignore[assignment]
    for entry in entries:
        if isinstance(entry, dict) and entry.get("path") == work_dir:
            entry["last_session_id"] = last_session_id
            break
    else:
        entries.append({"path": work_dir, "kaos": "local", "last_session_id": last_session_id})
    data["work_dirs"] = entries
    ensure_private_dir(share)
    tmp = share / f".kimi.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def last_session_id(share: Path, work_dir: str) -> str | None:
    try:
        data = json.loads((share / "kimi.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for entry in data.get("work_dirs", []) if isinstance(data, dict) else []:
        if isinstance(entry, dict) and entry.get("path") == work_dir:
            value = entry.get("last_session_id")
            return value if isinstance(value, str) else None
    return None
