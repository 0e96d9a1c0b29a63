"""Sessions over HTTP in the CLI's share-dir layout: created on the server and continued with
`soulwire --wire --session ID` (and back), never run by two processes at once, renamed,
forked, deleted, and their history read."""

from __future__ import annotations

from tests.server.serve_client import ServeProcess
from tests.tool_calls import call
from tests.wire_client import Sandbox, WireProcess, event_types


def cli(sandbox: Sandbox, session: str) -> WireProcess:
    return WireProcess(sandbox.argv("--session", session), sandbox.env(), sandbox.work)


def test_a_session_created_over_http_is_continued_by_the_cli_and_back(serve, sandbox):
    server = serve("text: from the server", "text: from the cli", "text: server again")
    session = server.create_session(title="shared")
    ws = server.ws(session)
    ws.initialize()
    _, done = ws.call("prompt", {"user_input": "first"})
    assert done["result"]["status"] == "finished"

    held = cli(sandbox, session)  # the server holds the session while a client is attached
    refused = held.initialize()["error"]  # says so in `initialize`, naming the server's process
    assert refused["code"] == -32000 and refused["data"]["reason"] == "session_held"
    assert refused["data"]["holder"]["pid"] == server.proc.pid
    assert held.close() == 2
    assert f"session {session} is in use by another process" in "".join(held.stderr_lines)

    ws.close()
    server.close()  # closing the server releases the session
    wire = cli(sandbox, sandbox_session := session)
    assert wire.initialize()["result"]["session"] == {
        "id": sandbox_session,
        "resumed": True,
        "work_dir": str(sandbox.work),
    }
    messages, response = wire.prompt("second")
    assert response["result"]["status"] == "finished"
    assert "ContentPart" in event_types(messages)
    assert wire.close() == 0

    again = ServeProcess(sandbox)
    try:
        info = again.api("GET", f"/api/sessions/{session}").json()
        assert info["title"] == "shared" and info["turns"] == 2
        history = again.api("GET", f"/api/sessions/{session}/history").json()
        turns = [r["payload"]["user_input"] for r in history["records"] if r["type"] == "TurnBegin"]
        assert turns == ["first", "second"]
    finally:
        again.close()


def test_a_session_the_cli_holds_cannot_be_opened_by_the_server(serve, sandbox):
    sandbox.scripts = ["text: cli"]
    sandbox.write()
    wire = WireProcess(sandbox.argv("--session", "cli-held"), sandbox.env(), sandbox.work)
    wire.initialize()
    _, response = wire.prompt("hello")  # now the session exists on disk and the CLI holds it
    assert response["result"]["status"] == "finished"
    server = serve()
    listed = server.api("GET", "/api/sessions").json()
    assert [(s["id"], s["held_elsewhere"]) for s in listed] == [("cli-held", True)]
    from websockets.exceptions import InvalidStatus

    try:
        server.ws("cli-held")
        raise AssertionError("the server opened a session another process holds")
    except InvalidStatus as refused:
        assert refused.response.status_code == 409
    assert server.api("DELETE", "/api/sessions/cli-held").status_code == 409
    assert wire.close() == 0
    ws = server.ws("cli-held")  # released by the CLI: the server may take it now
    assert ws.initialize()["session"]["resumed"] is True


def test_rename_fork_delete_and_list(serve, sandbox):
    server = serve("text: original answer")
    session = server.create_session(title="first title")
    ws = server.ws(session)
    ws.initialize()
    ws.call("prompt", {"user_input": "remember this"})

    renamed = server.api("PATCH", f"/api/sessions/{session}", json={"title": "new title"})
    assert renamed.status_code == 200 and renamed.json()["title"] == "new title"
    assert server.api("PATCH", f"/api/sessions/{session}", json={"title": ""}).status_code == 422

    forked = server.api("POST", f"/api/sessions/{session}/fork", json={})
    assert forked.status_code == 201
    fork = forked.json()
    assert fork["id"] != session and fork["title"] == "Fork of new title" and fork["turns"] == 1
    history = server.api("GET", f"/api/sessions/{fork['id']}/history").json()
    assert [r["payload"]["user_input"] for r in history["records"] if r["type"] == "TurnBegin"] == [
        "remember this"
    ]

    ids = {s["id"] for s in server.api("GET", "/api/sessions").json()}
    assert ids == {session, fork["id"]}
    assert server.api("DELETE", f"/api/sessions/{session}").status_code == 409  # a client is attached
    ws.close()
    assert server.api("DELETE", f"/api/sessions/{fork['id']}").status_code == 204
    assert server.api("GET", f"/api/sessions/{fork['id']}").status_code == 404
    assert not list(sandbox.share.glob(f"sessions/*/{fork['id']}"))


def test_bad_requests_get_clear_statuses(serve, tmp_path):
    server = serve()
    assert server.api("POST", "/api/sessions", json={"work_dir": "relative/dir"}).status_code == 422
    assert (
        server.api("POST", "/api/sessions", json={"work_dir": str(tmp_path / "missing")}).status_code == 422
    )
    assert server.api("POST", "/api/sessions", json={"nonsense": 1}).status_code == 422
    assert server.api("POST", "/api/sessions", content=b"{broken").status_code == 422
    assert server.api("GET", "/api/sessions/x/history?since=-1").status_code == 422
    created = server.api("POST", "/api/sessions", json={"work_dir": str(tmp_path)})
    assert created.status_code == 201 and created.json()["work_dir"] == str(tmp_path)


def test_a_session_created_with_a_sandbox_runs_its_tools_in_bubblewrap(serve, sandbox):
    from tests.system_tools import require_bwrap

    require_bwrap()
    write = call("w", "Shell", {"command": "echo written > inside.txt && cat inside.txt"})
    server = serve(write, "text: done", write, "text: done", args=("--yolo",))
    boxed = server.create_session(sandbox="read-only", sandbox_network=False)
    assert server.api("GET", f"/api/sessions/{boxed}").json()["sandbox"] == {
        "mode": "read-only",
        "network": False,
    }
    ws = server.ws(boxed)
    ws.initialize()
    messages, _ = ws.call("prompt", {"user_input": "write"})
    statuses = [m["params"]["payload"] for m in messages if m["params"].get("type") == "StatusUpdate"]
    assert statuses and all(s["sandbox"] == {"mode": "read-only", "network": False} for s in statuses)
    result = next(m for m in messages if m["params"].get("type") == "ToolResult")["params"]["payload"]
    assert result["return_value"]["is_error"] and not (sandbox.work / "inside.txt").exists()

    plain = server.ws(server.create_session())  # the server's default: no sandbox
    plain.initialize()
    messages, _ = plain.call("prompt", {"user_input": "write"})
    assert all(
        "sandbox" not in m["params"]["payload"] for m in messages if m["params"].get("type") == "StatusUpdate"
    )
    assert (sandbox.work / "inside.txt").read_text() == "written\n"

    bad = server.api("POST", "/api/sessions", json={"sandbox": "everything"})
    assert bad.status_code == 422
