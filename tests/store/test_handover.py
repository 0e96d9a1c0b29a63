"""Handing sessions over between replicas of one store (server/handover.py): `soulwire serve
drain` releases a replica's idle sessions (clients disconnected with 1012, its health check
failing, no session opened there any more) and they re-attach from their `seq` on another
replica; `POST /api/sessions/{id}/handover` releases one, never in the middle of a turn."""

from __future__ import annotations

import subprocess
import sys

import httpx2
import psycopg
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from soulwire.wire.environment import SERVER_TOKEN_ENV
from tests.server.serve_client import ServeProcess
from tests.store.test_serve_replicas import PG_ENV, wait_for
from tests.tool_calls import call
from tests.wire_client import Sandbox

pytestmark = pytest.mark.xdist_group("postgres")


def owner_of(url: str, session: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
    return str(row[0]) if row else None


def test_a_drained_replica_hands_its_sessions_to_another(sandbox: Sandbox, store):
    # (each replica's scripted model starts at the first script when it opens the session)
    sandbox.scripts = ["text: an answer", "text: step\n" + call("tc-1", "Shell", {"command": "echo ok"})]
    a = ServeProcess(sandbox, "--store", store[1], env=PG_ENV)
    b = ServeProcess(sandbox, "--store", store[1], env=PG_ENV)
    try:
        session = a.create_session()
        wire = a.ws(session, since_seq=0)
        wire.initialize({"seq": True})
        messages, answer = wire.call("prompt", {"user_input": "first"})
        assert answer["result"]["status"] == "finished"
        last_seq = max(m["params"]["seq"] for m in messages if "seq" in (m.get("params") or {}))
        assert owner_of(store[0], session) == a.base

        drained = subprocess.run(
            [sys.executable, "-m", "soulwire", "serve", "drain", "--url", a.base, "--wait", "30"],
            capture_output=True, text=True, env={**sandbox.env(), SERVER_TOKEN_ENV: a.token},
            timeout=60,
        )  # fmt: skip
        assert drained.returncode == 0, drained.stderr
        assert (
            drained.stderr == "soulwire serve drain: 1 session(s) handed over; the replica can be stopped\n"
        )
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                wire.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        assert owner_of(store[0], session) is None  # released
        assert httpx2.get(a.base + "/healthz").status_code == 503  # out of the load balancer's ring
        with pytest.raises(InvalidStatus) as refused:
            a.ws(session)
        assert refused.value.response.status_code == 503
        assert b"draining" in refused.value.response.body

        # The client re-attaches on B from its seq, and the session goes on there.
        again = b.ws(session, since_seq=last_seq)
        attached = again.recv()
        assert attached["method"] == "attached" and attached["params"]["mode"] == "controller"
        again.initialize({"seq": True})
        _, answer = again.call("prompt", {"user_input": "second"})
        assert answer["result"]["status"] == "finished"
        assert owner_of(store[0], session) == b.base

        # One session, by the API: not while a turn runs, released once idle.
        again.request("prompt", {"user_input": "third"})
        request = again.until(lambda m: m.get("method") == "request")[-1]
        busy = b.api("POST", f"/api/sessions/{session}/handover")
        assert busy.status_code == 409 and "running a turn" in busy.json()["detail"]
        assert owner_of(store[0], session) == b.base
        again.respond(
            request["id"], {"request_id": request["params"]["payload"]["id"], "response": "approve"}
        )
        again.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "TurnEnd")
        assert wait_for(lambda: not b.api("GET", f"/api/sessions/{session}").json()["busy"])
        released = b.api("POST", f"/api/sessions/{session}/handover")
        assert released.json() == {"handed_over": 1, "running": 0}, released.text
        assert owner_of(store[0], session) is None
        assert b.api("POST", "/api/sessions/unknown-id/handover").status_code == 404
    finally:
        a.close()
        b.close()


def test_drain_faults_are_one_line(sandbox: Sandbox):
    server = ServeProcess(sandbox)  # the file store: nothing to hand over to
    try:
        cases = [
            (["--url", server.base], server.token, 1, "the replica answered 422: sessions are handed over"),
            (["--url", server.base], "wrong-token-000000000", 1, "the replica answered 401"),
            (["--url", "http://127.0.0.1:1"], server.token, 1, "cannot reach http://127.0.0.1:1"),
            (["--url", "ftp://x"], server.token, 2, "--url wants the replica's http(s):// address"),
        ]
        for args, token, code, message in cases:
            out = subprocess.run(
                [sys.executable, "-m", "soulwire", "serve", "drain", *args],
                capture_output=True, text=True, env={**sandbox.env(), SERVER_TOKEN_ENV: token},
                timeout=60,
            )  # fmt: skip
            assert out.returncode == code and message in out.stderr, (args, out.stderr)
            assert out.stderr.count("\n") == 1, out.stderr
        assert httpx2.get(server.base + "/healthz").status_code == 200  # not draining
    finally:
        server.close()
