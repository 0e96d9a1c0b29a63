"""One process per session: an advisory lock (flock) taken when a session is opened and
released when it is closed, or by the kernel when the process dies (even by SIGKILL), so a
crashed holder never leaves a session stuck."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, cast

from soulwire.errors import SoulwireError
from soulwire.sessions.jsonl import ensure_private_dir
from soulwire.sessions.paths import work_dir_hash

LOCKS_DIR = "locks"


class SessionBusyError(SoulwireError):
    """Another process holds the session; `holder` says which (`pid`, `host`, `since`: the
    Unix time it opened the session), as far as the lock file tells."""

    def __init__(self, session_id: str, holder: dict[str, Any]) -> None:
        self.session_id = session_id
        self.holder = holder
        super().__init__(
            f"session {session_id} is in use by another process ({describe_holder(holder)}); "
            "close it there first or open another session"
        )


def describe_holder(holder: dict[str, Any]) -> str:
    """`pid 123 on host-a since 2026-01-02 10:00:00 UTC` (what is known of it)."""
    parts = [f"pid {holder.get('pid', '?')}"]
    if holder.get("host"):
        parts.append(f"on {holder['host']}")
    since = holder.get("since")
    if isinstance(since, int | float):
        parts.append("since " + time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since)))
    return " ".join(parts)


def read_holder(fd: int) -> dict[str, Any]:
    """The holder a lock file names: JSON `{pid, host, since}`, or a bare pid (older files)."""
    raw = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    try:
        holder = json.loads(raw)
    except ValueError:
        return {"pid": int(raw)} if raw.isdigit() else {}
    return cast(dict[str, Any], holder) if isinstance(holder, dict) else {}


def lock_path(share: Path, work_dir: str | Path, session_id: str) -> Path:
    """Outside the session directory, which must not exist before the session's first write."""
    return share / LOCKS_DIR / f"{work_dir_hash(work_dir)}-{session_id}.lock"


class SessionLock:
    """Holds the lock of one session until `release` (or the process ends)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, share: Path, work_dir: str | Path, session_id: str) -> SessionLock:
        """Take the lock now or raise SessionBusyError naming the holder."""
        path = lock_path(share, work_dir, session_id)
        ensure_private_dir(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = read_holder(fd)
            os.close(fd)
            raise SessionBusyError(session_id, holder) from None
        # The file is never unlinked: a process waiting on the old inode would lock a ghost.
        import socket  # (not on the start-up path of a process that never locks)

        os.ftruncate(fd, 0)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": round(time.time(), 3)}
        os.pwrite(fd, json.dumps(me).encode(), 0)
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing the descriptor drops the flock


def is_locked(share: Path, work_dir: str | Path, session_id: str) -> bool:
    """Whether some process (this one included) holds the session now."""
    return lock_file_held(lock_path(share, work_dir, session_id))


def session_dir_locked(share: Path, session_dir: Path) -> bool:
    """`is_locked` for a session known by its directory (`sessions/<work dir hash>/<id>`)."""
    return lock_file_held(share / LOCKS_DIR / f"{session_dir.parent.name}-{session_dir.name}.lock")


def lock_file_held(path: Path) -> bool:
    """Whether some process (this one included) holds the lock file `path` now."""
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


__all__ = ["SessionBusyError", "SessionLock", "describe_holder", "is_locked", "lock_path"]
