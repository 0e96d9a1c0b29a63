"""A live session on PostgreSQL does not wait for its records' commits on the replica's event
loop: the engine goes on while the group-commit writer commits, and the hub delivers only what
the store has committed (sessions/pg_gate.py, server/hub.py `send`). So a client never sees a
message a crash could lose, an approval is asked only once the tool call it is about is
recorded, a prompt's answer never overtakes its TurnEnd, and the numbering is the store's:
contiguous, no duplicates, in the order recorded."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from websockets.exceptions import ConnectionClosed

from tests.server.serve_client import ServeProcess, WireSocket, seqs
from tests.server.test_serve_users import SHELL_TURN, is_request, is_turn_end
from tests.store.test_serve_replicas import PG_ENV, wait_for
from tests.wire_client import Sandbox

pytestmark = pytest.mark.xdist_group("postgres")

WINDOW_S = 2.0
"""How long the client is watched while the writer is held: what an ungated hub would have
sent by then (the engine emits the turn's first messages within milliseconds) shows here."""


def _rows(url: str, session: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT seq, kind FROM sw_wire WHERE session_id = %s ORDER BY seq", (session,))
        return [(int(seq), str(kind)) for seq, kind in rows]


def _writer_waits_on_lock(url: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).fetchone()
    return bool(row and row[0])


def _received_within(wire: WireSocket, seconds: float) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            seen.append(wire.recv(timeout=left))
        except TimeoutError:
            break
    return seen


def test_nothing_reaches_a_client_before_the_store_commits_it(
    sandbox: Sandbox, store: tuple[str, str]
) -> None:
    url, bare = store
    sandbox.scripts = ["text: warm", *SHELL_TURN]
    server = ServeProcess(sandbox, "--store", bare, env=PG_ENV)
    try:
        session = server.create_session()
        wire = server.ws(session)
        wire.initialize(serve={"seq": True})
        before, answer = wire.call("prompt", {"user_input": "warm"})
        assert answer["result"]["status"] == "finished"
        assert before[-1]["params"]["type"] == "TurnEnd"  # the answer after the TurnEnd it follows
        last = seqs(before)[-1]

        with psycopg.connect(url) as holder:  # the writer's next batch waits on the session's row
            holder.execute("SELECT 1 FROM sw_sessions WHERE id = %s FOR UPDATE", (session,))
            prompt = wire.request("prompt", {"user_input": "run it"})
            assert wait_for(lambda: _writer_waits_on_lock(url))
            early = _received_within(wire, WINDOW_S)
            assert not [m for m in early if "seq" in (m.get("params") or {}) or is_request(m)], early
            assert _rows(url, session)[-1][0] == last  # nothing of the turn is committed yet
            holder.rollback()

        seen = early + wire.until(is_request)
        request = seen[-1]
        kinds = [m["params"]["type"] for m in seen if m.get("method") == "event"]
        assert "ToolCall" in kinds, kinds  # asked once the call it is about is recorded
        recorded = dict(_rows(url, session))
        assert all(seq in recorded for seq in seqs(seen))  # (committed before the client had it)
        wire.respond(request["id"], {"request_id": request["params"]["payload"]["id"], "response": "approve"})
        rest = wire.until(lambda m: m.get("id") == prompt and "method" not in m)
        assert rest[-1]["result"]["status"] == "finished"
        assert is_turn_end(rest[-2]), rest[-2]  # the answer never overtakes its TurnEnd

        numbered = [m for m in seen + rest if "seq" in (m.get("params") or {})]
        got = [(m["params"]["seq"], m["params"]["type"]) for m in numbered if m["method"] == "event"]
        rows = _rows(url, session)
        assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))
        assert got == [(seq, kind) for seq, kind in rows if seq > last], (got, rows)

        # Re-attached from the middle of the turn: exactly what came after, as recorded.
        middle = got[len(got) // 2][0]
        again = server.ws(session, since_seq=middle, epoch="store", mode="observer")
        replay = again.until(lambda m: (m.get("params") or {}).get("seq") == rows[-1][0])
        attached = [m["params"] for m in replay if m.get("method") == "attached"]
        assert attached and attached[0]["complete"] is True, replay
        assert [(m["params"]["seq"], m["params"]["type"]) for m in replay if m.get("method") == "event"] == [
            (seq, kind) for seq, kind in rows if seq > middle
        ]
    finally:
        try:
            server.close()
        except ConnectionClosed:
            pass


def test_an_answer_that_waited_for_a_lost_commit_is_the_store_s_error(
    sandbox: Sandbox, store: tuple[str, str]
) -> None:
    """The writer's batch fails (its connection cut) while a turn's answer waits for it: the
    client gets -32000 `store_unavailable` instead of a turn nobody recorded, nothing of the
    turn is in the record, and the session carries on from what the store holds."""
    url, bare = store
    sandbox.scripts = ["text: one", "text: two", "text: three"]
    server = ServeProcess(sandbox, "--store", bare, env=PG_ENV)
    try:
        session = server.create_session()
        wire = server.ws(session)
        wire.initialize(serve={"seq": True})
        assert wire.call("prompt", {"user_input": "one"})[1]["result"]["status"] == "finished"
        kept = _rows(url, session)

        with psycopg.connect(url) as holder:
            holder.execute("SELECT 1 FROM sw_sessions WHERE id = %s FOR UPDATE", (session,))
            prompt = wire.request("prompt", {"user_input": "two"})
            assert wait_for(lambda: _writer_waits_on_lock(url))
            with psycopg.connect(url, autocommit=True) as killer:  # the writer's connection dies
                killer.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            holder.rollback()
        seen = wire.until(lambda m: m.get("id") == prompt and "method" not in m)
        error = seen[-1]["error"]
        assert error["code"] == -32000 and error["data"] == {"reason": "store_unavailable"}, seen[-1]
        assert not [m for m in seen if "seq" in (m.get("params") or {})], seen  # nothing it lost
        assert _rows(url, session) == kept  # nothing of the turn: not half-written

        _, answer = wire.call("prompt", {"user_input": "three"})
        assert answer.get("result", {}).get("status") == "finished", answer
        rows = _rows(url, session)
        assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))  # no gap
        assert [kind for _, kind in rows].count("TurnBegin") == 2
    finally:
        server.close()
