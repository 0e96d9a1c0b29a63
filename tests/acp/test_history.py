"""session/load, session/list and session/resume across processes; malformed input; exit."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import HttpMcpServer, McpServerStdio

from tests.acp.conftest import acp_argv, run_agent, tool_script
from tests.wire_client import Sandbox, WireProcess

pytestmark = pytest.mark.anyio
TINY_SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny_server.py")


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


async def test_load_replays_the_history_in_a_new_process_before_answering(sandbox: Sandbox) -> None:
    sandbox.work.mkdir(parents=True)
    (sandbox.work / "a.txt").write_text("alpha\n")
    scripts = (
        "think: hmm\n" + tool_script("r1", "ReadFile", path="a.txt"),
        "text: It says alpha",
        "text: later",
    )
    async with run_agent(sandbox, *scripts) as agent:
        await agent.initialize()
        session_id = (await agent.new_session()).session_id
        await agent.conn.prompt(session_id=session_id, prompt=_prompt("what is in a.txt?"))
    async with run_agent(sandbox) as agent:
        await agent.initialize()
        listed = await agent.conn.list_sessions(cwd=str(sandbox.work))
        assert [s.session_id for s in listed.sessions] == [session_id]
        assert listed.sessions[0].title == "what is in a.txt?"
        assert listed.sessions[0].cwd == str(sandbox.work)
        everywhere = await agent.conn.list_sessions()
        assert [(s.session_id, s.cwd) for s in everywhere.sessions] == [(session_id, str(sandbox.work))]
        await agent.conn.load_session(cwd=str(sandbox.work), session_id=session_id, mcp_servers=[])
        seen = len(agent.editor.updates)  # everything replayed arrived before the response
        kinds = [u.session_update for _, u in agent.editor.updates[:seen]]
        assert kinds[0] == "user_message_chunk"
        assert agent.editor.text("user_message_chunk") == "what is in a.txt?"
        assert agent.editor.text("agent_thought_chunk") == "hmm"
        assert agent.editor.text() == "It says alpha"
        call = agent.editor.updates_of_call("r1")
        assert call[0].kind == "read" and call[0].locations[0].path == str(sandbox.work / "a.txt")
        assert call[-1].status == "completed" and "alpha" in call[-1].content[0].content.text
        assert all(s == session_id for s, _ in agent.editor.updates)


async def test_load_shows_a_turn_a_killed_engine_left_open_as_interrupted(sandbox: Sandbox) -> None:
    sandbox.scripts = [tool_script("c1", "Shell", command="echo hi")]
    sandbox.write()
    wire = WireProcess(sandbox.argv("--session", "s-crash"), sandbox.env(), sandbox.work)
    wire.initialize()
    wire.request("prompt", {"user_input": "do A"})
    while (message := wire.recv()) is not None and message.get("method") != "request":
        pass  # until the Shell call waits for its approval
    os.killpg(wire.proc.pid, signal.SIGKILL)
    wire.proc.wait(timeout=10)
    async with run_agent(sandbox) as agent:
        await agent.initialize()
        await agent.conn.load_session(cwd=str(sandbox.work), session_id="s-crash", mcp_servers=[])
        call = agent.editor.updates_of_call("c1")
        assert call[-1].status == "failed"
        assert "interrupted: the engine stopped before this call finished" in json.dumps(
            call[-1].model_dump(mode="json")
        )


async def test_resume_continues_the_conversation_without_replay(sandbox: Sandbox) -> None:
    async with run_agent(sandbox, "text: first answer", "text: second answer") as agent:
        await agent.initialize()
        session_id = (await agent.new_session()).session_id
        await agent.conn.prompt(session_id=session_id, prompt=_prompt("one"))
    async with run_agent(sandbox, "text: second answer") as agent:
        await agent.initialize()
        await agent.conn.resume_session(cwd=str(sandbox.work), session_id=session_id)
        assert agent.editor.of("agent_message_chunk") == []
        reply = await agent.conn.prompt(session_id=session_id, prompt=_prompt("two"))
        assert reply.stop_reason == "end_turn"
        assert agent.editor.text() == "second answer"
        context = (sandbox.share / "sessions").rglob("context.jsonl")
        text = next(iter(context)).read_text()
        assert "first answer" in text and "second answer" in text


async def test_loading_an_unknown_session_is_an_error(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        await agent.initialize()
        with pytest.raises(RequestError) as failure:
            await agent.conn.load_session(cwd=str(sandbox.work), session_id="nope", mcp_servers=[])
        assert "Session not found: nope" in str(failure.value)
        with pytest.raises(RequestError) as relative:
            await agent.conn.new_session(cwd="relative/dir", mcp_servers=[])
        assert relative.value.code == -32602


async def test_mcp_servers_of_the_client_are_used(sandbox: Sandbox) -> None:
    call = tool_script("m1", "shout", text="quiet")
    async with run_agent(sandbox, call, "text: done") as agent:
        await agent.initialize()
        stdio = McpServerStdio(name="tiny", command=sys.executable, args=[TINY_SERVER, "tiny"], env=[])
        unreachable = HttpMcpServer(type="http", name="web", url="http://127.0.0.1:9/mcp", headers=[])
        session = await agent.conn.new_session(cwd=str(sandbox.work), mcp_servers=[stdio, unreachable])
        await agent.conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("shout"))
        final = agent.editor.updates_of_call("m1")[-1]
        assert final.status == "completed" and "QUIET" in final.content[0].content.text


def test_malformed_input_gets_json_rpc_errors_and_the_agent_keeps_serving(raw_agent) -> None:  # type: ignore[no-untyped-def]
    proc = raw_agent()
    proc.send_raw("this is not json")
    assert proc.recv() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    proc.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    assert proc.recv()["result"]["protocolVersion"] == 1
    proc.send({"jsonrpc": "2.0", "id": 2, "method": "session/frobnicate", "params": {}})
    assert proc.recv()["error"]["code"] == -32601
    proc.send({"jsonrpc": "2.0", "id": 3, "method": "_soulwire/whatever", "params": {}})
    assert proc.recv()["error"]["code"] == -32601
    proc.send({"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"mcpServers": []}})
    assert proc.recv()["error"]["code"] == -32602
    proc.send({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": "one"}})
    assert proc.recv()["error"]["code"] == -32602
    proc.send_raw("[1, 2]")
    assert proc.recv()["error"]["code"] == -32600
    proc.send({"jsonrpc": "2.0", "method": "session/unheard_of", "params": {}})  # a notification: no answer
    proc.send({"jsonrpc": "2.0", "id": 6, "method": "session/list", "params": {}})
    assert proc.recv()["result"] == {"sessions": []}
    proc.close()
    assert proc.stderr_lines and not [line for line in proc.stderr_lines if "Traceback" in line]


def _answer(proc: WireProcess) -> dict[str, Any]:
    """The next response, `session/update` notifications skipped."""
    while "id" not in (message := proc.recv()):
        pass
    return message


def test_text_that_is_not_utf8_is_a_parse_error_and_a_lone_surrogate_is_replaced(
    raw_agent, sandbox: Sandbox
) -> None:  # type: ignore[no-untyped-def]
    """The UTF-8 form of a surrogate (ED A0 80) is not UTF-8: -32700, not a -32603 carrying
    Python's codec error; an escaped lone surrogate is valid JSON and is replaced."""
    proc = raw_agent("text: fine")
    proc.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    assert _answer(proc)["id"] == 1
    new = {"cwd": str(sandbox.work), "mcpServers": []}
    proc.send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new})
    session_id = _answer(proc)["result"]["sessionId"]
    head = b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"' + session_id.encode()
    proc.send_raw(head + b'","prompt":[{"type":"text","text":"a\xed\xa0\x80b"}]}}')
    assert _answer(proc) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    proc.send_raw(head + b'","prompt":[{"type":"text","text":"a\\ud800b"}]}}')
    answer = _answer(proc)
    assert answer["id"] == 3 and answer["result"]["stopReason"] == "end_turn", answer
    proc.close()


def test_stdin_eof_ends_the_process(sandbox: Sandbox) -> None:
    sandbox.write()
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    new = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(sandbox.work), "mcpServers": []},
        }
    )
    done = subprocess.run(
        acp_argv(sandbox),
        input=f"{hello}\n{new}\n".encode(),
        capture_output=True,
        env=sandbox.env(),
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [m.get("id") for m in lines if "id" in m] == [1, 2]


def test_stdin_eof_during_a_turn_kills_the_command_and_exits(sandbox: Sandbox, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = f"sh -c 'echo $$ > {pid_file}; sleep 60'"
    sandbox.scripts = [tool_script("s1", "Shell", command=command)]
    sandbox.write()
    proc = subprocess.Popen(
        [*acp_argv(sandbox), "--yolo"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=sandbox.env()
    )
    assert proc.stdin is not None and proc.stdout is not None

    def call(request_id: int, method: str, params: dict[str, object]) -> None:
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        proc.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    call(1, "initialize", {"protocolVersion": 1})
    call(2, "session/new", {"cwd": str(sandbox.work), "mcpServers": []})
    session_id = None
    while session_id is None:
        message = json.loads(proc.stdout.readline())
        if message.get("id") == 2:
            session_id = message["result"]["sessionId"]
    call(3, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "sleep"}]})
    for _ in range(400):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_close_ends_a_session(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        await agent.initialize()
        session_id = (await agent.new_session()).session_id
        await agent.conn.close_session(session_id=session_id)
        with pytest.raises(RequestError) as failure:
            await agent.conn.prompt(session_id=session_id, prompt=_prompt("x"))
        assert "Session not found" in str(failure.value)


def test_sigterm_during_a_turn_kills_the_command_and_exits(sandbox: Sandbox, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = f"sh -c 'echo $$ > {pid_file}; sleep 60'"
    sandbox.scripts = [tool_script("s1", "Shell", command=command)]
    sandbox.write()
    proc = subprocess.Popen(
        [*acp_argv(sandbox), "--yolo"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=sandbox.env()
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(sandbox.work), "mcpServers": []},
        },
    ]
    for line in lines:
        proc.stdin.write(json.dumps(line).encode() + b"\n")
    proc.stdin.flush()
    session_id = None
    while session_id is None:
        message = json.loads(proc.stdout.readline())
        if message.get("id") == 2:
            session_id = message["result"]["sessionId"]
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "sleep"}]}
    proc.stdin.write(
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}).encode() + b"\n"
    )
    proc.stdin.flush()
    for _ in range(400):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    proc.terminate()
    assert proc.wait(timeout=10) == 0
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)
    proc.stdin.close()


async def test_an_http_mcp_server_of_the_client_is_used(sandbox: Sandbox) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(  # noqa: ASYNC220  (the test's MCP server, before the agent starts)
        [sys.executable, TINY_SERVER, "web", "", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                await anyio.sleep(0.05)
        call = tool_script("h1", "shout", text="over http")
        async with run_agent(sandbox, call, "text: done", args=("--yolo",)) as agent:
            await agent.initialize()
            web = HttpMcpServer(type="http", name="web", url=f"http://127.0.0.1:{port}/mcp", headers=[])
            session = await agent.conn.new_session(cwd=str(sandbox.work), mcp_servers=[web])
            await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("shout"))
            final = agent.editor.updates_of_call("h1")[-1]
            assert final.status == "completed" and "OVER HTTP" in final.content[0].content.text
    finally:
        server.terminate()
        server.wait(timeout=10)
