"""Upgrading a replica at a time, as docs/deploy.md says: behind HAProxy as shipped, `soulwire
serve drain` on the replica that runs a session hands it over, and the real SDK's
RemoteSession, attached through HAProxy, re-attaches by itself (refused with 503 by the
draining replica until HAProxy takes it out of the ring) and its next prompt runs on another
replica."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import httpx2
import psycopg
import pytest

from soulwire import sdk
from soulwire.sdk.remote import RemoteSession
from soulwire.wire.environment import SERVER_TOKEN_ENV
from tests.store.test_cluster import deployment  # noqa: F401 (the fixture, by its name)
from tests.wire_client import Sandbox

pytestmark = pytest.mark.cluster


def owner_of(url: str, session: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
    return str(row[0]) if row else None


def test_a_drained_replica_s_sdk_client_goes_on_elsewhere(request: pytest.FixtureRequest, sandbox: Sandbox):
    base, replicas, url = request.getfixturevalue("deployment")
    sandbox.scripts = ["text: an answer"]
    sandbox.write()
    token = replicas[0].token
    created = httpx2.post(
        base + "/api/sessions", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    session = created.json()["id"]
    ws = base.replace("http://", "ws://") + f"/ws/sessions/{session}"

    def drain(replica: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "soulwire", "serve", "drain", "--url", replica],
            capture_output=True, text=True, timeout=120, env={**sandbox.env(), SERVER_TOKEN_ENV: token},
        )  # fmt: skip

    async def scenario() -> tuple[str, str, list[dict[str, Any]], int]:  # the raw RemoteSession
        async with RemoteSession.attach(ws, token) as remote:
            first = [e async for e in remote.prompt("before")]
            assert first[-1]["type"] == "TurnEnd"
            before = owner_of(url, session)
            assert before is not None
            drained = await anyio.to_thread.run_sync(drain, before)
            assert drained.returncode == 0, drained.stderr
            events = [e async for e in remote.prompt("after")]
            after = owner_of(url, session)
            assert after is not None
            return before, after, events, remote.reconnects

    before, after, events, reconnects = anyio.run(scenario)
    assert after != before and after in [r.base for r in replicas]
    assert reconnects >= 1
    assert events[-1]["type"] == "TurnEnd"
    assert any(e["type"] == "TurnBegin" and e["payload"]["user_input"] == "after" for e in events)
    session_goes_on(base, replicas, url, sandbox, token)  # (a second replica drained)


def session_goes_on(base: str, replicas: list[Any], url: str, sandbox: Sandbox, token: str) -> None:
    """The same with the SDK's `Session`: its link retries the draining replica's 503 (within
    its reconnect timeout) until HAProxy sends it elsewhere."""
    created = httpx2.post(
        base + "/api/sessions", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    session_id = created.json()["id"]
    ws = base.replace("http://", "ws://") + f"/ws/sessions/{session_id}"

    async def scenario() -> tuple[str, str, str, list[str], int]:
        async with sdk.Session.attach(ws, token, on_approval=lambda _a: "approve") as session:
            first = session.prompt("before")
            assert [type(e).__name__ async for e in first][-1] == "TurnEnd"
            before = owner_of(url, session_id)
            assert before is not None
            drained = await anyio.to_thread.run_sync(
                lambda: subprocess.run(
                    [sys.executable, "-m", "soulwire", "serve", "drain", "--url", before],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env={**sandbox.env(), SERVER_TOKEN_ENV: token},
                )
            )
            assert drained.returncode == 0, drained.stderr
            turn = session.prompt("after")
            kinds = [type(e).__name__ async for e in turn]
            after = owner_of(url, session_id)
            assert after is not None and turn.result is not None
            return before, after, turn.result.status, kinds, session.link.reconnects

    before, after, status, kinds, reconnects = anyio.run(scenario)
    assert after != before and after in [r.base for r in replicas]
    assert status == "finished" and kinds[0] == "TurnBegin" and kinds[-1] == "TurnEnd"
    assert reconnects >= 1
