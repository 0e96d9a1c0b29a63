"""Named users of `soulwire serve`, through the real server over 127.0.0.1 (HTTP and WebSocket):
the `users` command, what each role may do, the audit trail, token rotation; on the file store
and on PostgreSQL (a throwaway cluster, tests/postgres_cluster.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from tests.postgres_cluster import PASSWORD
from tests.server.serve_client import TIMEOUT, ServeProcess
from tests.store.conftest import pg_cluster, pg_url  # noqa: F401  (the PostgreSQL fixtures)
from tests.tool_calls import approve, call
from tests.wire_client import Sandbox

SHELL_TURN = ("text: step1\n" + call("tc-1", "Shell", {"command": "echo ok"}), "text: done")


def users(sandbox: Sandbox, *argv: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    """`soulwire serve users …` as a person runs it."""
    sandbox.write()
    prefix = ["--store", store] if store else []
    return subprocess.run(
        [sys.executable, "-m", "soulwire", "serve", "users", *prefix, *argv],
        capture_output=True, text=True, env={**sandbox.env(), **_password(store)}, timeout=60, check=False,
    )  # fmt: skip


def _password(store: str | None) -> dict[str, str]:
    """The store's password as an operator gives it: in the environment, never in argv."""
    return {"PGPASSWORD": PASSWORD} if store else {}


def add(sandbox: Sandbox, name: str, role: str, store: str | None = None) -> str:
    done = users(sandbox, "add", name, "--role", role, store=store)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def as_user(server: ServeProcess, token: str, method: str, path: str, **kwargs: Any) -> Any:
    return server.http.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kwargs)


def until_status(server: ServeProcess, token: str, status: int) -> int:
    """Poll until a token gets `status` (a running server refreshes its users within a second)."""
    deadline = time.monotonic() + TIMEOUT
    while (got := as_user(server, token, "GET", "/api/sessions").status_code) != status:
        assert time.monotonic() < deadline, f"still {got}, expected {status}"
        time.sleep(0.05)  # polling a condition, bounded by the deadline above
    return got


def is_request(m: dict[str, Any]) -> bool:
    return m.get("method") == "request"


def is_turn_end(m: dict[str, Any]) -> bool:
    return m.get("method") == "event" and m["params"]["type"] == "TurnEnd"


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest) -> str | None:
    """Where the users and the audit are: the share dir, or a PostgreSQL store."""
    if request.param == "file":
        return None
    return str(request.getfixturevalue("pg_url")).replace(f":{PASSWORD}@", "@")


def _serve(serve: Callable[..., ServeProcess], store: str | None, *scripts: str) -> ServeProcess:
    return serve(*scripts, args=("--store", store) if store else (), env=_password(store))


def test_the_users_command_keeps_digests_never_tokens(sandbox: Sandbox) -> None:
    token = add(sandbox, "alice", "admin")
    assert token.startswith("swu_") and len(token) > 40
    stored = (sandbox.share / "users.json").read_text()
    assert token not in stored and "alice" in stored
    assert (sandbox.share / "users.json").stat().st_mode & 0o077 == 0
    listed = users(sandbox, "list")
    assert listed.stdout.split("\t")[:2] == ["alice", "admin"] and token not in listed.stdout
    again = users(sandbox, "add", "alice")
    assert (
        again.returncode == 1
        and again.stderr == "soulwire serve users: error: a user 'alice' exists already\n"
    )
    bad = users(sandbox, "add", "bob", "--role", "boss")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    missing = users(sandbox, "remove", "nobody")
    assert missing.returncode == 1 and "no user 'nobody'" in missing.stderr
    rotated = users(sandbox, "rotate-token", "alice").stdout.strip()
    assert rotated != token and rotated not in (sandbox.share / "users.json").read_text()


def test_without_users_nothing_changes(serve: Callable[..., ServeProcess]) -> None:
    server = serve("text: hi")
    assert server.api("GET", "/api/me").json() == {"user": None, "role": None}
    server.create_session()
    assert len(server.api("GET", "/api/sessions").json()) == 1


def test_roles_and_the_audit_trail(
    sandbox: Sandbox, serve: Callable[..., ServeProcess], store: str | None
) -> None:
    alice = add(sandbox, "alice", "admin", store)
    bob = add(sandbox, "bob", "member", store)
    carol = add(sandbox, "carol", "member", store)
    olga = add(sandbox, "olga", "observer", store)
    server = _serve(serve, store, *SHELL_TURN)
    # The single token no longer opens the server: every action has a name.
    refused = server.api("GET", "/api/sessions")
    assert refused.status_code == 401 and "user's token" in refused.json()["detail"]

    created = as_user(server, bob, "POST", "/api/sessions", json={"title": "bob's"})
    assert created.status_code == 201 and created.json()["owner"] == "bob"
    session = created.json()["id"]
    assert as_user(server, carol, "GET", "/api/sessions").json() == []
    denied = as_user(server, carol, "GET", f"/api/sessions/{session}")
    assert denied.status_code == 403
    assert (
        denied.json()["detail"]
        == f"carol may not see session {session}: it is not theirs nor shared with them"
    )
    with pytest.raises(InvalidStatus) as closed:
        server.ws(session, token=carol)
    assert closed.value.response.status_code == 403
    nope = as_user(server, olga, "POST", "/api/sessions", json={})
    assert (
        nope.status_code == 403
        and nope.json()["detail"] == "olga is an observer on this server: creating a session is refused"
    )
    not_owner = as_user(server, carol, "POST", f"/api/sessions/{session}/share", json={"user": "carol"})
    assert not_owner.status_code == 403
    shared = as_user(server, bob, "POST", f"/api/sessions/{session}/share", json={"user": "olga"})
    assert shared.status_code == 200 and shared.json()["shared_with"] == ["olga"]

    # The observer watches: attached as an observer, refused anything that drives.
    watcher = server.ws(session, token=olga, since_seq=0)
    assert watcher.until(lambda m: m.get("method") == "attached")[-1]["params"]["mode"] == "observer"
    _, prompt = watcher.call("prompt", {"user_input": "let me"})
    assert prompt["error"]["code"] == -32000 and prompt["error"]["data"]["reason"] == "forbidden"
    assert prompt["error"]["message"] == "olga is an observer on this server: prompt is refused"
    _, take = watcher.call("attach", {"mode": "controller", "take": True})
    assert (
        take["error"]["message"] == "olga is an observer on this server: controlling the session is refused"
    )
    _, rule = watcher.call("approvals/rules/add", {"rule": "Shell(echo *)"})
    assert rule["error"]["data"]["reason"] == "forbidden"
    assert as_user(server, olga, "PATCH", f"/api/sessions/{session}", json={"title": "x"}).status_code == 403

    # The owner drives: a prompt, an approval, a rule, a fork; the observer sees who answered.
    owner = server.ws(session, token=bob)
    owner.initialize(serve={"seq": True})
    owner.request("prompt", {"user_input": "run the check"})
    request = owner.until(is_request)[-1]
    owner.respond(request["id"], approve(request))
    owner.until(is_turn_end)
    resolved = watcher.until(lambda m: m.get("method") == "request/resolved")[-1]["params"]
    assert resolved["user"] == "bob" and resolved["response"] == "approve"
    _, added = owner.call("approvals/rules/add", {"rule": "Shell(echo *)"})
    assert "result" in added, added
    owner.call("cancel")  # nothing runs: still an action someone took
    forked = as_user(server, bob, "POST", f"/api/sessions/{session}/fork", json={})
    assert forked.status_code == 201 and forked.json()["owner"] == "bob"  # on either store
    forks = [("bob", "fork")]

    # The audit: admins only, filtered by session, user and time.
    assert as_user(server, bob, "GET", "/api/audit").status_code == 403
    trail = as_user(server, alice, "GET", "/api/audit", params={"session_id": session}).json()
    assert [(e["user"], e["action"]) for e in trail] == [
        ("bob", "share"), ("bob", "prompt"), ("bob", "approval"), ("bob", "rule_add"), ("bob", "cancel"),
        *forks,
    ]  # fmt: skip
    assert trail[1]["detail"] == {"text": "run the check"}
    assert trail[2]["detail"]["response"] == "approve" and trail[3]["detail"] == {"rule": "Shell(echo *)"}
    assert as_user(server, alice, "GET", "/api/audit", params={"user": "olga"}).json() == []
    later = as_user(server, alice, "GET", "/api/audit", params={"since": trail[-1]["at"]}).json()
    assert [e["action"] for e in later] == [trail[-1]["action"]]
    everything = {s["id"] for s in as_user(server, alice, "GET", "/api/sessions").json()}
    assert everything == {session, forked.json()["id"]}
    if store is None:  # the file store's trail is an append-only JSONL in the share dir
        lines = (sandbox.share / "audit.jsonl").read_text().splitlines()
        assert [json.loads(line)["action"] for line in lines] == [e["action"] for e in trail]


def test_a_rotated_or_removed_token_stops_working(
    sandbox: Sandbox, serve: Callable[..., ServeProcess], store: str | None
) -> None:
    old = add(sandbox, "bob", "member", store)
    server = _serve(serve, store, "text: hi")
    assert as_user(server, old, "GET", "/api/sessions").status_code == 200
    rotated = users(sandbox, "rotate-token", "bob", store=store)
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.strip()
    until_status(server, old, 401)
    assert as_user(server, new, "GET", "/api/me").json() == {"user": "bob", "role": "member"}
    with pytest.raises(InvalidStatus):
        server.ws("x" * 8, token=old)
    assert users(sandbox, "remove", "bob", store=store).returncode == 0
    until_status(server, new, 401)


def test_recent_work_dirs_are_those_of_sessions_a_user_may_see(
    sandbox: Sandbox, serve: Callable[..., ServeProcess], tmp_path: Any
) -> None:
    """The web UI's recent work dirs name paths on the server: a member sees their own, not
    another member's; an admin sees all."""
    alice = add(sandbox, "alice", "admin")
    bob = add(sandbox, "bob", "member")
    carol = add(sandbox, "carol", "member")
    server = _serve(serve, None, "text: hi")
    private = tmp_path / "bobs-project"
    private.mkdir()
    created = as_user(server, bob, "POST", "/api/sessions", json={"work_dir": str(private)})
    assert created.status_code == 201, created.text

    def recent(token: str) -> list[str]:
        answer = as_user(server, token, "GET", "/api/web/work-dirs")
        assert answer.status_code == 200
        return answer.json()["recent"]

    assert str(private) in recent(bob) and str(private) in recent(alice)
    assert str(private) not in recent(carol)
