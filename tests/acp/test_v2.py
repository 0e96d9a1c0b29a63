"""The ACP v2 alpha path (off by default; `SOULWIRE_ACP_V2=1`), driven by the official client:
an editor asking for v2 gets it only with the variable set, and then no modes API, no client
fs/terminal, no `session/load` (resume replays on `replayFrom`), `tool_call_update` as the
first update of a call and the item-based `plan_update`; v1 editors see v1 as it is. Locally
and over WebSocket through `serve`."""

from __future__ import annotations

from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation
from acp.ws import create_websocket_stream

from tests.acp.conftest import Editor, run_agent, tool_script
from tests.acp.test_websocket import _prompt, acp_url
from tests.wire_client import Sandbox

pytestmark = pytest.mark.anyio
V2 = {"SOULWIRE_ACP_V2": "1"}
EDITOR_TOOLS = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)


async def initialize(conn: Any, version: int) -> Any:
    return await conn.initialize(
        protocol_version=version,
        client_capabilities=EDITOR_TOOLS,
        client_info=Implementation(name="pytest-v2-editor", version="1"),
    )


async def test_v2_is_off_by_default_and_v1_editors_keep_v1(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        answer = await initialize(agent.conn, 2)
        assert answer.protocol_version == 1 and answer.agent_capabilities.load_session is True
    async with run_agent(sandbox, env=V2) as agent:
        answer = await initialize(agent.conn, PROTOCOL_VERSION)
        assert answer.protocol_version == 1 and answer.agent_capabilities.load_session is True
        session = await agent.new_session()
        assert session.modes is not None and session.modes.current_mode_id == "default"


async def test_a_v2_editor_gets_the_v2_behaviour(sandbox: Sandbox) -> None:
    todos = [{"title": "Write it", "status": "in_progress"}]
    scripts = (
        tool_script("w1", "WriteFile", path="v2.txt", content="on disk\n"),
        tool_script("p1", "SetTodoList", todos=todos),
        "text: done",
    )
    async with run_agent(sandbox, *scripts, env=V2) as agent:
        answer = await initialize(agent.conn, 2)
        assert answer.protocol_version == 2
        assert answer.agent_capabilities.load_session is False
        assert answer.agent_capabilities.mcp_capabilities.sse is False
        session = await agent.new_session()
        sid = session.session_id
        assert session.modes is None
        assert {o.id: o.current_value for o in session.config_options}["mode"] == "default"
        await agent.conn.set_config_option(config_id="mode", session_id=sid, value="yolo")
        reply = await agent.conn.prompt(session_id=sid, prompt=_prompt("write and plan"))
        assert reply.stop_reason == "end_turn"
        assert (sandbox.work / "v2.txt").read_text() == "on disk\n"  # not through the editor's fs
        assert agent.editor.files == {}
        first = agent.editor.updates_of_call("w1")[0]
        assert first.session_update == "tool_call_update" and first.title and first.status == "pending"
        assert agent.editor.of("tool_call") == [] and agent.editor.of("plan") == []
        [plan] = agent.editor.of("plan_update")
        assert plan.plan.type == "items" and plan.plan.plan_id == "todo"
        assert [(e.content, e.status) for e in plan.plan.entries] == [("Write it", "in_progress")]
        await agent.conn.prompt(session_id=sid, prompt=_prompt("/plan on"))  # changed inside the session
        assert agent.editor.of("current_mode_update") == []
        assert {o.id: o.current_value for o in agent.editor.of("config_option_update")[-1].config_options}[
            "mode"
        ] == "plan"
        for call in (
            agent.conn.load_session(cwd=str(sandbox.work), session_id=sid, mcp_servers=[]),
            agent.conn.set_session_mode(session_id=sid, mode_id="default"),
        ):
            with pytest.raises(RequestError) as gone:
                await call
            assert gone.value.code == -32601 and "ACP v2" in str(gone.value)
        agent.editor.clear()
        await agent.conn.resume_session(session_id=sid, cwd=str(sandbox.work), mcp_servers=[])
        assert agent.editor.of("user_message_chunk", sid) == []  # a plain resume replays nothing
        await agent.conn.resume_session(
            session_id=sid, cwd=str(sandbox.work), mcp_servers=[], replayFrom="start"
        )
        assert agent.editor.text("user_message_chunk", sid).startswith("write and plan")


async def test_a_v2_editor_over_websocket(serve: Any, sandbox: Sandbox) -> None:
    todos = [{"title": "Remote", "status": "pending"}]
    server = serve(
        tool_script("p1", "SetTodoList", todos=todos), "text: ok", env=V2
    )  # the server's env decides
    editor = Editor()
    transport = await create_websocket_stream(
        acp_url(server), headers={"Authorization": f"Bearer {server.token}"}
    )
    conn = connect_to_agent(editor, transport)  # pyright: ignore[reportArgumentType]
    try:
        answer = await initialize(conn, 2)
        assert answer.protocol_version == 2 and answer.agent_capabilities.load_session is False
        session = await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])
        assert session.modes is None
        await conn.prompt(session_id=session.session_id, prompt=_prompt("plan"))
        [plan] = editor.of("plan_update")
        assert [e.content for e in plan.plan.entries] == ["Remote"]
        assert (
            editor.of("tool_call") == []
            and editor.updates_of_call("p1")[0].session_update == "tool_call_update"
        )
        with pytest.raises(RequestError) as gone:
            await conn.load_session(cwd=str(sandbox.work), session_id=session.session_id, mcp_servers=[])
        assert gone.value.code == -32601
    finally:
        await conn.close()
        await transport.close()
