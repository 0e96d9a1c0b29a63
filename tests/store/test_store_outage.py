"""The database lost while `serve --store` runs: its sessions refuse prompts with one clear
JSON-RPC error (`data.reason` "store_unavailable"), the log says so in one line (no traceback),
nothing half-written is left in the record, and once the database is back the session reopens
and the next prompt works. (The faults at start-up are in test_serve_replicas.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest

from tests.postgres_cluster import PASSWORD, Cluster, make_cluster
from tests.server.serve_client import ServeProcess
from tests.store.test_serve_replicas import PG_ENV, wait_for
from tests.wire_client import Sandbox


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A cluster of the test's own: it is stopped and started again (the shared one is not)."""
    cluster = make_cluster()
    try:
        yield cluster
    finally:
        cluster.remove()


def test_a_database_lost_mid_run_refuses_prompts_until_it_is_back(sandbox: Sandbox, own_cluster: Cluster):
    url = own_cluster.create_database("outage")
    sandbox.scripts = ["text: before the outage", "text: after the outage"]
    server = ServeProcess(sandbox, "--store", url.replace(f":{PASSWORD}@", "@"), env=PG_ENV)
    try:
        session = server.create_session()
        wire = server.ws(session)
        wire.initialize()
        _, answer = wire.call("prompt", {"user_input": "first"})
        assert answer["result"]["status"] == "finished"

        own_cluster.stop()  # the database goes away (pg_ctl stop -m fast)
        for attempt in ("during the outage", "still down"):
            _, refused = wire.call("prompt", {"user_input": attempt}, timeout=60)
            error = refused["error"]
            assert error["code"] == -32000 and error["data"] == {"reason": "store_unavailable"}, refused
            assert "the session store is unreachable" in error["message"]
        # The session's clients stay attached, and every new attach is a clear 503 meanwhile.
        assert wait_for(lambda: server.api("GET", f"/api/sessions/{session}").status_code == 503)
        listing = server.api("GET", "/api/sessions")
        assert "session store is unreachable" in listing.json()["detail"]
        # The replica's heartbeat sees the outage too (its one line) before the database comes
        # back: the refusals above come at once, sooner than its next beat.
        assert wait_for(
            lambda: any("serve: the session store is unreachable" in line for line in server.stderr_lines),
            timeout=60,
        )

        own_cluster.start()

        def next_prompt_works() -> bool:
            try:
                again = server.ws(session)
                again.initialize()
                _, answer = again.call("prompt", {"user_input": "after"}, timeout=30)
            except Exception:  # refused (503) until the replica has seen the store back
                return False
            return answer.get("result", {}).get("status") == "finished"

        assert wait_for(next_prompt_works, timeout=60)
    finally:
        server.close()
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq, kind, message FROM sw_wire WHERE session_id = %s ORDER BY seq", (session,)
        ).fetchall()
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    kinds = [r[1] for r in rows]
    assert kinds.count("TurnBegin") == kinds.count("TurnEnd") == 2, kinds  # nothing half-written
    prompts = [json.loads(r[2])["payload"]["user_input"] for r in rows if r[1] == "TurnBegin"]
    assert prompts == ["first", "after"]
    log = "".join(server.stderr_lines)
    assert "Traceback" not in log, log
    down = [line for line in server.stderr_lines if "session store is unreachable" in line]
    assert len(down) == 1, log
    assert sum("the session store is back" in line for line in server.stderr_lines) == 1, log


def test_an_approval_answered_while_the_database_is_down_is_not_taken_unrecorded(
    sandbox: Sandbox, own_cluster: Cluster
):
    """With named users every answer is audited: one that cannot be recorded is not taken
    (no traceback, one log line); the session reopens when the store is back."""
    from tests.server.test_serve_users import SHELL_TURN, add, as_user, is_request

    url = own_cluster.create_database("outageusers")
    bare = url.replace(f":{PASSWORD}@", "@")
    bob = add(sandbox, "bob", "member", bare)
    sandbox.scripts = list(SHELL_TURN)
    server = ServeProcess(sandbox, "--store", bare, env=PG_ENV)
    try:
        created = as_user(server, bob, "POST", "/api/sessions", json={})
        session = created.json()["id"]
        wire = server.ws(session, token=bob)
        wire.initialize()
        wire.request("prompt", {"user_input": "run it"})
        request = wire.until(is_request)[-1]
        own_cluster.stop()
        wire.respond(request["id"], {"request_id": request["params"]["payload"]["id"], "response": "approve"})
        assert wait_for(lambda: any("was not taken" in line for line in server.stderr_lines), timeout=60)
        own_cluster.start()
    finally:
        server.close()
    log = "".join(server.stderr_lines)
    assert "Traceback" not in log, log
    with psycopg.connect(url) as conn:
        audited = conn.execute("SELECT action FROM sw_audit WHERE session_id = %s", (session,)).fetchall()
        results = conn.execute(
            "SELECT message FROM sw_wire WHERE session_id = %s AND kind = 'ToolResult'", (session,)
        ).fetchall()
    assert ("approval",) not in audited  # not taken, so not recorded as taken
    # The command never ran on an answer nobody can attribute: the only result there may be is
    # the call's interruption, recorded when the server stops (once the store is back).
    for (text,) in results:
        value = json.loads(text)["payload"]["return_value"]
        assert value["is_error"] and value["message"].startswith("interrupted"), value
