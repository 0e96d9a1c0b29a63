"""Sessions kept in PostgreSQL as a host process sees them: the store factory (`SessionStores`)
and the catalog a server lists, finds and describes sessions from (the share dir's files are
the other catalog, read by server/registry.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from soulwire.sessions.listing import SessionSummary, prompt_title
from soulwire.sessions.paths import normalise_work_dir
from soulwire.sessions.postgres import PostgresBackend, PostgresSessionStore


class PostgresStores:
    """Every session's store in one shared database (`SessionStores`)."""

    shared = True

    def __init__(self, backend: PostgresBackend) -> None:
        self.backend = backend

    def open(
        self, share: Path, work_dir: str | Path, session_id: str, *, protocol_version: str
    ) -> PostgresSessionStore:
        store = PostgresSessionStore(
            self.backend, session_id, work_dir=normalise_work_dir(work_dir), share=share
        )
        store.existed = store.exists()
        return store

    def work_dir_of(self, session_id: str) -> str | None:
        """The session's work dir; None when the store holds no such session."""
        with self.backend.connection() as conn:
            row = conn.execute("SELECT work_dir FROM sw_sessions WHERE id = %s", (session_id,)).fetchone()
        return str(row[0]) if row else None

    def entries(self) -> list[tuple[str, str]]:
        """(id, work dir) of every session, the most recently written first."""
        with self.backend.connection() as conn:
            rows = conn.execute("SELECT id, work_dir FROM sw_sessions ORDER BY updated_at DESC").fetchall()
        return [(str(i), str(w)) for i, w in rows]

    def described(
        self, session_ids: list[str] | None, local_dir: Callable[[str], Path]
    ) -> dict[str, tuple[SessionSummary, dict[str, Any]]]:
        """Each session's summary (what the listing shows, as `listing.summarise_session` does for
        a directory) and state, in one query (`None`: every session): a listing of many
        sessions costs one round trip, not three per session."""
        where, params = ("", ()) if session_ids is None else (" WHERE s.id = ANY(%s)", (session_ids,))
        with self.backend.connection() as conn:
            rows = conn.execute(
                "SELECT s.id, s.state, extract(epoch FROM s.created_at)::float8,"
                " extract(epoch FROM s.updated_at)::float8,"
                " (SELECT count(*) FROM sw_wire w WHERE w.session_id = s.id AND w.kind = 'TurnBegin'),"
                " (SELECT w.message FROM sw_wire w WHERE w.session_id = s.id AND w.kind = 'TurnBegin'"
                "  ORDER BY w.seq LIMIT 1),"
                " (SELECT coalesce(sum(octet_length(w.message)), 0) FROM sw_wire w WHERE w.session_id = s.id)"
                " FROM sw_sessions s" + where,
                params,
            ).fetchall()
        out: dict[str, tuple[SessionSummary, dict[str, Any]]] = {}
        for session_id, state, created, updated, turns, first, size in rows:
            title = state.get("custom_title") if isinstance(state, dict) else None
            if not (isinstance(title, str) and title) and isinstance(first, str):
                payload = json.loads(first).get("payload")
                title = prompt_title(payload.get("user_input") if isinstance(payload, dict) else None)
            summary = SessionSummary(
                id=str(session_id),
                dir=local_dir(str(session_id)),
                title=title if isinstance(title, str) and title else None,
                created=float(created),
                updated=float(updated),
                turns=int(turns),
                size=int(size),
                is_last=False,
            )
            out[str(session_id)] = (summary, cast(dict[str, Any], state) if isinstance(state, dict) else {})
        return out

    def content_digest(self, session_id: str) -> tuple[str, int]:
        """(sha256 of the recorded messages' texts, their number): what a resume proves it loaded."""
        digest = hashlib.sha256()
        store = PostgresSessionStore(self.backend, session_id)
        rows = store.wire_rows()
        for _, text in rows:
            digest.update(text.encode("utf-8"))
            digest.update(b"\n")
        return digest.hexdigest(), len(rows)

    def record_lines(self, session_id: str) -> list[bytes]:
        """The recorded messages as the file store's wire.jsonl lines (`{"timestamp", "message"}`)."""
        with self.backend.connection() as conn:
            rows = conn.execute(
                "SELECT recorded_at, message FROM sw_wire WHERE session_id = %s ORDER BY seq", (session_id,)
            ).fetchall()
        return [
            b'{"timestamp": %r, "message": %s}' % (float(at), str(text).encode("utf-8")) for at, text in rows
        ]

    def state_of(self, session_id: str) -> dict[str, Any]:
        return PostgresSessionStore(self.backend, session_id).load_state()


__all__ = ["PostgresStores"]
