"""Observers on a replica that does not run the session (a follower) see what the owner's
observers see: the record, and what is not recorded — approval requests, their resolution,
role changes — in the same order; and a rewind that reuses the record's seqs is noticed (the
follower's clients re-attach and reload, as the owner's do)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.server.serve_client import ServeProcess, WireSocket
from tests.store.test_serve_replicas import PG_ENV, stored_rows, wait_for
from tests.tool_calls import call
from tests.wire_client import Sandbox

pytestmark = pytest.mark.xdist_group("postgres")


@pytest.fixture
def three(sandbox: Sandbox, store: tuple[str, str]) -> Iterator[list[ServeProcess]]:
    sandbox.config_extra = {"checkpoints": {"enabled": True}}
    sandbox.scripts = [
        "text: looking\n" + call("tc-1", "Shell", {"command": "echo observed"}),
        "text: second turn",
        "text: after the rewind",
    ]
    started: list[ServeProcess] = []
    try:
        for _ in range(3):
            started.append(ServeProcess(sandbox, "--store", store[1], env=PG_ENV))
        yield started
    finally:
        for server in started:
            server.close()


def _stream(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What an observer was sent, but the answers to its own requests: numbered messages by
    (seq, type), the rest by method and params."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        params = m.get("params") or {}
        if "method" not in m or m["method"] == "attached":
            continue
        if "seq" in params:
            out.append((m["method"], params["seq"], params.get("type")))
        else:
            out.append((m["method"], params))
    return out


def _relayed(url: str, session: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM sw_live WHERE session_id = %s", (session,)).fetchone()
    return int(row[0]) if row else 0


def _watch(server: ServeProcess, session: str) -> WireSocket:
    observer = server.ws(session, mode="observer", since_seq=0, epoch="store")
    observer.until(lambda m: m.get("method") == "attached")
    return observer


def test_an_observer_on_a_third_replica_sees_approvals_and_role_changes_as_the_owner_s_do(three, store):
    a, _, c = three  # A runs the session, C only follows it
    session = a.create_session()
    driver = a.ws(session, mode="controller")
    driver.initialize(serve={"seq": True})
    here = _watch(a, session)  # on the owner
    assert wait_for(lambda: _relayed(store[0], session) > 0)  # (the driver's role: before both)
    there = _watch(c, session)  # on a replica that only follows the session
    assert c.api("GET", f"/api/sessions/{session}").json()["replica"] == a.base

    driver.request("prompt", {"user_input": "hello"})
    approval = driver.until(lambda m: m.get("method") == "request")[-1]
    request_id = approval["params"]["payload"]["id"]
    seen_there = there.until(lambda m: m.get("method") == "request")
    assert seen_there[-1]["params"]["payload"]["id"] == request_id
    assert seen_there[-1]["params"]["deadline_ms"] > 0

    taker = a.ws(session, mode="controller", take=1)  # a second client takes control on A
    taker.until(lambda m: m.get("method") == "attached")
    seen_there += there.until(lambda m: m.get("method") == "role/changed")
    taker.respond(approval["id"], {"request_id": request_id, "response": "approve"})
    taker.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "TurnEnd")

    last = stored_rows(store[0], session)[-1][0]

    def done(m: dict[str, Any]) -> bool:
        return (m.get("params") or {}).get("seq") == last

    seen_here = here.until(done)
    seen_there += there.until(done)
    theirs = _stream(seen_there)
    assert any(x[0] == "role/changed" and x[1]["reason"] == "taken" for x in theirs)
    resolved = [x for x in theirs if x[0] == "request/resolved"]
    assert resolved and resolved[0][1]["id"] == request_id and resolved[0][1]["response"] == "approve"
    assert theirs == _stream(seen_here)  # the same stream, in the same order


def test_a_follower_notices_a_rewind_that_reuses_seqs(three, store):
    a, _, c = three
    session = a.create_session()
    driver = a.ws(session)  # a client of today's Wire: it reads no numbered stream to re-attach to
    driver.initialize(capabilities={"supports_checkpoints": True})

    def turn(text: str) -> None:
        driver.request("prompt", {"user_input": text})
        while True:
            m = driver.recv()
            if m.get("method") == "request":
                driver.respond(m["id"], {"request_id": m["params"]["payload"]["id"], "response": "approve"})
            if m.get("method") == "event" and m["params"]["type"] == "TurnEnd":
                return

    turn("first")
    turn("second")
    there = _watch(c, session)
    old_last = stored_rows(store[0], session)[-1][0]
    there.until(lambda m: (m.get("params") or {}).get("seq") == old_last)

    _, rewound = driver.call("rewind", {"turn": 2, "files": False})
    assert "result" in rewound, rewound
    with pytest.raises(Exception, match="rewritten"):  # as the owner's clients: re-attach
        there.until(lambda m: False, timeout=30)
    cut = stored_rows(store[0], session)[-1][0]
    assert cut < old_last

    again = c.ws(session, mode="observer", since_seq=old_last, epoch="store")
    attached = again.until(lambda m: m.get("method") == "attached")[-1]["params"]
    assert not attached["complete"] and attached["last_seq"] == cut  # reload the history
    turn("after")  # its records reuse the seqs the rewind freed
    rows = stored_rows(store[0], session)
    assert any(seq <= old_last for seq, kind, _ in rows if seq > cut)
    got = again.until(lambda m: (m.get("params") or {}).get("seq") == rows[-1][0])
    numbered = [(m["params"]["seq"], m["params"]["type"]) for m in got if "seq" in (m.get("params") or {})]
    assert numbered == [(seq, kind) for seq, kind, _ in rows if seq > cut]
    assert wait_for(lambda: c.api("GET", f"/api/sessions/{session}").json()["replica"] == a.base)
