"""Where a session lives on disk (spec §7.1): `<share>/sessions/<md5(work dir)>/<id>/`."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def normalise_work_dir(work_dir: str | Path) -> str:
    """Absolute, `.`/`..` resolved, symlinks kept, no trailing slash: the hashed form."""
    return os.path.normpath(os.path.abspath(os.fspath(work_dir)))


def work_dir_hash(work_dir: str | Path) -> str:
    return hashlib.md5(normalise_work_dir(work_dir).encode("utf-8")).hexdigest()


def sessions_root(share: Path, work_dir: str | Path) -> Path:
    return share / "sessions" / work_dir_hash(work_dir)


def session_dir(share: Path, work_dir: str | Path, session_id: str) -> Path:
    return sessions_root(share, work_dir) / session_id


def ensure_private_dir(path: Path) -> Path:
    """Create a directory (and parents) readable by the user only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path
