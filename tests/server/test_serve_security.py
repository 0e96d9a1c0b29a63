"""Security by default: every request needs the token (header, query or subprotocol), and a
foreign Host or Origin is refused, over HTTP and WebSocket alike."""

from __future__ import annotations

import stat

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from soulwire.wire.environment import SERVER_TOKEN_FILE
from tests.server.test_serve_processes import wait_until


def test_the_token_is_generated_private_and_required(serve, sandbox):
    server = serve("text: hi")
    path = sandbox.share / SERVER_TOKEN_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # (the line after "listening on", which is all the server's start waits for)
    assert wait_until(lambda: any(f"?token={server.token}" in line for line in server.stderr_lines))
    assert server.http.get("/api/sessions").status_code == 401
    bad = server.http.get("/api/sessions", headers={"Authorization": "Bearer nope-nope-nope-nope"})
    assert bad.status_code == 401
    assert server.api("GET", "/api/sessions").json() == []
    assert server.http.get(f"/api/sessions?token={server.token}").status_code == 200


def test_foreign_host_and_origin_are_refused(serve):
    server = serve("text: hi")
    assert server.api("GET", "/api/sessions", headers={"Host": "evil.example"}).status_code == 403
    rebinding = server.api("GET", "/api/sessions", headers={"Host": f"attacker.test:{server.port}"})
    assert rebinding.status_code == 403
    cross = server.api("GET", "/api/sessions", headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403
    same = server.api("GET", "/api/sessions", headers={"Origin": f"http://localhost:{server.port}"})
    assert same.status_code == 200


def test_websocket_needs_the_token_and_a_local_origin(serve):
    server = serve("text: hi")
    session = server.create_session()
    url = f"ws://127.0.0.1:{server.port}/ws/sessions/{session}"
    with pytest.raises(InvalidStatus) as refused:
        connect(url)
    assert refused.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as cross:
        connect(f"{url}?token={server.token}", origin="https://evil.example")  # type: ignore[arg-type]
    assert cross.value.response.status_code == 403
    # a browser cannot set headers: the token may come as a subprotocol
    with connect(url, subprotocols=["soulwire", f"soulwire.token.{server.token}"]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "soulwire"


def test_unknown_session_is_an_error_not_a_fresh_session(serve, sandbox):
    server = serve("text: hi")
    with pytest.raises(InvalidStatus) as missing:
        connect(f"ws://127.0.0.1:{server.port}/ws/sessions/no-such-session?token={server.token}")
    assert missing.value.response.status_code == 404
    assert server.api("GET", "/api/sessions/no-such-session").status_code == 404
    assert not list(sandbox.share.glob("sessions/*/no-such-session"))


def test_openapi_document_is_served(serve):
    server = serve("text: hi")
    assert server.http.get("/openapi.json").status_code == 401
    document = server.api("GET", "/openapi.json").json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    assert {"get", "post"} <= set(paths["/api/sessions"])
    assert {"get", "patch", "delete"} <= set(paths["/api/sessions/{session_id}"])
    assert "post" in paths["/api/sessions/{session_id}/fork"]
    assert "get" in paths["/api/sessions/{session_id}/history"]


def test_non_loopback_listen_needs_an_explicit_token(sandbox):
    import subprocess
    import sys

    sandbox.write()
    done = subprocess.run(
        [sys.executable, "-m", "soulwire", "serve", "--listen", "0.0.0.0:0"],
        env=sandbox.env(), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2
    assert "explicit token" in done.stderr and "Traceback" not in done.stderr


def test_an_observer_token_only_watches_its_own_session(serve):
    server = serve("text: watched")
    session = server.create_session()
    other = server.create_session()
    minted = server.api("POST", f"/api/sessions/{session}/observer-tokens")
    assert minted.status_code == 201
    token = minted.json()["token"]
    read = {"Authorization": f"Bearer {token}"}
    assert server.http.get(f"/api/sessions/{session}", headers=read).status_code == 200
    assert server.http.get(f"/api/sessions/{other}", headers=read).status_code == 401
    assert server.http.get("/api/sessions", headers=read).status_code == 401
    assert server.http.delete(f"/api/sessions/{session}", headers=read).status_code == 401
    assert server.http.post(f"/api/sessions/{session}/observer-tokens", headers=read).status_code == 401
    with pytest.raises(InvalidStatus):
        server.ws(other, token=token)

    controller = server.ws(session)
    controller.initialize()
    watcher = server.ws(session, token=token)
    _, taken = watcher.call("attach", {"mode": "controller", "take": True})
    assert taken["error"]["data"]["reason"] == "read_only"
    _, refused = watcher.call("prompt", {"user_input": "no"})
    assert refused["error"]["data"]["reason"] == "observer"
    _, done = controller.call("prompt", {"user_input": "go"})
    assert done["result"]["status"] == "finished"
    seen = watcher.until(lambda m: (m.get("params") or {}).get("type") == "TurnEnd")
    assert any((m.get("params") or {}).get("type") == "ContentPart" for m in seen)


def test_allow_host_with_a_port_names_a_proxy_in_front(serve):
    """HAProxy on :80 passes the Host clients sent (`soulwire.example.com`, no port) on to a
    replica listening elsewhere: `--allow-host NAME:PORT` admits exactly that address."""
    server = serve(args=("--allow-host", "soulwire.example.com:80", "--allow-host", "proxy.example:8443"))
    for host in ("soulwire.example.com", "soulwire.example.com:80", "proxy.example:8443"):
        origin = f"http://{host}"
        answer = server.api("GET", "/api/sessions", headers={"Host": host, "Origin": origin})
        assert answer.status_code == 200, (host, answer.text)
    for host in ("proxy.example", f"proxy.example:{server.port}", "soulwire.example.com:8443"):
        assert server.api("GET", "/api/sessions", headers={"Host": host}).status_code == 403, host
