"""The rest of the current stable ACP surface, driven by the SDK's client side: session
delete, fork (unstable), the sandbox picker, usage updates, MCP over SSE, and authentication
(`authenticate` with the Kimi Code device flow against a fake platform, `logout`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import SseMcpServer

from tests.acp.conftest import Agent, run_agent, tool_script
from tests.fake_services import FakePlatform
from tests.wire_client import Sandbox

pytestmark = pytest.mark.anyio
TINY_SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny_server.py")


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


async def _call(agent: Agent, method: str, params: dict[str, Any]) -> Any:
    """A request the SDK's client side has no method for (it predates `session/delete` and
    `logout`), sent through its connection as an editor on a newer SDK would."""
    return await agent.conn._conn.send_request(method, params)  # pyright: ignore[reportPrivateUsage]


async def test_initialize_advertises_the_stable_surface_and_the_auth_methods(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        caps = (await agent.initialize()).agent_capabilities
        sessions = caps.session_capabilities
        for name in ("list", "delete", "resume", "close", "fork", "additional_directories"):
            assert getattr(sessions, name) is not None, name
        assert caps.auth.logout is not None
        assert caps.mcp_capabilities.http is True and caps.mcp_capabilities.sse is True
        plain = await agent.initialize()
        assert [(m.id, getattr(m, "type", None)) for m in plain.auth_methods] == [("kimi-code", None)]
        terminal = await agent.initialize(auth={"terminal": True})
        methods = {m.id: m for m in terminal.auth_methods}
        assert methods["terminal-login"].type == "terminal" and methods["terminal-login"].args == ["login"]


async def test_delete_removes_a_session_open_or_not(sandbox: Sandbox) -> None:
    async with run_agent(sandbox, "text: one", "text: two") as agent:
        await agent.initialize()
        first, second = await agent.new_session(), await agent.new_session()
        for session in (first, second):
            await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("hi"))
        await agent.conn.close_session(session_id=first.session_id)
        listed = {s.session_id for s in (await agent.conn.list_sessions(cwd=str(sandbox.work))).sessions}
        assert {first.session_id, second.session_id} <= listed
        assert await _call(agent, "session/delete", {"sessionId": first.session_id}) == {}
        assert await _call(agent, "session/delete", {"sessionId": second.session_id}) == {}  # open
        listed = {s.session_id for s in (await agent.conn.list_sessions(cwd=str(sandbox.work))).sessions}
        assert not listed & {first.session_id, second.session_id}
        with pytest.raises(RequestError) as gone:
            await agent.conn.prompt(session_id=second.session_id, prompt=_prompt("still there?"))
        assert gone.value.code == -32002
        with pytest.raises(RequestError) as unknown:
            await _call(agent, "session/delete", {"sessionId": first.session_id})
        assert unknown.value.code == -32002


async def test_fork_copies_the_history_whole_or_up_to_a_turn(sandbox: Sandbox) -> None:
    async with run_agent(sandbox, "text: first answer", "text: second answer") as agent:
        await agent.initialize()
        source = await agent.new_session()
        for text in ("question one", "question two"):
            await agent.conn.prompt(session_id=source.session_id, prompt=_prompt(text))
        agent.editor.clear()
        whole = await agent.conn.fork_session(
            session_id=source.session_id, cwd=str(sandbox.work), mcp_servers=[]
        )
        assert whole.session_id != source.session_id
        assert agent.editor.text("user_message_chunk", whole.session_id) == "question onequestion two"
        cut = await agent.conn.fork_session(
            session_id=source.session_id, cwd=str(sandbox.work), mcp_servers=[], turns=1
        )
        assert agent.editor.text("user_message_chunk", cut.session_id) == "question one"
        assert agent.editor.text(session_id=cut.session_id) == "first answer"
        reply = await agent.conn.prompt(session_id=cut.session_id, prompt=_prompt("go on"))
        assert reply.stop_reason == "end_turn"  # the fork is a session of its own
        with pytest.raises(RequestError) as too_far:
            await agent.conn.fork_session(
                session_id=source.session_id, cwd=str(sandbox.work), mcp_servers=[], turns=9
            )
        assert too_far.value.code == -32602 and "2 turns" in str(too_far.value)


async def test_the_sandbox_picker_reopens_the_session_under_the_new_mode(sandbox: Sandbox) -> None:
    write = tool_script("w1", "Shell", command="touch made.txt")
    async with run_agent(sandbox, write, "text: after") as agent:
        await agent.initialize()
        session = await agent.new_session()
        options = {o.id: o for o in session.config_options}
        assert options["sandbox"].current_value == "off"
        assert [o.value for o in options["sandbox"].options] == ["off", "read-only", "workspace-write"]
        reply = await agent.conn.set_config_option(
            config_id="sandbox", session_id=session.session_id, value="read-only"
        )
        assert {o.id: o.current_value for o in reply.config_options}["sandbox"] == "read-only"
        for answer in ("approve", "reject", "reject"):  # the command; no way out of the sandbox
            agent.editor.answer(answer)
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("write"))
        assert agent.editor.tool_statuses("w1")[-1] == "failed"
        assert not (sandbox.work / "made.txt").exists()
        with pytest.raises(RequestError) as bad:
            await agent.conn.set_config_option(
                config_id="sandbox", session_id=session.session_id, value="cage"
            )
        assert bad.value.code == -32602


async def test_usage_updates_report_the_context_window(sandbox: Sandbox) -> None:
    async with run_agent(sandbox, "text: hi\nusage: input_other=1200 output=30") as agent:
        await agent.initialize()
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("count"))
        usage = agent.editor.of("usage_update", session.session_id)
        assert usage and usage[-1].size == 100000 and usage[-1].used > 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_sse_server(port: int) -> subprocess.Popen[bytes]:
    """The tiny MCP server over SSE, once its port answers."""
    server = subprocess.Popen(
        [sys.executable, TINY_SERVER, "web", "", str(port), "sse"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise AssertionError("the SSE MCP server did not start") from None
            time.sleep(0.05)


async def test_an_sse_mcp_server_of_the_client_is_used(sandbox: Sandbox) -> None:
    port = _free_port()
    server = _start_sse_server(port)
    try:
        call = tool_script("s1", "shout", text="over sse")
        async with run_agent(sandbox, call, "text: done", args=("--yolo",)) as agent:
            await agent.initialize()
            web = SseMcpServer(type="sse", name="web", url=f"http://127.0.0.1:{port}/sse", headers=[])
            session = await agent.conn.new_session(cwd=str(sandbox.work), mcp_servers=[web])
            await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("shout"))
            final = agent.editor.updates_of_call("s1")[-1]
            assert final.status == "completed" and "OVER SSE" in final.content[0].content.text
    finally:
        server.terminate()
        server.wait(timeout=10)


async def test_authenticate_runs_the_device_flow_and_logout_forgets_it(sandbox: Sandbox) -> None:
    sandbox.share.mkdir(parents=True, exist_ok=True)
    with FakePlatform(pending_polls=1) as platform:
        env = {
            "SOULWIRE_OAUTH_HOST": platform.url,
            "SOULWIRE_CODE_BASE_URL": f"{platform.url}/v1",
            "BROWSER": "true",  # the agent opens the verification URL: a browser that does nothing
        }
        async with run_agent(sandbox, env=env, config_file=False) as agent:
            await agent.initialize()
            before = await agent.new_session()
            with pytest.raises(RequestError) as needs_login:
                await agent.conn.prompt(session_id=before.session_id, prompt=_prompt("hi"))
            assert needs_login.value.code == -32000
            with pytest.raises(RequestError) as unknown:
                await agent.conn.authenticate(method_id="password")
            assert unknown.value.code == -32602
            assert (await agent.conn.authenticate(method_id="kimi-code")) is not None
            token = json.loads((sandbox.share / "credentials" / "kimi-code.json").read_text())
            assert token["access_token"] == "access-1"
            session = await agent.new_session()
            reply = await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("hi"))
            assert reply.stop_reason == "end_turn"
            assert "hello, holder of access-1" in agent.editor.text(session_id=session.session_id)
            polls = len([r for r in platform.requests if r.path == "/api/oauth/token"])
            await agent.conn.authenticate(method_id="kimi-code")  # logged in already: no new flow
            assert len([r for r in platform.requests if r.path == "/api/oauth/token"]) == polls
            assert await _call(agent, "logout", {}) == {}
            assert not (sandbox.share / "credentials" / "kimi-code.json").exists()
            after = await agent.new_session()
            with pytest.raises(RequestError) as again:
                await agent.conn.prompt(session_id=after.session_id, prompt=_prompt("hi"))
            assert again.value.code == -32000


def test_terminal_login_is_soulwire_acp_with_login_appended(tmp_path: Path) -> None:
    """What an editor runs for the `terminal-login` method: the login command, not the agent."""
    with FakePlatform(pending_polls=0) as platform:
        env = {"SOULWIRE_SHARE_DIR": str(tmp_path), "SOULWIRE_OAUTH_HOST": platform.url,
               "SOULWIRE_CODE_BASE_URL": f"{platform.url}/v1", "PATH": "/usr/bin:/bin"}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "soulwire", "acp", "login", "--json", "--no-browser"],
            env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["type"] == "success"
    assert (tmp_path / "credentials" / "kimi-code.json").is_file()
