"""The model and thinking as session config options, driven by the official ACP client: locally
(`soulwire acp`) and over WebSocket through a real `soulwire serve`, where a change made by a
Wire client (what the web UI and the SDK speak) or by another editor reaches every editor as a
`config_option_update` (the engine's negotiated `set_model` and `ModelChanged`)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from acp import RequestError

from tests.acp.conftest import WAIT_S, Editor, run_agent, tool_script
from tests.acp.test_websocket import _prompt, editor_over_ws
from tests.wire_client import Sandbox, add_echo_models

pytestmark = pytest.mark.anyio


def values(options: Any) -> dict[str, Any]:
    return {o.id: o.current_value for o in options or []}


def choices(options: Any, option_id: str) -> list[str]:
    [option] = [o for o in options if o.id == option_id]
    return [c.value for c in option.options]


async def option_update(editor: Editor, session_id: str, option_id: str, value: str) -> None:
    """Wait until the editor's latest `config_option_update` shows `option_id` at `value`."""
    with anyio.fail_after(WAIT_S):
        while not (updates := editor.of("config_option_update", session_id)) or (
            values(updates[-1].config_options).get(option_id) != value
        ):
            await anyio.sleep(0.02)  # it comes on the editor's own connection


async def test_model_and_thinking_options_switch_the_local_session(sandbox: Sandbox) -> None:
    add_echo_models(sandbox)
    async with run_agent(sandbox, "text: from scripted") as agent:
        await agent.initialize()
        session = await agent.new_session()
        sid = session.session_id
        assert values(session.config_options) | {"sandbox": None} == {
            "mode": "default", "model": "scripted", "thinking": "off", "sandbox": None,
        }  # fmt: skip
        assert choices(session.config_options, "model") == ["scripted", "echo", "thinker"]
        assert choices(session.config_options, "thinking") == ["off"]  # the scripted model cannot think
        await agent.conn.prompt(session_id=sid, prompt=_prompt("hi"))
        assert agent.editor.text() == "from scripted"

        reply = await agent.conn.set_config_option(config_id="model", session_id=sid, value="thinker")
        assert values(reply.config_options)["model"] == "thinker"
        assert choices(reply.config_options, "thinking") == ["off", "on"]
        reply = await agent.conn.set_config_option(config_id="thinking", session_id=sid, value="on")
        assert values(reply.config_options)["thinking"] == "on"
        agent.editor.clear()
        await agent.conn.prompt(session_id=sid, prompt=_prompt("text: from thinker"))
        assert agent.editor.text() == "from thinker"  # the next turn ran on the new model
        assert agent.editor.of("config_option_update", sid) == []  # its own change: in the answers only
        await agent.conn.prompt(session_id=sid, prompt=_prompt("/model echo"))  # inside the session
        assert values(agent.editor.of("config_option_update", sid)[-1].config_options)["model"] == "echo"
        await agent.conn.set_config_option(config_id="model", session_id=sid, value="thinker")
        await agent.conn.set_config_option(config_id="thinking", session_id=sid, value="on")
        for config_id, value in (("model", "nope"), ("thinking", "maybe")):
            with pytest.raises(RequestError) as refused:
                await agent.conn.set_config_option(config_id=config_id, session_id=sid, value=value)
            assert refused.value.code == -32602
    [state] = sandbox.share.glob(f"sessions/*/{sid}/state.json")
    stored = json.loads(state.read_text())
    assert (stored["model"], stored["thinking"]) == ("thinker", True)


async def test_a_wire_client_switching_the_model_updates_the_editors(serve: Any, sandbox: Sandbox) -> None:
    add_echo_models(sandbox)
    server = serve("text: unused")
    session_id = server.create_session()
    wire = server.ws(session_id)  # what the web UI speaks: it controls, the editors observe
    wire.initialize(capabilities={"supports_model_switch": True})
    async with editor_over_ws(server) as (conn, editor):
        opened = await conn.resume_session(session_id=session_id, cwd=str(sandbox.work), mcp_servers=[])
        assert values(opened.config_options) == {
            "mode": "default", "model": "scripted", "sandbox": "off", "thinking": "off",
        }  # fmt: skip
        _, response = wire.call("set_model", {"model": "thinker", "thinking": True})
        answer = response["result"]
        assert (answer["model"], answer["thinking"]) == ("thinker", True)
        await option_update(editor, session_id, "thinking", "on")
        assert values(editor.of("config_option_update", session_id)[-1].config_options)["model"] == "thinker"


async def test_an_editor_switching_the_model_updates_the_other_editor_and_the_wire_client(
    serve: Any, sandbox: Sandbox
) -> None:
    add_echo_models(sandbox)
    server = serve("text: unused")
    async with editor_over_ws(server) as (conn, _editor), editor_over_ws(server) as (other, watcher):
        session = await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])
        sid = session.session_id
        await other.resume_session(session_id=sid, cwd=str(sandbox.work), mcp_servers=[])
        wire = server.ws(sid)
        wire.initialize(capabilities={"supports_model_switch": True})  # an observer: the hub answers
        reply = await conn.set_config_option(config_id="model", session_id=sid, value="echo")
        assert values(reply.config_options)["model"] == "echo"
        await option_update(watcher, sid, "model", "echo")
        changed = wire.until(lambda m: (m.get("params") or {}).get("type") == "ModelChanged")[-1]
        assert changed["params"]["payload"]["model"] == "echo"
        await conn.prompt(session_id=sid, prompt=_prompt("text: echoed remotely"))
        with pytest.raises(RequestError) as refused:  # an observer's change is refused, as its prompts
            await other.set_config_option(config_id="model", session_id=sid, value="scripted")
        assert refused.value.code == -32000
        with pytest.raises(RequestError) as unknown:
            await conn.set_config_option(config_id="model", session_id=sid, value="nope")
        assert unknown.value.code == -32602 and "nope" in str(unknown.value)


async def test_the_sandbox_option_reopens_a_served_session_under_the_new_mode(
    serve: Any, sandbox: Sandbox
) -> None:
    server = serve(tool_script("w1", "Shell", command="touch made.txt"), "text: after")
    async with editor_over_ws(server) as (conn, editor), editor_over_ws(server) as (other, _watcher):
        session = await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])
        sid = session.session_id
        assert values(session.config_options)["sandbox"] == "off"
        await other.resume_session(session_id=sid, cwd=str(sandbox.work), mcp_servers=[])
        with pytest.raises(RequestError) as observer:  # an observer cannot reopen the session
            await other.set_config_option(config_id="sandbox", session_id=sid, value="read-only")
        assert observer.value.code == -32000
        reply = await conn.set_config_option(config_id="sandbox", session_id=sid, value="read-only")
        assert values(reply.config_options)["sandbox"] == "read-only"
        assert server.api("GET", f"/api/sessions/{sid}").json()["sandbox"]["mode"] == "read-only"
        with pytest.raises(RequestError) as closed:  # the other editor's link ended with the old session
            await other.prompt(session_id=sid, prompt=_prompt("hello?"))
        assert "session/resume" in str(closed.value)
        resumed = await other.resume_session(session_id=sid, cwd=str(sandbox.work), mcp_servers=[])
        assert values(resumed.config_options)["sandbox"] == "read-only"
        for answer in ("approve", "reject", "reject"):  # the command; no way out of the sandbox
            editor.answer(answer)
        await conn.prompt(session_id=sid, prompt=_prompt("write"))
        assert editor.tool_statuses("w1")[-1] == "failed"
        assert not (sandbox.work / "made.txt").exists()
        with pytest.raises(RequestError) as bad:
            await conn.set_config_option(config_id="sandbox", session_id=sid, value="cage")
        assert bad.value.code == -32602
