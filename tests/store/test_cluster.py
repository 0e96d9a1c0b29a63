"""The replicas as deployed (docs/deploy.md): a throwaway PostgreSQL, three `serve --store`
replicas and HAProxy running exactly the configuration `serve haproxy-config` ships, driven
through HAProxy by the real SDK: a session created, a turn, SIGKILL of the owning replica
mid-turn while an approval is pending, the session taken over by another replica (the
approval asked again and answered there, the turn continued to its end, every recorded
message there once), and the next turn working."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import psycopg
import pytest

from tests.postgres_cluster import Cluster
from tests.server.serve_client import ServeProcess, WireSocket
from tests.server.test_haproxy import _free_port
from tests.store.test_serve_replicas import PG_ENV, recorded_kinds, wait_for
from tests.system_tools import require
from tests.tool_calls import call
from tests.wire_client import Sandbox

pytestmark = pytest.mark.cluster
_deployments = itertools.count(1)
"""One database per deployment (test_cluster_drain.py deploys on the same cluster)."""


@pytest.fixture
def deployment(
    sandbox: Sandbox, pg_cluster: Cluster, tmp_path: Path
) -> Iterator[tuple[str, list[ServeProcess], str]]:
    """(HAProxy's base URL, the replicas, the store URL with its password)."""
    haproxy = require("haproxy")
    url = pg_cluster.create_database(f"deployment{next(_deployments)}")
    bare = url.replace(f":{PG_ENV['PGPASSWORD']}@", "@")
    front = f"127.0.0.1:{_free_port()}"
    sandbox.scripts = ["text: step1\n" + call("tc-1", "Shell", {"command": "echo ok"})]
    replicas: list[ServeProcess] = []
    proxy: subprocess.Popen[bytes] | None = None
    try:
        for _ in range(3):
            replicas.append(ServeProcess(sandbox, "--store", bare, "--allow-host", front, env=PG_ENV))
        generated = subprocess.run(
            [sys.executable, "-m", "soulwire", "serve", "haproxy-config", "--listen", front,
             "--check-interval", "200", *(a for r in replicas for a in ("--replica", r.base))],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        config = tmp_path / "haproxy.cfg"
        config.write_text(generated.stdout)
        proxy = subprocess.Popen([haproxy, "-db", "-f", str(config)], stderr=subprocess.DEVNULL)
        assert wait_for(lambda: _healthy(f"http://{front}"))
        yield f"http://{front}", replicas, url
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=30)
        for replica in replicas:
            replica.close()


def _healthy(base: str) -> bool:
    try:
        return httpx2.get(base + "/healthz", timeout=5).status_code == 200
    except httpx2.HTTPError:
        return False


def test_a_session_survives_the_sigkill_of_its_replica_behind_haproxy(deployment, sandbox: Sandbox):
    """The SDK's `Session` through HAProxy runs a turn whose tool call waits for an approval;
    while its handler decides, the owning replica is SIGKILLed. The SDK re-attaches through
    HAProxy to another replica, which takes the session over and asks the approval again; the
    handler's approve runs the call there, the turn goes on to its end (the prompt answered),
    the next prompt works, the record holds every message once — and an observer on a third
    replica saw it all."""
    from soulwire import sdk

    base, replicas, url = deployment
    token = replicas[0].token
    auth = {"Authorization": f"Bearer {token}"}
    created = httpx2.post(base + "/api/sessions", json={}, headers=auth, timeout=30)
    assert created.status_code == 201, created.text
    session = created.json()["id"]
    ws = base.replace("http://", "ws://") + f"/ws/sessions/{session}"
    killed: list[ServeProcess] = []
    observers: list[WireSocket] = []

    def owner() -> ServeProcess:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
        assert row is not None
        (found,) = [r for r in replicas if r.base == row[0]]
        return found

    async def decide(approval: sdk.Approval) -> sdk.ApprovalDecision:
        """Asked on the owner: it dies meanwhile; the answer is given once the SDK is back."""
        assert approval.tool_call_id == "tc-1" and not killed
        dying = owner()
        sandbox.scripts = ["text: the rest of the turn", "text: after the failover"]
        sandbox.write()  # (the replica taking over reads its script when it opens the session)
        killed.append(dying)
        os.killpg(dying.proc.pid, signal.SIGKILL)  # mid-turn: this approval is pending
        with anyio.fail_after(60):
            while stream.link is None or stream.link.reconnects == 0:
                await anyio.sleep(0.05)
        return sdk.ApprovalDecision.approve()

    stream = sdk.Session.attach(ws, token, on_approval=decide, reconnect_timeout=60)

    async def main() -> tuple[sdk.TurnResult, list[str], sdk.TurnResult]:
        async with stream:
            # An observer on another replica than the owner (straight to it, not through
            # HAProxy) watches all that follows, the failover included.
            watcher = next(r for r in replicas if r is not owner())
            observers.append(watcher.ws(session, mode="observer", since_seq=0))
            turn = stream.prompt("run it")
            seen = [type(event).__name__ async for event in turn]
            first = await turn
            second = await stream.prompt("and now?")
            return first, seen, second

    first, seen, second = anyio.run(main)
    assert killed and first.status == "finished" and second.status == "finished"
    assert len(first.steps[0].approvals) == 1 and first.steps[0].approvals[0].decision is not None
    assert seen.count("ToolResult") == 1 and "the rest of the turn" in first.text
    assert "after the failover" in second.text
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
        seqs = [
            r[0]
            for r in conn.execute("SELECT seq FROM sw_wire WHERE session_id = %s ORDER BY seq", (session,))
        ]
    assert row is not None and row[0] != killed[0].base and row[0] in [r.base for r in replicas]
    assert seqs == list(range(1, len(seqs) + 1))  # every recorded message once, no gap
    records = httpx2.get(base + f"/api/sessions/{session}/records", headers=auth, timeout=30).json()
    messages = [r["message"] for r in records["records"]]
    kinds = [m["type"] for m in messages]
    assert kinds == recorded_kinds(url, session)
    assert kinds.count("TurnBegin") == 2 and kinds.count("TurnEnd") == 2
    first_end = kinds.index("TurnEnd")
    results = [m["payload"] for m in messages[:first_end] if m["type"] == "ToolResult"]
    assert len(results) == 1 and results[0]["return_value"]["is_error"] is False
    assert "ok" in str(results[0]["return_value"])
    assert kinds[:first_end].count("StepBegin") == 2  # the turn went on after the call
    watched = observers[0].until(lambda m: (m.get("params") or {}).get("seq") == seqs[-1], timeout=60)
    got = [
        (m["params"]["seq"], m["params"]["type"], m["params"]["payload"])
        for m in watched
        if "seq" in (m.get("params") or {})
    ]
    assert got == [(n, m["type"], m["payload"]) for n, m in zip(seqs, messages, strict=True)]


def test_a_remote_session_gets_the_approval_asked_again_after_its_replica_dies(deployment, sandbox: Sandbox):
    """`RemoteSession` through HAProxy: its request handler is asked on the owner, which is
    SIGKILLed before the handler answers; re-attached through HAProxy from its `seq`, the
    handler is asked again by the replica that took the session over, approves, and the same
    `prompt()` yields the rest of the turn up to its TurnEnd."""
    from soulwire.sdk.remote import RemoteSession

    base, replicas, url = deployment
    token = replicas[0].token
    created = httpx2.post(
        base + "/api/sessions", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert created.status_code == 201, created.text
    session = created.json()["id"]
    ws = base.replace("http://", "ws://") + f"/ws/sessions/{session}"
    asked: list[str] = []

    def on_request(kind: str, payload: dict[str, Any]) -> Any:
        asked.append(payload["id"])
        if len(asked) == 1:  # on the owner: it dies before the answer
            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
            assert row is not None
            (owner,) = [r for r in replicas if r.base == row[0]]
            sandbox.scripts = ["text: the rest of the turn"]
            sandbox.write()  # (the replica taking over reads its script when it opens the session)
            os.killpg(owner.proc.pid, signal.SIGKILL)
            return None  # left to the deadline: the owner is gone anyway
        return {"request_id": payload["id"], "response": "approve"}

    async def main() -> list[dict[str, Any]]:
        async with RemoteSession.attach(ws, token, on_request=on_request) as remote:
            return [event async for event in remote.prompt("run it")]

    events = anyio.run(main)
    assert len(asked) == 2 and asked[0] == asked[1]  # the same request, asked again
    kinds = [e["type"] for e in events]
    assert kinds[0] == "TurnBegin" and kinds[-1] == "TurnEnd" and kinds.count("TurnBegin") == 1
    results = [e["payload"] for e in events if e["type"] == "ToolResult"]
    assert len(results) == 1 and results[0]["return_value"]["is_error"] is False
    assert "the rest of the turn" in json.dumps(events)
    seqs = [e["seq"] for e in events if "seq" in e]
    assert seqs == sorted(set(seqs))  # nothing twice


def test_an_sdk_turn_whose_replica_dies_while_a_call_runs_fails_as_interrupted(deployment, sandbox: Sandbox):
    """Through HAProxy, the SDK's `Session` runs a turn whose approved Shell call is running
    (nothing waits for an approval) when the owner is SIGKILLed: the replica that takes the
    session over closes the turn as interrupted, and the SDK's turn — re-attached, naming its
    prompt — fails with that error instead of waiting for an answer that cannot come; the
    next prompt works."""
    from soulwire import sdk
    from soulwire.sdk.errors import InvalidStateError
    from tests.e2e.test_faults_lifetime import processes_with

    base, replicas, url = deployment
    tag = "31.7182"
    sandbox.scripts = ["text: running\n" + call("tc-1", "Shell", {"command": f"sleep {tag}"})]
    sandbox.write()  # (read by the replica that opens the session)
    token = replicas[0].token
    created = httpx2.post(
        base + "/api/sessions", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert created.status_code == 201, created.text
    session = created.json()["id"]
    ws = base.replace("http://", "ws://") + f"/ws/sessions/{session}"
    stream = sdk.Session.attach(
        ws, token, on_approval=lambda _a: sdk.ApprovalDecision.approve(), reconnect_timeout=60
    )

    def kill_owner() -> None:
        assert wait_for(lambda: bool(processes_with(tag))), "the call never ran"
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
        assert row is not None
        (owner,) = [r for r in replicas if r.base == row[0]]
        sandbox.scripts = ["text: after the failover"]
        sandbox.write()
        os.killpg(owner.proc.pid, signal.SIGKILL)
        for pid in processes_with(tag):  # (the call's own process group outlived its replica)
            os.kill(pid, signal.SIGKILL)

    async def main() -> str:
        async with stream:
            turn = stream.prompt("run it")
            await anyio.to_thread.run_sync(kill_owner)
            with pytest.raises(InvalidStateError) as failed:
                await turn
            assert failed.value.data == {"reason": "interrupted"}
            return (await stream.prompt("and now?")).text

    assert "after the failover" in anyio.run(main)
    kinds = recorded_kinds(url, session)
    assert kinds.count("TurnBegin") == 2 and kinds.count("TurnEnd") == 2
