"""Where a session lives on disk (spec §7.1): `<share>/sessions/<md5(work dir)>/<id>/`."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from soulwire.sessions.jsonl import ensure_private_dir

CONTEXT_FILE = "context.jsonl"
WIRE_FILE = "wire.jsonl"
STATE_FILE = "state.json"
LEGACY_METADATA_FILE = "metadata.json"
INDEX_FILE = "kimi.json"

try:  # the builtin module: hashlib would load OpenSSL (~2 ms) on every engine's start-up path
    _md5: Any = importlib.import_module("_md5").md5
except ImportError:  # a Python built without it
    _md5 = importlib.import_module("hashlib").md5


def normalise_work_dir(work_dir: str | Path) -> str:
    """Absolute, `.`/`..` resolved, symlinks kept, no trailing slash: the hashed form."""
    return os.path.normpath(os.path.abspath(os.fspath(work_dir)))


def work_dir_hash(work_dir: str | Path) -> str:
    return _md5(normalise_work_dir(work_dir).encode("utf-8")).hexdigest()


def sessions_root(share: Path, work_dir: str | Path) -> Path:
    return share / "sessions" / work_dir_hash(work_dir)


def session_dir(share: Path, work_dir: str | Path, session_id: str) -> Path:
    return sessions_root(share, work_dir) / session_id


def is_valid_session_id(session_id: str) -> bool:
    """A session id names one directory: no separators, no `.`/`..`, nothing hidden."""
    return (
        bool(session_id)
        and "/" not in session_id
        and "\\" not in session_id
        and "\x00" not in session_id
        and not session_id.startswith(".")
    )


__all__ = [
    "CONTEXT_FILE",
    "INDEX_FILE",
    "LEGACY_METADATA_FILE",
    "STATE_FILE",
    "WIRE_FILE",
    "ensure_private_dir",
    "is_valid_session_id",
    "normalise_work_dir",
    "session_dir",
    "sessions_root",
    "work_dir_hash",
]
