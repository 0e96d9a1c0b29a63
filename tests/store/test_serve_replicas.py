"""`soulwire serve --store postgresql://…`: sessions run on PostgreSQL through the one store
factory, replicas share them, only the owning replica runs a session (the others answer 307 to
it), and the start-up mistakes are one line each."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import psycopg
import pytest

from soulwire.sdk.remote import RemoteSession
from tests.postgres_cluster import PASSWORD, Cluster
from tests.server.serve_client import ServeProcess, WireSocket
from tests.server.test_serve_sdk import watched_turn
from tests.tool_calls import call
from tests.wire_client import Sandbox

PG_ENV = {"PGPASSWORD": PASSWORD}


@pytest.fixture
def replicas(sandbox: Sandbox, store: tuple[str, str]) -> Iterator[list[ServeProcess]]:
    sandbox.scripts = ["text: first answer", "text: second answer"]
    started = [ServeProcess(sandbox, "--store", store[1], env=PG_ENV) for _ in range(2)]
    try:
        yield started
    finally:
        for server in started:
            server.close()


def recorded_kinds(url: str, session: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT kind FROM sw_wire WHERE session_id = %s ORDER BY seq", (session,))
        return [str(r[0]) for r in rows]


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll the store until `condition` holds (a generous bound, not a timing assumption)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def ws_url(server: ServeProcess, session: str) -> str:
    return f"ws://127.0.0.1:{server.port}/ws/sessions/{session}"


def test_sessions_run_on_postgres_and_only_their_owner_runs_them(replicas, store):
    a, b = replicas
    session = a.create_session(title="shared")
    listed = b.api("GET", "/api/sessions").json()  # the other replica lists it from the store
    assert [s["id"] for s in listed] == [session] and listed[0]["title"] == "shared"

    async def turn(server: ServeProcess, text: str) -> list[dict[str, Any]]:
        async with RemoteSession.attach(ws_url(server, session), server.token) as remote:
            return [event async for event in remote.prompt(text)]

    events = anyio.run(turn, a, "hi")
    assert events[-1]["type"] == "TurnEnd"
    with psycopg.connect(store[0]) as conn:
        kinds = [
            r[0]
            for r in conn.execute("SELECT kind FROM sw_wire WHERE session_id = %s ORDER BY seq", (session,))
        ]
        owner = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
    assert kinds[0] == "TurnBegin" and kinds[-1] == "TurnEnd" and "ContentPart" in kinds
    assert owner == (a.base,)

    # While A runs it, B sends its clients (REST and WebSocket) to A.
    renamed = b.api("PATCH", f"/api/sessions/{session}", json={"title": "x"}, follow_redirects=False)
    assert renamed.status_code == 307, renamed.text
    assert renamed.headers["location"] == f"{a.base}/api/sessions/{session}"
    assert renamed.json()["owner"] == a.base
    from websockets.sync.client import connect

    with connect(ws_url(b, session) + f"?token={b.token}") as followed:  # 307 → A, followed
        followed.send(
            '{"jsonrpc": "2.0", "id": "1", "method": "initialize", "params": {"protocol_version": "1.3"}}'
        )
        assert '"result"' in str(followed.recv(timeout=15))
    anyio.run(turn, b, "again")  # the SDK through B: sent on to A, where the turn runs
    assert wait_for(
        lambda: (
            recorded_kinds(store[0], session)[-1:] == ["TurnEnd"]
            and len([k for k in recorded_kinds(store[0], session) if k == "TurnBegin"]) == 2
        )
    )
    described = b.api("GET", f"/api/sessions/{session}").json()
    assert described["held_elsewhere"] is True and described["replica"] == a.base and described["turns"] == 2

    # A replica without the session's work dir refuses it, naming the path.
    elsewhere = a.sandbox.root / "only-on-a"
    other = a.create_session(work_dir=str(elsewhere), create_dir=True)
    elsewhere.rmdir()
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(b, other) + f"?token={b.token}")
    assert refused.value.response.status_code == 409
    assert f"no work dir {elsewhere}".encode() in refused.value.response.body
    assert b.api("GET", f"/api/sessions/{other}").json()["held_elsewhere"] is False  # nobody kept it

    # A's records are B's: the history reads the same rows.
    history = b.api("GET", f"/api/sessions/{session}/records").json()
    recorded = [r["message"]["type"] for r in history["records"]]
    assert (
        recorded[: len(kinds)] == kinds
        and recorded.count("TurnBegin") == 2
        and history["total"] == len(recorded)
    )


def _serve(sandbox: Sandbox, *args: str, password: str = PASSWORD) -> subprocess.CompletedProcess[str]:
    sandbox.write()
    return subprocess.run(
        [sys.executable, "-m", "soulwire", "serve", "--listen", "127.0.0.1:0", "--config-file",
         str(sandbox.config_path), *args],
        capture_output=True, text=True, env={**sandbox.env(), "PGPASSWORD": password}, timeout=60,
    )  # fmt: skip


def test_store_faults_at_start_are_one_line(sandbox: Sandbox, store, pg_cluster: Cluster):
    with socket.socket() as sock:  # a port nobody listens on: the database is down
        sock.bind(("127.0.0.1", 0))
        down = f"postgresql://soulwire@127.0.0.1:{sock.getsockname()[1]}/postgres"
    cases = [
        ((down,), PASSWORD, "cannot connect to the session store"),
        ((store[1],), "wrong", "password authentication failed"),
    ]
    for args, password, message in cases:
        out = _serve(sandbox, "--store", *args, password=password)
        assert out.returncode == 1, out.stderr
        assert message in out.stderr and out.stderr.count("\n") == 1, out.stderr
        assert PASSWORD not in out.stderr
    with psycopg.connect(store[0], autocommit=True) as conn:
        conn.execute("CREATE TABLE soulwire_schema (version integer NOT NULL)")
        conn.execute("INSERT INTO soulwire_schema (version) VALUES (99)")
    # The config's `[store] url` is the same as --store.
    sandbox.config_extra["store"] = {"url": store[1]}
    newer = _serve(sandbox)
    assert newer.returncode == 1 and "newer than this Soulwire knows" in newer.stderr
    assert newer.stderr.count("\n") == 1


def test_a_killed_owner_s_session_is_taken_over_with_its_approval_asked_again(sandbox: Sandbox, store):
    """SIGKILL of the owning replica while its turn waits for an approval: another replica takes
    the session from the store at once (the killed one's connection, and lock, died with it)
    and continues the turn — the approval asked again (the same request id, call and display)
    of the client that re-attaches, the call run once it is approved, the turn on to its end
    and the prompt's answer to the client that names it (`prompt_id`); the next prompt works
    there, and the record keeps every message once (seq 1..N, no gap, no repeat)."""
    sandbox.scripts = ["text: step1\n" + call("tc-1", "Shell", {"command": "echo ok"})]
    a = ServeProcess(sandbox, "--store", store[1], env=PG_ENV)
    try:
        session = a.create_session()
        wire = a.ws(session)
        wire.initialize()
        prompt_id = wire.request("prompt", {"user_input": "run it"})
        asked = wire.until(
            lambda m: m.get("method") == "request" and m["params"]["type"] == "ApprovalRequest"
        )[-1]["params"]["payload"]
    finally:
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.close()
    assert recorded_kinds(store[0], session).count("TurnEnd") == 0  # the turn was left open
    with psycopg.connect(store[0]) as conn:  # what was waiting is on record
        row = conn.execute("SELECT state FROM sw_sessions WHERE id = %s", (session,)).fetchone()
    assert row is not None and row[0]["pending_approvals"] == [{"id": asked["id"], "tool_call_id": "tc-1"}]

    sandbox.scripts = ["text: the rest of the turn", "text: after the failover"]
    b = ServeProcess(sandbox, "--store", store[1], env=PG_ENV)
    try:
        sockets: list[WireSocket] = []

        def reattached() -> bool:
            try:
                sockets.append(b.ws(session, since_seq=0, mode="controller", prompt_id=prompt_id))
            except Exception:  # the database had not yet seen the killed connection close
                return False
            return True

        assert wait_for(reattached)
        again = sockets[-1]
        reissued = again.until(lambda m: m.get("method") == "request")[-1]
        before, after = (dict(p, source_id=None) for p in (asked, reissued["params"]["payload"]))
        assert after == before  # the same request, call and display
        again.respond(reissued["id"], {"request_id": asked["id"], "response": "approve"})
        answered = again.until(lambda m: m.get("id") == prompt_id)
        assert answered[-1]["result"] == {"status": "finished"}
        again.initialize(serve={"seq": True})
        _, done = again.call("prompt", {"user_input": "and now?"})
        assert done["result"]["status"] == "finished", done
    finally:
        b.close()
    rows = stored_rows(store[0], session)
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    kinds = [r[1] for r in rows]
    assert kinds.count("TurnBegin") == 2 and kinds.count("TurnEnd") == 2
    first_end = kinds.index("TurnEnd")
    assert kinds.index("TurnBegin", 1) > first_end  # the old turn ended before the new one began
    results = [m["payload"] for _, kind, m in rows if kind == "ToolResult"]
    assert len(results) == 1 and results[0]["tool_call_id"] == "tc-1"
    assert results[0]["return_value"]["is_error"] is False and "ok" in json.dumps(results[0])
    first_turn = json.dumps([m for _, _, m in rows[:first_end]])
    assert "turn.resumed" in first_turn and "the rest of the turn" in first_turn
    assert "after the failover" in json.dumps([m for _, _, m in rows[first_end:]])
    with psycopg.connect(store[0]) as conn:
        row = conn.execute("SELECT state FROM sw_sessions WHERE id = %s", (session,)).fetchone()
    assert row is not None and "pending_approvals" not in row[0]


def stored_rows(url: str, session: str) -> list[tuple[int, str, dict[str, Any]]]:
    """(seq, kind, message) of every recorded message, in order."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq, kind, message FROM sw_wire WHERE session_id = %s ORDER BY seq", (session,)
        ).fetchall()
    return [(int(seq), str(kind), json.loads(text)) for seq, kind, text in rows]


def numbered(messages: list[dict[str, Any]]) -> list[tuple[int, str, Any]]:
    """(seq, type, payload) of the numbered messages a client got."""
    return [
        (m["params"]["seq"], m["params"]["type"], m["params"]["payload"])
        for m in messages
        if m.get("method") in ("event", "recorded") and "seq" in m["params"]
    ]


def test_an_observer_on_another_replica_sees_the_turn_live(sandbox: Sandbox, store):
    """A runs the turn; an observer attached to B (not sent to A, and B takes no ownership)
    gets every recorded message as it is committed — before the turn ends (it waits on an
    approval) — numbered by the store's seq, in order, with no gap and no repeat."""
    sandbox.scripts = ["text: looking\n" + call("tc-1", "Shell", {"command": "echo observed"})]
    a, b = (ServeProcess(sandbox, "--store", store[1], env=PG_ENV) for _ in range(2))
    try:
        session = a.create_session()
        driver = a.ws(session)
        driver.initialize(serve={"seq": True})
        driver.request("prompt", {"user_input": "hello"})
        driver.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "TurnBegin")

        observer = b.ws(session, mode="observer", since_seq=0, epoch="store")  # B: no 307 to A
        attached = observer.until(lambda m: m.get("method") == "attached")[-1]["params"]
        assert attached["epoch"] == "store" and attached["mode"] == "observer" and attached["complete"]
        approval = driver.until(lambda m: m.get("method") == "request")[-1]
        seen = observer.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "ToolCall")
        assert "TurnEnd" not in [m["params"].get("type") for m in seen if "params" in m]  # live
        assert b.api("GET", f"/api/sessions/{session}").json()["replica"] == a.base  # A still runs it
        during, refused = observer.call("prompt", {"user_input": "from the observer"})
        seen += during
        assert refused["error"]["data"] == {"reason": "observer", "owner": a.base}

        driver.respond(
            approval["id"], {"request_id": approval["params"]["payload"]["id"], "response": "approve"}
        )
        seen += observer.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "TurnEnd")
        got = numbered(seen)
        rows = stored_rows(store[0], session)
        assert [s for s, _, _ in got] == list(range(1, len(rows) + 1))  # no gap, no repeat
        assert got == [(seq, kind, message["payload"]) for seq, kind, message in rows]
        assert any(kind == "ToolResult" and "observed" in json.dumps(p) for _, kind, p in got)
    finally:
        a.close()
        b.close()


def test_a_client_re_attaches_to_another_replica_from_its_seq_after_the_owner_is_killed(
    sandbox: Sandbox, store
):
    """The seq a client sees is the store's: after SIGKILL of the owner mid-turn, the client
    re-attaches to another replica with `since_seq` and gets exactly the messages it had not
    seen (the continued turn's among them, once it answers the approval asked again) — every
    recorded message once in all."""
    sandbox.scripts = ["text: step1\n" + call("tc-1", "Shell", {"command": "echo ok"})]
    a, b = (ServeProcess(sandbox, "--store", store[1], env=PG_ENV) for _ in range(2))
    try:
        session = a.create_session()
        driver = a.ws(session)
        assert driver.initialize(serve={"seq": True})["serve"]["epoch"] == "store"
        driver.request("prompt", {"user_input": "run it"})
        before = driver.until(lambda m: m.get("method") == "request")
        os.killpg(a.proc.pid, signal.SIGKILL)
        sandbox.scripts = ["text: the rest of the turn"]
        sandbox.write()  # (B reads its script when it opens the session)
        first = numbered(before)
        last = first[-1][0]

        sockets: list[WireSocket] = []

        def reattached() -> bool:
            try:
                sockets.append(b.ws(session, since_seq=last, epoch="store", mode="controller"))
            except Exception:  # PostgreSQL has not yet seen the killed replica's connection close
                return False
            return True

        assert wait_for(reattached)
        again = sockets[-1]
        attached = again.until(lambda m: m.get("method") == "attached")[-1]["params"]
        assert attached["complete"] and attached["epoch"] == "store"
        reissued = again.until(lambda m: m.get("method") == "request")  # the approval, asked again
        asked = reissued[-1]
        again.respond(asked["id"], {"request_id": asked["params"]["payload"]["id"], "response": "approve"})
        rest = again.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "TurnEnd")
        got = first + numbered(reissued + rest)
        rows = stored_rows(store[0], session)
        assert [s for s, _, _ in got] == [r[0] for r in rows] == list(range(1, len(rows) + 1))
        assert got == [(seq, kind, message["payload"]) for seq, kind, message in rows]
        assert attached["sent"] <= len(rows) - last
    finally:
        a.close()
        b.close()


def test_the_sdk_watches_on_one_replica_while_its_controller_is_sent_to_the_owner(replicas):
    """Through the SDK: an observer `Session` attached to B watches the turn that a controller
    `Session` — which also asked B, and was sent to A, the owner, by the 307 — runs on A."""
    from soulwire import sdk

    a, b = replicas
    session = a.create_session()
    a.ws(session).initialize()  # A opens the session, and so owns it

    async def main() -> list[str]:
        observer = sdk.Session.attach(ws_url(b, session), b.token, mode="observer")
        async with observer:

            async def drive() -> None:
                async with sdk.Session.attach(ws_url(b, session), b.token, take=True) as controller:
                    await controller.prompt("hi")

            return await watched_turn(observer, drive)

    seen = anyio.run(main)
    assert seen[0] == "TurnBegin" and seen[-1] == "TurnEnd" and "TextPart" in seen, seen
    described = b.api("GET", f"/api/sessions/{session}").json()
    assert described["replica"] == a.base and described["turns"] == 1  # it ran on A
