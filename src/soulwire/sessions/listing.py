"""The sessions of a work dir as found on disk: ids, titles, sizes, times. Reads the same
files other clients read (state.json, a legacy metadata.json, wire.jsonl) and never loads a
whole context."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from soulwire.errors import SoulwireError
from soulwire.sessions.index import last_session_id, update_work_dir_index
from soulwire.sessions.jsonl import iter_lines
from soulwire.sessions.paths import (
    CONTEXT_FILE,
    WIRE_FILE,
    is_valid_session_id,
    normalise_work_dir,
    sessions_root,
)
from soulwire.sessions.store import read_state

TITLE_LENGTH = 50
_TURN_RECORD = b'"message": {"type": "TurnBegin"'


class SessionNotFound(SoulwireError, LookupError):
    """No session (or more than one) matches what the user typed."""


@dataclass
class SessionSummary:
    id: str
    dir: Path
    title: str | None
    created: float
    updated: float
    turns: int
    size: int
    is_last: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "created": self.created,
            "updated": self.updated,
            "turns": self.turns,
            "size": self.size,
            "is_last": self.is_last,
            "dir": str(self.dir),
        }


def _first_prompt_and_turns(wire: Path) -> tuple[str | None, float | None, int]:
    """(text of the first TurnBegin, time of the first record, number of turns)."""
    first: str | None = None
    created: float | None = None
    turns = 0
    for _, line in iter_lines(wire):
        if created is None and line.startswith(b'{"timestamp"'):
            try:
                created = float(json.loads(line)["timestamp"])
            except (ValueError, KeyError, TypeError):
                pass
        if _TURN_RECORD not in line:
            continue
        turns += 1
        if first is None:
            try:
                user_input = json.loads(line)["message"]["payload"]["user_input"]
            except (ValueError, KeyError, TypeError):
                continue
            first = prompt_title(user_input)
    return first, created, turns


def prompt_title(user_input: Any) -> str | None:
    """The listing's title of a session from its first prompt (a TurnBegin's `user_input`)."""
    if isinstance(user_input, list):
        parts = cast(list[Any], user_input)
        user_input = " ".join(
            p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
        )
    return " ".join(str(user_input).split())[:TITLE_LENGTH] or None


def summarise_session(directory: Path, *, is_last: bool = False) -> SessionSummary | None:
    """What the listing shows for one session directory (None if it holds no session)."""
    wire, context = directory / WIRE_FILE, directory / CONTEXT_FILE
    if not wire.exists() and not context.exists():
        return None
    files = [p for p in directory.iterdir() if p.is_file()]
    stats = [p.stat() for p in files]
    first, created, turns = _first_prompt_and_turns(wire)
    title = read_state(directory).get("custom_title")
    updated = max((s.st_mtime for s in stats), default=directory.stat().st_mtime)
    return SessionSummary(
        id=directory.name,
        dir=directory,
        title=title if isinstance(title, str) and title else first,
        created=created if created is not None else min((s.st_mtime for s in stats), default=updated),
        updated=updated,
        turns=turns,
        size=sum(s.st_size for s in stats),
        is_last=is_last,
    )


def list_sessions(share: Path, work_dir: str | Path) -> list[SessionSummary]:
    """The work dir's sessions, most recently updated first."""
    root = sessions_root(share, work_dir)
    if not root.is_dir():
        return []
    last = last_session_id(share, normalise_work_dir(work_dir))
    found: list[SessionSummary] = []
    for directory in root.iterdir():
        if directory.is_dir() and is_valid_session_id(directory.name):
            summary = summarise_session(directory, is_last=directory.name == last)
            if summary is not None:
                found.append(summary)
    return sorted(found, key=lambda s: s.updated, reverse=True)


def find_session(share: Path, work_dir: str | Path, wanted: str) -> SessionSummary:
    """The session whose id is `wanted` or starts with it (unique prefix)."""
    sessions = list_sessions(share, work_dir)
    exact = [s for s in sessions if s.id == wanted]
    if exact:
        return exact[0]
    matches = [s for s in sessions if s.id.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionNotFound(f"no session {wanted!r} in {normalise_work_dir(work_dir)}")
    raise SessionNotFound(f"{wanted!r} matches {len(matches)} sessions: " + ", ".join(s.id for s in matches))


def delete_session(share: Path, work_dir: str | Path, session: SessionSummary) -> None:
    """Remove the session's directory and forget it as the work dir's last session."""
    shutil.rmtree(session.dir)
    update_work_dir_index(share, normalise_work_dir(work_dir), None, only_if=session.id)
