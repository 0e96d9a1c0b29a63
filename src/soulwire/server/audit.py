"""The audit trail of a server with named users: who prompted, approved, changed a rule,
cancelled, forked, rewound or shared, in which session, and when.

Kept where the users are: an append-only `audit.jsonl` in the share dir (one line per entry,
each written with one `write` on an O_APPEND descriptor, so concurrent writers never
interleave), or the `sw_audit` table of a PostgreSQL store. Entries are written as the action
is taken, on the event loop: they come at a person's pace (a prompt, a click), and the write
is done before the action goes on, so no action outlives a crash unrecorded."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field

from soulwire.sessions.jsonl import ensure_private_dir, iter_lines

if TYPE_CHECKING:
    from soulwire.sessions.postgres import PostgresBackend

AUDIT_FILE = "audit.jsonl"
Action = Literal[
    "prompt", "steer", "approval", "rule_add", "rule_remove", "cancel", "fork", "rewind", "share"
]
DETAIL_TEXT = 200
"""A prompt's text is kept up to this many characters (the transcript has the rest)."""


class AuditEntry(BaseModel):
    at: float = Field(description="seconds since the epoch (UTC)")
    user: str
    action: Action
    session_id: str
    detail: dict[str, Any] = Field(default_factory=dict[str, Any])


class AuditLog(Protocol):
    def append(self, entry: AuditEntry) -> None: ...
    def query(
        self, *, session_id: str | None, user: str | None, since: float | None, limit: int
    ) -> list[AuditEntry]: ...


def entry(user: str, action: Action, session_id: str, detail: dict[str, Any] | None = None) -> AuditEntry:
    return AuditEntry(at=time.time(), user=user, action=action, session_id=session_id, detail=detail or {})


def prompt_detail(params: Any) -> dict[str, Any]:
    """What a prompt or steer is remembered by: the start of its text."""
    value = params.get("user_input") if isinstance(params, dict) else None
    if isinstance(value, list):
        parts: list[Any] = value
        value = " ".join(p.get("text", "") for p in parts if isinstance(p, dict))
    return {"text": value[:DETAIL_TEXT]} if isinstance(value, str) else {}


def _matches(item: AuditEntry, session_id: str | None, user: str | None, since: float | None) -> bool:
    return (
        (session_id is None or item.session_id == session_id)
        and (user is None or item.user == user)
        and (since is None or item.at >= since)
    )


class FileAudit:
    def __init__(self, share: Path) -> None:
        self.share = share
        self.path = share / AUDIT_FILE

    def append(self, entry: AuditEntry) -> None:
        ensure_private_dir(self.share)
        line = entry.model_dump_json().encode() + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def query(
        self, *, session_id: str | None, user: str | None, since: float | None, limit: int
    ) -> list[AuditEntry]:
        """The newest `limit` entries that match, oldest first."""
        found: list[AuditEntry] = []
        if not self.path.exists():
            return found
        for _, line in iter_lines(self.path):
            try:
                item = AuditEntry.model_validate_json(line)
            except ValueError:
                continue  # a torn last line of a killed writer
            if _matches(item, session_id, user, since):
                found.append(item)
        return found[-limit:]


class PostgresAudit:
    """The `sw_audit` table of a PostgreSQL store (schema version 3)."""

    def __init__(self, backend: PostgresBackend) -> None:
        self.backend = backend

    def append(self, entry: AuditEntry) -> None:
        with self.backend.connection() as conn:
            conn.execute(
                "INSERT INTO sw_audit (at, user_name, action, session_id, detail)"
                " VALUES (%s, %s, %s, %s, %s)",
                (entry.at, entry.user, entry.action, entry.session_id, json.dumps(entry.detail)),
            )

    def query(
        self, *, session_id: str | None, user: str | None, since: float | None, limit: int
    ) -> list[AuditEntry]:
        with self.backend.connection() as conn:
            rows = conn.execute(
                "SELECT at, user_name, action, session_id, detail::text FROM ("
                " SELECT * FROM sw_audit WHERE (%(s)s::text IS NULL OR session_id = %(s)s)"
                " AND (%(u)s::text IS NULL OR user_name = %(u)s)"
                " AND (%(t)s::float8 IS NULL OR at >= %(t)s) ORDER BY n DESC LIMIT %(n)s"
                ") newest ORDER BY n",
                {"s": session_id, "u": user, "t": since, "n": limit},
            ).fetchall()
        return [
            AuditEntry(at=float(a), user=str(u), action=act, session_id=str(s), detail=json.loads(d))
            for a, u, act, s, d in rows
        ]


__all__ = ["AUDIT_FILE", "AuditEntry", "AuditLog", "FileAudit", "PostgresAudit", "entry", "prompt_detail"]
