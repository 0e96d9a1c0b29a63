"""`<share>/kimi.json`: the work dirs seen and each one's last session (spec §7.1), read by
`--continue` and by the Node SDK's workspace listing."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soulwire.sessions.jsonl import ensure_private_dir
from soulwire.sessions.paths import INDEX_FILE


@contextmanager
def _locked(share: Path) -> Generator[None]:
    """Serialise read-modify-write of the index between engine processes."""
    ensure_private_dir(share)
    fd = os.open(share / f".{INDEX_FILE}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not POSIX: best effort
            pass
        yield
    finally:
        os.close(fd)


def _read_with_text(share: Path) -> tuple[dict[str, Any], str | None]:
    """The index's data and its text on disk (`{}` and None when missing or not an object)."""
    try:
        text = (share / INDEX_FILE).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError):
        return {}, None
    if not isinstance(data, dict):
        return {}, None
    return data, text


def _read(share: Path) -> dict[str, Any]:
    return _read_with_text(share)[0]


def _entries(data: dict[str, Any]) -> list[Any]:
    entries = data.get("work_dirs")
    return entries if isinstance(entries, list) else []


def _write(share: Path, text: str) -> None:
    tmp = share / f".{INDEX_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, share / INDEX_FILE)


def _dumps(data: Any) -> str:
    # Compact: the C encoder (indented JSON takes the pure-Python one, 3x slower), and the
    # index holds every work dir ever used (a fleet adds one per task).
    return json.dumps(data, ensure_ascii=False)


@dataclass
class _Loaded:
    """The index as read or last written by this process: its data, its text on disk, and
    the entries by work dir."""

    data: dict[str, Any]
    text: str | None
    by_path: dict[Any, Any]

    @classmethod
    def read(cls, share: Path) -> _Loaded:
        data, text = _read_with_text(share)
        by_path: dict[Any, Any] = {}
        for entry in _entries(data):
            if isinstance(entry, dict):
                by_path.setdefault(entry.get("path"), entry)  # the first, as readers see it
        return cls(data, text, by_path)

    def text_with(self, appended: list[dict[str, Any]]) -> str | None:
        """The text of the index with `appended` (already in `data`) added to the end of its
        list, spliced into the text on disk instead of encoding every work dir again (twenty
        thousand of them take ~70 ms: ten sessions' worth of CPU). None when the text is not
        one object with a non-empty `work_dirs` list that ends it: then the `]` before the
        closing `}` is that list's, whatever the spacing elsewhere."""
        text = self.text
        if text is None or list(self.data) != ["work_dirs"] or not text.endswith("]}"):
            return None
        before = len(_entries(self.data)) - len(appended)
        if before <= 0:
            return None
        return text[:-2] + "".join(", " + _dumps(entry) for entry in appended) + "]}"


_parsed: dict[Path, tuple[tuple[int, int, int], _Loaded]] = {}
"""The index as this process last read or wrote it, by the file's (inode, size, mtime): every
session updates the index two or three times, and most updates change nothing; with one work
dir per fleet task the file grows, and parsing it each time made a session's cost grow with
the number of sessions before it. Used under the index lock only."""


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _read_for_update(share: Path) -> _Loaded:
    """The index (under the lock): the last read or write when the file is still that one,
    else a fresh read. The caller owns the result until it hands it to `_remember`."""
    identity = _identity(share / INDEX_FILE)
    cached = _parsed.pop(share, None)
    if identity is not None and cached is not None and cached[0] == identity:
        return cached[1]
    return _Loaded.read(share)


def _remember(share: Path, loaded: _Loaded) -> None:
    identity = _identity(share / INDEX_FILE)
    if identity is not None:
        _parsed[share] = (identity, loaded)


_pending_lock = threading.Lock()
"""Guards `_pending`, `_writers` and `_known`: updates queued per share dir, who writes them,
and what this process last wrote or read for a work dir."""
_pending: dict[Path, list[tuple[str, str | None, str | None]]] = {}
_writers: dict[Path, threading.Lock] = {}
_known: dict[tuple[Path, str], str | None] = {}
"""Each work dir's last session as this process last wrote or read it. A session sets its
work dir's entry when it is created, again when it has content and again when it closes; the
later two change nothing, yet each read the whole index (two engines of a fleet, writing in
turn, made every read a parse: the index holds every work dir ever used, so a session cost
more with every fleet run before it). Another process may have changed the entry since: then
the last session is whichever of the two wrote last, as with concurrent writes anyway."""
_KNOWN_MAX = 4096


def update_work_dir_index(
    share: Path, work_dir: str, last_session_id: str | None, *, only_if: str | None = None
) -> None:
    """Record the work dir and its last session. With `only_if`, the entry is changed only
    while it still names that session (used when forgetting a deleted session).

    Thread-safe, and updates from many threads are written together: the index is one file
    rewritten whole, and a server creating fifty sessions at once (a fleet) would otherwise
    rewrite it fifty times in a row under the lock. Returns once the update is on disk."""
    with _pending_lock:
        if only_if is None and _known.get((share, work_dir), "") == last_session_id:
            return  # (a real id is never "")
        _pending.setdefault(share, []).append((work_dir, last_session_id, only_if))
        writer = _writers.setdefault(share, threading.Lock())
    with writer:  # whoever holds it writes every update queued so far, ours included
        with _pending_lock:
            batch = _pending.pop(share, [])
        if batch:
            _apply(share, batch)


def _apply(share: Path, batch: list[tuple[str, str | None, str | None]]) -> None:
    with _locked(share):
        loaded = _read_for_update(share)
        data, by_path = loaded.data, loaded.by_path
        entries = _entries(data)
        appended: list[dict[str, Any]] = []
        modified = False
        for work_dir, last_session_id, only_if in batch:
            entry = by_path.get(work_dir)
            if entry is None:
                if only_if is None:
                    entry = {"path": work_dir, "kaos": "local", "last_session_id": last_session_id}
                    entries.append(entry)
                    by_path[work_dir] = entry
                    appended.append(entry)
            elif entry.get("last_session_id") != last_session_id and (
                only_if is None or entry.get("last_session_id") == only_if
            ):
                entry["last_session_id"] = last_session_id
                modified = True
        if appended or modified:  # a session announced, then closed, with the same id: no write
            data["work_dirs"] = entries
            text = None if modified else loaded.text_with(appended)
            loaded.text = text if text is not None else _dumps(data)
            _write(share, loaded.text)  # (an error here remembers nothing: the next update reads)
        _remember(share, loaded)
    with _pending_lock:
        for work_dir, _, _ in batch:
            entry = by_path.get(work_dir)
            if entry is not None:
                _known.pop((share, work_dir), None)  # (re-inserted last: the oldest go first)
                _known[(share, work_dir)] = entry.get("last_session_id")
        while len(_known) > _KNOWN_MAX:
            del _known[next(iter(_known))]


def last_session_id(share: Path, work_dir: str) -> str | None:
    for entry in _entries(_read(share)):
        if isinstance(entry, dict) and entry.get("path") == work_dir:
            value = entry.get("last_session_id")
            return value if isinstance(value, str) and value else None
    return None


def known_work_dirs(share: Path) -> list[str]:
    """Every work dir the index has seen, in the order they were first used."""
    return [
        entry["path"]
        for entry in _entries(_read(share))
        if isinstance(entry, dict) and isinstance(entry.get("path"), str)
    ]
