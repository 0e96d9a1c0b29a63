"""Where sessions are kept, chosen once by configuration: the share dir's files (the embedded
default) or a shared PostgreSQL database (`serve --store URL`, `[store] url`). The engine opens
every session through `SessionStores.open`, whichever it is; nothing else picks a store class."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from soulwire.sessions.store import FileSessionStore, SessionStore


class HostedStore(SessionStore, Protocol):
    """A session's store as a host process holds it: besides the records, the local directory
    for what stays on this machine (background tasks' output, sub-agents, uploads)."""

    share: Path
    dir: Path
    work_dir: str
    existed: bool

    def ensure_dir(self) -> None: ...


class SessionStores(Protocol):
    """The factory of every session's store in one process."""

    shared: bool
    """True when other processes (replicas) read and write the same sessions."""

    def open(
        self, share: Path, work_dir: str | Path, session_id: str, *, protocol_version: str
    ) -> HostedStore: ...


class FileStores:
    """Sessions as files under the share dir (spec §7)."""

    shared = False

    def open(
        self, share: Path, work_dir: str | Path, session_id: str, *, protocol_version: str
    ) -> HostedStore:
        return FileSessionStore(share, work_dir, session_id, protocol_version=protocol_version)


FILE_STORES = FileStores()

SHARED_RECORD_WINDOW_S = 0.025
"""On a shared store, streamed text and thinking are recorded at least this often while they
grow: the record is the numbered stream every client reads, on every replica (server/hub.py),
so it must be live; the file store records each part once, whole."""


def store_url(raw_config: dict[str, Any], flag: str | None) -> str | None:
    """The store URL a process was given: `--store` wins over the config's `[store] url`."""
    if flag:
        return flag
    section = raw_config.get("store")
    url = section.get("url") if isinstance(section, dict) else None
    return url if isinstance(url, str) and url.strip() else None


__all__ = ["FILE_STORES", "SHARED_RECORD_WINDOW_S", "FileStores", "HostedStore", "SessionStores", "store_url"]
