"""Creating a session with a model, yolo and plan mode; the models a server offers (with their
prices from the SDK's table); archiving and unarchiving; the title a session gets from its
first prompt."""

from __future__ import annotations

import json
from pathlib import Path

from tests.server.serve_client import ServeProcess
from tests.tool_calls import call
from tests.wire_client import Sandbox

SCRIPTED = {"provider": "scripted_provider", "model": "scripted_echo", "max_context_size": 100_000}
PRICED = {"provider": "scripted_provider", "model": "kimi-k2", "max_context_size": 123_456}


def two_models(sandbox: Sandbox) -> None:
    sandbox.config_extra = {"models": {"scripted": SCRIPTED, "priced": PRICED}}


def status_updates(messages: list[dict]) -> list[dict]:
    return [
        m["params"]["payload"]
        for m in messages
        if m.get("method") == "event" and m["params"]["type"] == "StatusUpdate"
    ]


def test_models_are_listed_with_the_default_and_known_prices(serve, sandbox):
    two_models(sandbox)
    server = serve()
    listed = server.api("GET", "/api/models").json()
    assert listed["default"] == "scripted"
    by_alias = {m["alias"]: m for m in listed["models"]}
    assert by_alias["scripted"]["price"] is None  # not in the price table: unknown, never invented
    assert by_alias["priced"]["model"] == "kimi-k2" and by_alias["priced"]["max_context_size"] == 123_456
    # The SDK's table (soulwire.sdk.pricing) is the one source; cache writes default to input.
    assert by_alias["priced"]["price"] == {
        "input": 0.6,
        "output": 2.5,
        "cache_read": 0.15,
        "cache_write": 0.6,
    }
    document = server.api("GET", "/openapi.json").json()
    create = document["components"]["schemas"]["CreateSession"]["properties"]
    assert {"model", "yolo", "plan_mode"} <= set(create)
    assert "/api/models" in document["paths"]
    assert "archived" in document["components"]["schemas"]["UpdateSession"]["properties"]


def test_a_session_created_with_a_model_yolo_and_plan_mode_starts_so(serve, sandbox):
    two_models(sandbox)
    marker = sandbox.root / "ran.txt"
    server = serve(
        "usage: input_other=10 output=5\n" + call("tc1", "Shell", {"command": f"echo yes > {marker}"}),
        "text: done",
    )
    created = server.api("POST", "/api/sessions", json={"model": "priced", "yolo": True, "plan_mode": True})
    assert created.status_code == 201, created.text
    info = created.json()
    assert (info["model"], info["model_name"], info["yolo"], info["plan_mode"]) == (
        "priced",
        "kimi-k2",
        True,
        True,
    )
    assert info["price"]["output"] == 2.5
    ws = server.ws(info["id"])
    ws.initialize()
    messages, done = ws.call("prompt", {"user_input": "go"})
    assert done["result"]["status"] == "finished"
    assert not [m for m in messages if m.get("method") == "request"]  # yolo: nothing asked
    assert marker.read_text().strip() == "yes"  # …and the Shell call ran
    updates = status_updates(messages)
    assert any(u.get("plan_mode") is True for u in updates)
    assert any(u.get("max_context_tokens") == 123_456 for u in updates), updates  # the chosen model ran


def test_a_default_session_asks_and_runs_the_default_model(serve, sandbox):
    two_models(sandbox)
    server = serve(
        "usage: input_other=10 output=5\n" + call("tc1", "Shell", {"command": "echo hi"}), "text: done"
    )
    info = server.api("POST", "/api/sessions", json={}).json()
    assert (info["model"], info["yolo"], info["plan_mode"], info["price"]) == ("scripted", False, False, None)
    ws = server.ws(info["id"])
    ws.initialize()
    messages, done = ws.call("prompt", {"user_input": "go"}, answer=lambda m: {"response": "approve"})
    assert done["result"]["status"] == "finished"
    assert [m["params"]["type"] for m in messages if m.get("method") == "request"] == ["ApprovalRequest"]
    assert any(u.get("max_context_tokens") == 100_000 for u in status_updates(messages))
    assert all(u.get("plan_mode") in (None, False) for u in status_updates(messages))


def test_an_unknown_model_is_refused_clearly(serve, sandbox):
    two_models(sandbox)
    server = serve()
    refused = server.api("POST", "/api/sessions", json={"model": "gpt-nope"})
    assert refused.status_code == 422
    assert refused.json()["detail"] == "unknown model 'gpt-nope': the configured models are scripted, priced"
    assert server.api("POST", "/api/sessions", json={"yolo": "yes"}).status_code == 422
    assert server.api("GET", "/api/sessions").json() == []  # nothing was created


def test_archive_hides_a_session_by_default_and_it_stays_readable(serve, sandbox):
    server = serve("text: first answer")
    kept = server.create_session(title="kept")
    old = server.create_session(title="old")
    archived = server.api("PATCH", f"/api/sessions/{old}", json={"archived": True})
    assert archived.status_code == 200 and archived.json()["archived"] is True
    assert archived.json()["archived_at"] is not None
    state = json.loads(Path(archived.json()["dir"], "state.json").read_text())
    assert state["archived"] is True and state["custom_title"] == "old"  # persisted with the session

    def ids(query: str = "") -> list[str]:
        return [s["id"] for s in server.api("GET", f"/api/sessions{query}").json()]

    assert ids("?archived=false") == [kept]
    assert ids("?archived=true") == [old]
    assert sorted(ids()) == sorted([kept, old])  # no filter: every session, as before
    # Still readable, and unarchived through the same PATCH.
    assert server.api("GET", f"/api/sessions/{old}").json()["title"] == "old"
    assert server.api("GET", f"/api/sessions/{old}/history").status_code == 200
    back = server.api("PATCH", f"/api/sessions/{old}", json={"archived": False}).json()
    assert back["archived"] is False and back["archived_at"] is None
    assert sorted(ids("?archived=false")) == sorted([kept, old])
    assert server.api("PATCH", f"/api/sessions/{old}", json={}).status_code == 422
    assert server.api("PATCH", "/api/sessions/nope", json={"archived": True}).status_code == 404


def test_archive_of_a_live_session_sticks_and_a_prompt_unarchives_it(serve, sandbox):
    server = serve("text: one", "text: two")
    session = server.create_session()
    ws = server.ws(session)
    ws.initialize()
    _, done = ws.call("prompt", {"user_input": "first"})
    assert done["result"]["status"] == "finished"
    # Live here: the state goes through the session's own keeper, which saves it later too.
    assert server.api("PATCH", f"/api/sessions/{session}", json={"archived": True}).json()["archived"]
    assert server.api("GET", "/api/sessions?archived=true").json()[0]["id"] == session
    # Prompting an archived session is allowed and brings it back (kimi web 1.49 does the same).
    _, done = ws.call("prompt", {"user_input": "second"})
    assert done["result"]["status"] == "finished"
    info = server.api("GET", f"/api/sessions/{session}").json()
    assert info["archived"] is False and info["turns"] == 2
    state = json.loads(Path(info["dir"], "state.json").read_text())
    assert state["archived"] is False and state["auto_archive_exempt"] is True


def test_a_new_session_is_titled_by_its_first_prompt_and_a_rename_wins(serve, sandbox):
    server = serve("text: a", "text: b", "text: c")
    session = server.create_session()
    assert server.api("GET", f"/api/sessions/{session}").json()["title"] is None
    ws = server.ws(session)
    ws.initialize()
    long_prompt = "Refactor   the parser\nso that <b>tags</b> are kept and errors name the line they are on"
    ws.call("prompt", {"user_input": long_prompt})
    title = server.api("GET", f"/api/sessions/{session}").json()["title"]
    assert title == "Refactor the parser so that <b>tags</b> are kept a"  # whitespace folded, 50 chars
    state = json.loads(
        Path(server.api("GET", f"/api/sessions/{session}").json()["dir"], "state.json").read_text()
    )
    assert state["custom_title"] == title  # stored, so every client shows the same
    assert server.api("PATCH", f"/api/sessions/{session}", json={"title": "Mine"}).status_code == 200
    ws.call("prompt", {"user_input": "another prompt"})
    assert server.api("GET", f"/api/sessions/{session}").json()["title"] == "Mine"


def test_the_sdk_creates_a_session_with_a_model_and_yolo(serve, sandbox):
    import anyio

    from soulwire.sdk.sessions import ServerSessions

    two_models(sandbox)
    server: ServeProcess = serve()

    async def create() -> dict:
        stored = await ServerSessions(server.base, server.token).create(model="priced", yolo=True)
        return stored.raw

    raw = anyio.run(create)
    assert (raw["model"], raw["yolo"], raw["plan_mode"]) == ("priced", True, False)


def test_create_dir_makes_a_missing_work_dir_only_when_asked(serve, sandbox):
    server = serve()
    missing = sandbox.root / "new" / "project"
    refused = server.api("POST", "/api/sessions", json={"work_dir": str(missing)})
    assert refused.status_code == 422 and "existing absolute directory" in refused.json()["detail"]
    assert not missing.exists()
    created = server.api("POST", "/api/sessions", json={"work_dir": str(missing), "create_dir": True})
    assert created.status_code == 201 and missing.is_dir()
    assert created.json()["work_dir"] == str(missing)
    relative = server.api("POST", "/api/sessions", json={"work_dir": "rel/dir", "create_dir": True})
    assert relative.status_code == 422 and not (sandbox.work / "rel").exists()
    (sandbox.root / "a-file").write_text("x")
    not_a_dir = server.api(
        "POST", "/api/sessions", json={"work_dir": str(sandbox.root / "a-file"), "create_dir": True}
    )
    assert not_a_dir.status_code == 422
