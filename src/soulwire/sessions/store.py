"""The session store: a session's context records, wire record and state.

`SessionStore` is the protocol the engine writes through; `FileSessionStore` keeps the
on-disk layout existing clients read (spec §7) and `MemorySessionStore` (sessions.memory)
keeps everything in memory. Both pass `soulwire.sessions.conformance`."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from soulwire.errors import SoulwireError
from soulwire.ids import uuid4
from soulwire.sessions.checkpoints.files import CheckpointFiles, truncate_jsonl
from soulwire.sessions.jsonl import (
    Decoder,
    JsonlAppender,
    encode_record,
    ensure_private_dir,
    fast_decoder,
    iter_lines,
    last_lines,
    read_jsonl,
    warn_stderr,
    write_all,
)
from soulwire.sessions.paths import (
    CONTEXT_FILE,
    LEGACY_METADATA_FILE,
    STATE_FILE,
    WIRE_FILE,
    normalise_work_dir,
    session_dir,
)

WIRE_METADATA_TYPE = "metadata"
LEGACY_WIRE_VERSION = "1.1"
"""The version of a wire.jsonl written before the metadata header existed."""
_TURN_MARKERS = (b'"TurnBegin"', b'"TurnEnd"')


class StoreUnavailable(SoulwireError):
    """The store cannot be reached now (a database that is down): the call wrote nothing, and
    the message is one line for a person. A server refuses prompts until the store is back."""


class SessionStore(Protocol):
    """Persistence of one session. Records are plain JSON objects; every write is durable
    against a killed process once the call returns."""

    session_id: str
    local_checkpoints: bool
    """Whether the checkpoint writes (`put_objects`, `append_checkpoint`) are appends to local
    files or memory, quick enough for a small checkpoint to be taken on the event loop (a
    database's round trips are not)."""

    def exists(self) -> bool:
        """Whether anything was ever stored for this session (context or wire record)."""
        ...

    # context.jsonl: the model-visible history
    def load_context(self) -> Iterator[dict[str, Any]]: ...

    def append_context(self, records: list[dict[str, Any]]) -> None: ...

    def replace_context(self, records: list[dict[str, Any]]) -> None:
        """Archive the current context (context_<k>) and start a new one holding `records`,
        atomically: a crash leaves either the old context or the new one."""
        ...

    def archived_contexts(self) -> int:
        """How many contexts were archived (by /clear or compaction)."""
        ...

    def load_archived_context(self, index: int) -> Iterator[dict[str, Any]]:
        """Records of archived context `index` (1 = the oldest)."""
        ...

    # wire.jsonl: the merged event record
    def record_wire(self, message: dict[str, Any]) -> None:
        """Append one `{type, payload}` message (the header is written first if needed)."""
        ...

    def wire_records(self) -> Iterator[dict[str, Any]]:
        """The recorded `{type, payload}` messages in order (header and bad lines skipped)."""
        ...

    def wire_records_verbatim(self) -> Iterator[tuple[dict[str, Any], bytes]]:
        """Each recorded message with its JSON text exactly as stored (for fast replay)."""
        ...

    def has_wire_records(self) -> bool: ...

    def has_open_turn(self) -> bool:
        """Whether the last recorded turn has a TurnBegin but no TurnEnd (process killed)."""
        ...

    # state.json
    def load_state(self) -> dict[str, Any]: ...

    def save_state(self, state: dict[str, Any], *, wait: bool = True) -> None:
        """Replace the state. `wait=False`: the (still atomic and durable) write may finish on
        a background thread; the next save, load, close or delete waits for it."""
        ...

    def wait_for_state(self) -> None:
        """Return once a state write started with `wait=False` is on disk."""
        ...

    # checkpoints of the workspace (sessions/checkpoints)
    def put_objects(self, objects: Mapping[str, bytes]) -> None:
        """Keep each value under its key (the digest of its content): all of them once the call
        returns, none half-written; a key already kept is left as it is."""
        ...

    def get_object(self, digest: str) -> bytes | None: ...

    def has_object(self, digest: str) -> bool: ...

    def append_checkpoint(self, record: dict[str, Any]) -> None:
        """Append one record (a JSON object) to the checkpoint log, durably."""
        ...

    def checkpoint_records(self) -> Iterator[dict[str, Any]]:
        """The checkpoint log in order (a torn last record skipped)."""
        ...

    def truncate_history(self, context_records: int, wire_messages: int) -> None:
        """Keep the first `context_records` context records and `wire_messages` wire messages
        (a rewind of the conversation), each atomically; no archive is made (the caller
        keeps what it cut)."""
        ...

    def sync(self) -> None: ...

    def close(self) -> None: ...

    def delete(self) -> None:
        """Remove everything stored for the session."""
        ...


def new_session_id() -> str:
    return uuid4()


def _message_of(record: dict[str, Any]) -> dict[str, Any] | None:
    message = record.get("message")
    if record.get("type") == WIRE_METADATA_TYPE or not isinstance(message, dict):
        return None
    if not isinstance(message.get("type"), str):
        return None
    return message


_RECORD_HEAD = b'{"timestamp": '
_MESSAGE_KEY = b', "message": '


def _message_text(line: bytes, record: dict[str, Any]) -> bytes | None:
    """The `message` value's text inside a valid record line of the recorder's own shape
    (`{"timestamp": <number>, "message": {...}}`), without re-encoding it; else None."""
    if len(record) != 2 or not line.startswith(_RECORD_HEAD):
        return None
    if not isinstance(record.get("timestamp"), int | float):
        return None
    start = line.find(_MESSAGE_KEY, len(_RECORD_HEAD))
    end = line.rstrip().rfind(b"}")
    if start < 0 or end < 0:
        return None
    # A number holds no `, "message": `, so the first match ends the timestamp.
    return line[start + len(_MESSAGE_KEY) : end].strip()


class FileSessionStore:
    """The on-disk layout existing clients read (spec §7): context.jsonl, wire.jsonl,
    state.json in `<share>/sessions/<md5(work dir)>/<id>/`. Nothing is created on disk
    until the first write, so a session nobody used leaves no trace."""

    local_checkpoints = True

    def __init__(self, share: Path, work_dir: str | Path, session_id: str, *, protocol_version: str) -> None:
        self.share = share
        self.work_dir = normalise_work_dir(work_dir)
        self.session_id = session_id
        self._open(session_dir(share, work_dir, session_id), protocol_version)

    def _open(self, directory: Path, protocol_version: str) -> None:
        """Point the store at `directory` (files there are created at the first write)."""
        self.dir = directory
        self.protocol_version = protocol_version
        self.existed = self.exists()
        self._context = JsonlAppender(directory / CONTEXT_FILE)
        self._wire = JsonlAppender(directory / WIRE_FILE)
        self._wire_has_header: bool | None = None
        self._state_write: Future[None] | None = None
        self._checkpoints = CheckpointFiles(directory)

    @classmethod
    def new_id(cls) -> str:
        return new_session_id()

    def exists(self) -> bool:
        return (self.dir / CONTEXT_FILE).exists() or (self.dir / WIRE_FILE).exists()

    def ensure_dir(self) -> None:
        ensure_private_dir(self.dir)

    # context -----------------------------------------------------------
    def load_context(self, *, decode: Decoder | None = None) -> Iterator[dict[str, Any]]:
        return read_jsonl(self.dir / CONTEXT_FILE, decode=decode or fast_decoder())

    def append_context(self, records: list[dict[str, Any]]) -> None:
        self._context.append_many(records)

    def _archive_path(self, index: int) -> Path:
        return self.dir / f"context_{index}.jsonl"

    def archived_contexts(self) -> int:
        count = 0
        while self._archive_path(count + 1).exists():
            count += 1
        return count

    def load_archived_context(self, index: int) -> Iterator[dict[str, Any]]:
        return read_jsonl(self._archive_path(index), decode=fast_decoder())

    def replace_context(self, records: list[dict[str, Any]]) -> None:
        self._context.close()  # the next append must open the new file, not the archived inode
        self.ensure_dir()
        current = self.dir / CONTEXT_FILE
        fresh = self.dir / f".{CONTEXT_FILE}.new"
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_all(fd, "".join(encode_record(r) + "\n" for r in records).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if current.exists():
            archive = self._archive_path(self.archived_contexts() + 1)
            try:
                os.link(current, archive)  # the old context stays in place until the swap
            except OSError:
                shutil.copy2(current, archive)
        os.replace(fresh, current)
        _fsync_dir(self.dir)

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

    def wire_records(self, *, decode: Decoder | None = None) -> Iterator[dict[str, Any]]:
        for record in read_jsonl(self.dir / WIRE_FILE, decode=decode or fast_decoder()):
            message = _message_of(record)
            if message is not None:
                yield message

    def wire_records_verbatim(self) -> Iterator[tuple[dict[str, Any], bytes]]:
        decode = fast_decoder()
        for number, line in iter_lines(self.dir / WIRE_FILE):
            if not line.strip():
                continue
            try:
                record = decode(line)  # validates the whole line: a torn line never gets out
            except ValueError:
                warn_stderr(f"skipping malformed line {number} of {self.dir / WIRE_FILE}")
                continue
            message = _message_of(record) if isinstance(record, dict) else None
            if message is not None:
                yield message, _message_text(line, record) or encode_record(message).encode()

    def has_wire_records(self) -> bool:
        # stdlib json: the lean start-up path asks this before pydantic is loaded
        return any(True for _ in self.wire_records(decode=json.loads))

    def wire_protocol_version(self) -> str | None:
        """The version in the metadata header; None when there is no file yet."""
        for record in read_jsonl(self.dir / WIRE_FILE, warn=lambda _: None):
            if record.get("type") == WIRE_METADATA_TYPE:
                return str(record.get("protocol_version", LEGACY_WIRE_VERSION))
            return LEGACY_WIRE_VERSION
        return None

    def has_open_turn(self) -> bool:
        for line in last_lines(self.dir / WIRE_FILE, contains=_TURN_MARKERS):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            message = _message_of(record) if isinstance(record, dict) else None
            if message is not None and message["type"] in ("TurnBegin", "TurnEnd"):
                return message["type"] == "TurnBegin"
        return False

    # state -------------------------------------------------------------
    def load_state(self) -> dict[str, Any]:
        self.wait_for_state()
        return read_state(self.dir)

    def save_state(self, state: dict[str, Any], *, wait: bool = True) -> None:
        """Atomic replace: a crash leaves the old or the new state, never half of one. With
        `wait=False` the write (its fsync can take tens of milliseconds on a busy disk) runs
        on the one background writer, so an event loop calling this does not stall."""
        data = json.dumps(state, ensure_ascii=False, indent=2).encode("utf-8")  # `state` may change next
        self.ensure_dir()
        self.wait_for_state()
        if wait:
            self._replace_state(data)
        else:
            self._state_write = _state_writer().submit(self._replace_state_reporting, data)

    def _replace_state(self, data: bytes) -> None:
        tmp = self.dir / f".{STATE_FILE}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / STATE_FILE)

    def _replace_state_reporting(self, data: bytes) -> None:
        try:
            self._replace_state(data)
        except OSError as exc:  # nobody waits on a background write to raise it to
            warn_stderr(f"could not save {self.dir / STATE_FILE}: {exc}")

    def wait_for_state(self) -> None:
        """Let a background state write finish (keeps saves in order and reads current)."""
        pending, self._state_write = self._state_write, None
        if pending is not None:
            pending.result()

    # checkpoints -------------------------------------------------------
    def put_objects(self, objects: Mapping[str, bytes]) -> None:
        self._checkpoints.put_objects(objects)

    def get_object(self, digest: str) -> bytes | None:
        return self._checkpoints.get_object(digest)

    def has_object(self, digest: str) -> bool:
        return self._checkpoints.has_object(digest)

    def append_checkpoint(self, record: dict[str, Any]) -> None:
        self._checkpoints.append_checkpoint(record)

    def checkpoint_records(self) -> Iterator[dict[str, Any]]:
        return self._checkpoints.checkpoint_records()

    def truncate_history(self, context_records: int, wire_messages: int) -> None:
        self._context.close()  # the next append must open the new file
        self._wire.close()
        decode = fast_decoder()

        def is_record(line: bytes) -> bool:
            try:
                return isinstance(decode(line), dict)
            except ValueError:
                return False

        def is_message(line: bytes) -> bool:
            try:
                record = decode(line)
            except ValueError:
                return False
            return isinstance(record, dict) and _message_of(record) is not None

        if (self.dir / CONTEXT_FILE).exists():
            truncate_jsonl(self.dir / CONTEXT_FILE, context_records, is_record)
        if (self.dir / WIRE_FILE).exists():
            truncate_jsonl(self.dir / WIRE_FILE, wire_messages, is_message)

    # lifecycle ---------------------------------------------------------
    def sync(self) -> None:
        self._context.sync()
        self._wire.sync()

    def close(self) -> None:
        self.wait_for_state()
        self._context.close()
        self._wire.close()
        self._checkpoints.close()

    def delete(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)


_writer_lock = threading.Lock()
_writer: ThreadPoolExecutor | None = None


def _state_writer() -> ThreadPoolExecutor:
    """The process's one state writer thread (writes stay in order). Saves come from sync
    code on the event loop, where no task group is at hand to start an anyio worker from;
    pending writes finish before the interpreter exits."""
    global _writer
    with _writer_lock:
        if _writer is None:
            _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="soulwire-state")
        return _writer


def read_state(directory: Path) -> dict[str, Any]:
    """state.json of a session directory ({} when absent or unreadable)."""
    state = _read_json_object(directory / STATE_FILE)
    if not state.get("custom_title"):
        # A legacy metadata.json (written by older engines and SDKs) may hold the title.
        title = _read_json_object(directory / LEGACY_METADATA_FILE).get("title")
        if isinstance(title, str) and title:
            state["custom_title"] = title
    return state


def _read_json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = [
    "LEGACY_WIRE_VERSION",
    "WIRE_METADATA_TYPE",
    "FileSessionStore",
    "SessionStore",
    "StoreUnavailable",
    "new_session_id",
    "read_state",
    "warn_stderr",
]
