"""ACP over WebSocket through a real `soulwire serve` on 127.0.0.1, driven by the SDK's client
side over its WebSocket stream: the same sessions as the web UI's and the SDK's (an editor
loads a session a Wire client made, a Wire client sees the editor's turn), approvals through
the hub, observers, the token and `soulwire acp --connect` bridging stdio to it."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import websockets
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, Implementation
from acp.ws import create_websocket_stream

from tests.acp.conftest import WAIT_S, Editor, tool_script
from tests.server.serve_client import ServeProcess
from tests.wire_client import Sandbox

pytestmark = pytest.mark.anyio


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def acp_url(server: ServeProcess) -> str:
    return f"ws://127.0.0.1:{server.port}/acp"


@asynccontextmanager
async def editor_over_ws(
    server: ServeProcess, token: str | None = None, *, capabilities: ClientCapabilities | None = None
) -> AsyncIterator[tuple[ClientSideConnection, Editor]]:
    editor = Editor()
    transport = await create_websocket_stream(
        acp_url(server), headers={"Authorization": f"Bearer {token or server.token}"}
    )
    conn = connect_to_agent(editor, transport)  # pyright: ignore[reportArgumentType]
    try:
        with anyio.fail_after(WAIT_S * 3):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=capabilities or ClientCapabilities(),
                client_info=Implementation(name="pytest-ws-editor", version="1"),
            )
            yield conn, editor
    finally:
        await conn.close()
        await transport.close()


async def test_an_editor_runs_a_session_over_websocket_with_approvals(serve: Any, sandbox: Sandbox) -> None:
    server = serve(tool_script("w1", "WriteFile", path="made.txt", content="remote\n"), "text: written")
    async with editor_over_ws(server) as (conn, editor):
        session = await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])
        editor.answer("approve")
        reply = await conn.prompt(session_id=session.session_id, prompt=_prompt("write it"))
        assert reply.stop_reason == "end_turn"
        assert editor.text() == "written"
        assert len(editor.permissions) == 1
        assert editor.tool_statuses("w1")[-1] == "completed"
        assert (sandbox.work / "made.txt").read_text() == "remote\n"
        listed = await conn.list_sessions(cwd=str(sandbox.work))
        assert session.session_id in {s.session_id for s in listed.sessions}
    # the web UI's side of the same session: a Wire client replays what the editor did
    async with websockets.connect(
        f"ws://127.0.0.1:{server.port}/ws/sessions/{session.session_id}",
        additional_headers={"Authorization": f"Bearer {server.token}"},
    ) as wire:
        await wire.send(json.dumps({"jsonrpc": "2.0", "id": "r", "method": "replay"}))
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(WAIT_S):
            while (message := json.loads(await wire.recv())).get("id") != "r":
                seen.append(message)
    types = [m["params"]["type"] for m in seen if m.get("method") == "event"]
    assert "TurnBegin" in types and "ToolResult" in types


async def test_an_editor_loads_a_session_a_wire_client_started(serve: Any, sandbox: Sandbox) -> None:
    server = serve("text: from the web", "text: from the editor")
    session_id = server.create_session()
    async with websockets.connect(  # a Wire client (what the web UI speaks), one turn
        f"ws://127.0.0.1:{server.port}/ws/sessions/{session_id}",
        additional_headers={"Authorization": f"Bearer {server.token}"},
    ) as wire:
        await wire.send(
            json.dumps({"jsonrpc": "2.0", "id": "1", "method": "prompt", "params": {"user_input": "hello"}})
        )
        with anyio.fail_after(WAIT_S):
            while json.loads(await wire.recv()).get("id") != "1":
                pass
    async with editor_over_ws(server) as (conn, editor):
        await conn.load_session(cwd=str(sandbox.work), session_id=session_id, mcp_servers=[])
        assert editor.text("user_message_chunk") == "hello"
        assert editor.text() == "from the web"
        editor.clear()
        await conn.prompt(session_id=session_id, prompt=_prompt("and now"))
        assert editor.text() == "from the editor"


async def test_a_second_editor_observes_and_cannot_prompt(serve: Any, sandbox: Sandbox) -> None:
    server = serve("text: first", "text: second")
    async with editor_over_ws(server) as (conn, _), editor_over_ws(server) as (other, watcher):
        session = await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])
        await other.resume_session(session_id=session.session_id, cwd=str(sandbox.work), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=_prompt("go"))
        with anyio.fail_after(WAIT_S):
            while watcher.text(session_id=session.session_id) != "first":
                await anyio.sleep(0.02)  # the observer's copy arrives on its own socket
        with pytest.raises(RequestError) as refused:
            await other.prompt(session_id=session.session_id, prompt=_prompt("me too"))
        assert "controller" in str(refused.value)


async def test_the_token_is_required(serve: Any) -> None:
    server = serve()
    with pytest.raises(websockets.InvalidStatus) as refused:
        await create_websocket_stream(acp_url(server), headers={"Authorization": "Bearer wrong"})
    assert refused.value.response.status_code in (401, 403)


async def test_bad_frames_get_json_rpc_errors_and_the_connection_goes_on(serve: Any) -> None:
    server = serve()
    async with websockets.connect(
        acp_url(server), additional_headers={"Authorization": f"Bearer {server.token}"}
    ) as ws:
        await ws.send("not json")
        assert json.loads(await ws.recv())["error"]["code"] == -32700
        # As on the agent's stdio (one check of a received line): nested past the limit, a
        # method that is no string, an id with neither method nor result.
        for frame in (
            "[" * 100_000 + "]" * 100_000,
            '{"jsonrpc":"2.0","id":7,"method":5}',
            '{"jsonrpc":"2.0","id":8}',
        ):
            await ws.send(frame)
            assert json.loads(await ws.recv())["error"]["code"] == -32600, frame[:40]
        await ws.send(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        )
        assert json.loads(await ws.recv())["result"]["protocolVersion"] == 1


async def test_acp_connect_bridges_an_editors_stdio_to_the_server(serve: Any, sandbox: Sandbox) -> None:
    server = serve("text: via the bridge")
    editor = Editor()
    argv = [sys.executable, "-m", "soulwire", "acp", "--connect", acp_url(server), "--token", server.token]
    async with spawn_agent_process(editor, argv[0], *argv[1:], env=sandbox.env()) as (conn, _process):  # pyright: ignore[reportArgumentType]
        with anyio.fail_after(WAIT_S * 3):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=_prompt("hi"))
    assert reply.stop_reason == "end_turn" and editor.text() == "via the bridge"


async def test_named_users_over_acp(serve: Any, sandbox: Sandbox) -> None:
    """On `/acp` a user's token names them: a member's new session is theirs (audited when they
    prompt), another member neither lists nor loads it, an observer cannot create one."""
    from tests.server.test_serve_users import add

    bob, carol, olga = (
        add(sandbox, n, r) for n, r in (("bob", "member"), ("carol", "member"), ("olga", "observer"))
    )
    server = serve("text: for bob")
    async with editor_over_ws(server, bob) as (conn, _):
        session = (await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])).session_id
        assert (await conn.prompt(session_id=session, prompt=_prompt("mine"))).stop_reason == "end_turn"
    async with editor_over_ws(server, carol) as (conn, _):
        assert (await conn.list_sessions(cwd=str(sandbox.work))).sessions == []
        with pytest.raises(RequestError) as hidden:
            await conn.load_session(cwd=str(sandbox.work), session_id=session, mcp_servers=[])
        assert f"carol may not see session {session}" in str(hidden.value)
    async with editor_over_ws(server, olga) as (conn, _):
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])
        assert "olga is an observer on this server: creating a session is refused" in str(refused.value)
    (line,) = (sandbox.share / "audit.jsonl").read_text().splitlines()
    assert json.loads(line) | {"at": 0} == {
        "at": 0, "user": "bob", "action": "prompt", "session_id": session, "detail": {"text": "mine"}
    }  # fmt: skip


async def test_the_mode_is_a_config_option_kept_in_sync_across_editors(serve: Any, sandbox: Sandbox) -> None:
    server = serve("text: unused")
    async with editor_over_ws(server) as (conn, editor), editor_over_ws(server) as (other, watcher):
        session = await conn.new_session(cwd=str(sandbox.work), mcp_servers=[])
        sid = session.session_id
        expected = {"mode": "default", "model": "scripted", "sandbox": "off", "thinking": "off"}
        assert {o.id: o.current_value for o in session.config_options or []} == expected
        reply = await conn.set_config_option(config_id="mode", session_id=sid, value="plan")
        assert {o.id: o.current_value for o in reply.config_options} == expected | {"mode": "plan"}
        resumed = await other.resume_session(session_id=sid, cwd=str(sandbox.work), mcp_servers=[])
        assert {o.id: o.current_value for o in resumed.config_options or []} == expected | {"mode": "plan"}
        await conn.prompt(session_id=sid, prompt=_prompt("/plan"))  # toggled inside the session
        for seen in (editor, watcher):
            with anyio.fail_after(WAIT_S):
                while not (updates := seen.of("config_option_update", sid)) or (
                    updates[-1].config_options[0].current_value != "default"
                ):
                    await anyio.sleep(0.02)  # each editor's copy arrives on its own socket
        with pytest.raises(RequestError) as refused:
            await conn.set_config_option(config_id="turbo", session_id=sid, value="on")
        assert refused.value.code == -32602 and "turbo" in str(refused.value)
