"""MCP servers in the real engine: a real stdio server (tests/mcp_servers/tiny_server.py, built
with the official SDK) connected in the background, its tools called by a scripted model,
approvals, loading events, a failing server, name conflicts and shutdown."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.e2e.test_sandbox import needs_bwrap
from tests.fake_llm_server import FakeLLMServer, json_reply
from tests.tool_calls import answering, call, requests, results, run_turn
from tests.wire_client import WireProcess, event_types, payloads

SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny_server.py")


def servers(pidfile: Path | None = None, **extra: dict[str, Any]) -> str:
    args = [SERVER, "tiny"] + ([str(pidfile)] if pidfile else [])
    entries: dict[str, Any] = {"tiny": {"command": sys.executable, "args": args}}
    entries.update(extra)
    return json.dumps({"mcpServers": entries})


def pids(pidfile: Path) -> list[int]:
    # opened for append before its line is written: wait for a whole line
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().endswith("\n")):
        assert time.monotonic() < deadline, "the MCP server wrote no pid"
        time.sleep(0.02)
    return [int(p) for p in pidfile.read_text().split()]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_an_mcp_tool_is_called_after_approval_and_its_text_comes_back(engine, sandbox):
    config = sandbox.root / "mcp.json"
    config.write_text(servers())
    wire = engine(
        call("c1", "shout", {"text": "hello"}),
        "text: done",
        "text: again",
        args=("--mcp-config-file", str(config)),
    )
    wire.initialize(protocol_version="1.10")
    messages, result = run_turn(wire)
    assert result["status"] == "finished"
    types = event_types(messages)
    assert types[:5] == ["TurnBegin", "StatusUpdate", "MCPLoadingBegin", "StatusUpdate", "MCPLoadingEnd"]
    before, after = (s["mcp_status"] for s in payloads(messages, "StatusUpdate")[:2])
    assert before["loading"] is True and before["total"] == 1 and before["servers"][0]["name"] == "tiny"
    assert after["loading"] is False and after["connected"] == 1
    assert after["servers"][0]["status"] == "connected" and "shout" in after["servers"][0]["tools"]
    [approval] = requests(messages)
    assert approval["sender"] == "shout"
    assert approval["action"] == "mcp:shout"
    assert approval["description"] == "Call MCP tool `shout`."
    assert approval["display"] == []
    value = results(messages)["c1"]
    assert value == {
        "is_error": False,
        "output": [{"type": "text", "text": "HELLO"}],
        "message": "",
        "display": [],
        "extras": None,
    }
    # The next turn does not wait again.
    wire2_messages, _ = run_turn(wire)
    assert "MCPLoadingBegin" not in event_types(wire2_messages)
    assert wire.close() == 0


def test_errors_rejections_images_and_the_output_cap(engine, sandbox):
    script = "\n".join(
        [
            call("e1", "explode", {"reason": "on purpose"}),
            call("b1", "big", {"n": 150_000}),
            call("p1", "pixel", {}),
            call("r1", "shout", {"text": "no"}),
        ]
    )
    wire = engine(script, "text: done", args=("--mcp-config", servers()))
    wire.initialize()

    def answer(message: dict[str, Any]) -> dict[str, Any]:
        verdict = "reject" if message["params"]["payload"]["sender"] == "shout" else "approve"
        return answering(verdict, "not now" if verdict == "reject" else "")(message)

    messages, _ = run_turn(wire, answer=answer)
    found = results(messages)
    # The SDK's server hides the exception's text; the reference's message for isError results.
    assert found["e1"]["is_error"] is True
    assert found["e1"]["output"] == [{"type": "text", "text": "Error executing tool explode"}]
    assert (
        found["e1"]["message"]
        == "Tool returned an error. The output may be error message or incomplete output"
    )
    text, notice = found["b1"]["output"]
    assert found["b1"]["is_error"] is False and text == {"type": "text", "text": "x" * 100_000}
    assert notice["text"] == (
        "\n\n[Output truncated: exceeded 100000 character limit. "
        "Use pagination or more specific queries to get remaining content.]"
    )
    [image] = found["p1"]["output"]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,")
    assert found["r1"]["is_error"] is True and "not now" in found["r1"]["message"]


def test_a_server_that_cannot_start_fails_without_hurting_the_session(engine, sandbox):
    broken = {"command": str(sandbox.root / "no-such-server")}
    crashing = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    wire = engine(
        call("c1", "shout", {"text": "still here"}),
        "text: done",
        args=("--mcp-config", servers(broken=broken, crashing=crashing), "--yolo"),
    )
    wire.initialize()
    messages, result = run_turn(wire)
    assert result["status"] == "finished"
    final = payloads(messages, "StatusUpdate")[1]["mcp_status"]
    states = {s["name"]: s["status"] for s in final["servers"]}
    assert states == {"tiny": "connected", "broken": "failed", "crashing": "failed"}
    assert final["connected"] == 1 and final["total"] == 3
    assert results(messages)["c1"]["output"] == [{"type": "text", "text": "STILL HERE"}]


def test_an_mcp_tool_takes_over_a_client_tool_of_the_same_name(engine, sandbox):
    """As in the reference: a client tool registered before the servers connect is replaced by
    the MCP tool of that name, which then counts as built-in for later registrations."""
    with FakeLLMServer() as llm:
        llm.queue(json_reply(400, {"error": {"message": "enough"}}))
        sandbox.write()
        config = {
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": "gpt", "max_context_size": 100000}},
            "providers": {"p": {"type": "openai_legacy", "base_url": llm.url, "api_key": "k"}},
        }
        sandbox.config_path.write_text(json.dumps(config))
        wire = WireProcess(sandbox.argv("--mcp-config", servers()), sandbox.env(), sandbox.work)
        try:
            clash = {"name": "client_clash", "description": "mine", "parameters": {"type": "object"}}
            other = {"name": "mine", "description": "", "parameters": {"type": "object"}}
            first = wire.initialize(protocol_version="1.10", external_tools=[clash])["result"]
            assert first["external_tools"] == {"accepted": ["client_clash"], "rejected": []}
            wire.prompt("go")
            tools = {t["function"]["name"]: t["function"] for t in llm.bodies()[0]["tools"]}
            assert list(tools)[-7:] == ["client_clash", "shout", "explode", "slow", "big", "pixel", "die"]
            assert tools["client_clash"]["description"].startswith(
                "This is an MCP (Model Context Protocol) tool"
            )
            assert tools["shout"]["description"] == (
                "This is an MCP (Model Context Protocol) tool from MCP server `tiny`.\n\n"
                "Echo the text back, upper-cased."
            )
            assert tools["shout"]["parameters"]["required"] == ["text"]
            again = wire.initialize(protocol_version="1.10", external_tools=[clash, other])["result"]
            assert again["external_tools"] == {
                "accepted": ["mine"],
                "rejected": [{"name": "client_clash", "reason": "conflicts with builtin tool"}],
            }
        finally:
            wire.close()


def test_a_client_of_an_older_protocol_gets_the_status_but_not_the_loading_events(engine):
    """MCPLoadingBegin/End came after 1.3 (spec §0.2): version gating keeps them from a 1.3 client."""
    wire = engine("text: hi", args=("--mcp-config", servers()))
    wire.initialize(protocol_version="1.3")
    messages, _ = run_turn(wire)
    types = event_types(messages)
    assert types[:3] == ["TurnBegin", "StatusUpdate", "StatusUpdate"]
    assert "MCPLoadingBegin" not in types


def test_no_server_process_outlives_the_session(engine, sandbox):
    pidfile = sandbox.root / "pids"
    wire = engine("text: hi", args=("--mcp-config", servers(pidfile)))
    wire.initialize()
    run_turn(wire)
    [pid] = pids(pidfile)
    assert alive(pid)
    assert wire.close() == 0
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


def test_sigterm_ends_the_servers_too(engine, sandbox):
    pidfile = sandbox.root / "pids"
    wire = engine("text: hi", args=("--mcp-config", servers(pidfile)))
    wire.initialize()
    [pid] = pids(pidfile)  # connecting starts without a prompt
    deadline = time.monotonic() + 10
    while not alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    wire.proc.terminate()
    wire.proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)


def test_without_mcp_servers_a_turn_has_no_loading_events(engine):
    wire = engine("text: hi")
    wire.initialize()
    messages, _ = run_turn(wire)
    assert "MCPLoadingBegin" not in event_types(messages)
    assert all(s["mcp_status"] is None for s in payloads(messages, "StatusUpdate"))


def test_a_malformed_mcp_config_is_a_usage_error(engine, sandbox):
    wire = engine("text: hi", args=("--mcp-config", '{"mcpServers": {"x": {"args": []}}}'))
    assert wire.close() == 2
    assert "Invalid MCP server `x` in --mcp-config" in "".join(wire.stderr_lines)


def test_a_server_over_streamable_http(engine, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, SERVER, "web", "", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP MCP server did not start"
                time.sleep(0.05)
        config = json.dumps({"mcpServers": {"web": {"url": f"http://127.0.0.1:{port}/mcp"}}})
        wire = engine(
            call("h1", "shout", {"text": "over http"}), "text: done", args=("--mcp-config", config, "--yolo")
        )
        wire.initialize()
        messages, _ = run_turn(wire)
        assert results(messages)["h1"]["output"] == [{"type": "text", "text": "OVER HTTP"}]
        assert wire.close() == 0
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_call_past_the_configured_timeout_is_an_error(engine, sandbox):
    sandbox.config_extra = {"mcp": {"client": {"tool_call_timeout_ms": 300}}}
    wire = engine(
        call("s1", "slow", {"seconds": 20}),
        call("s2", "shout", {"text": "after"}),
        "text: done",
        args=("--mcp-config", servers(), "--yolo"),
    )
    wire.initialize()
    messages, _ = run_turn(wire)
    found = results(messages)
    assert found["s1"]["is_error"] is True and "Timeout" in found["s1"]["message"]
    assert found["s2"]["output"] == [{"type": "text", "text": "AFTER"}]  # the connection still serves
    assert wire.close() == 0


def test_a_server_that_dies_mid_session_turns_its_tools_into_errors(engine):
    wire = engine(
        call("d1", "die", {}),
        call("s1", "shout", {"text": "anyone?"}),
        "text: done",
        args=("--mcp-config", servers(), "--yolo"),
    )
    wire.initialize()
    messages, result = run_turn(wire)
    assert result["status"] == "finished"
    found = results(messages)
    assert found["d1"]["is_error"] is True
    assert found["s1"]["is_error"] is True
    assert found["s1"]["message"] == "Error calling MCP tool `shout` of server `tiny`: Connection closed"
    # The session keeps serving.
    assert wire.close() == 0


@needs_bwrap
def test_in_a_sandbox_a_stdio_servers_tool_is_a_way_out_only_a_person_opens(engine, sandbox):
    """The server is a process the engine started outside the sandbox: `--yolo` does not call
    its tools in a sandboxed session, a person may (the request names the boundary)."""
    config = sandbox.root / "mcp.json"
    config.write_text(servers())
    scripts = (call("c1", "shout", {"text": "hello"}), "text: done")
    args = ("--mcp-config-file", str(config), "--sandbox", "workspace-write")
    yolo = engine(*scripts, args=(*args, "--yolo"))
    messages, _ = run_turn(yolo)
    assert requests(messages) == []
    refused = results(messages)["c1"]
    assert refused["is_error"] and refused["display"] == [{"type": "brief", "text": "Sandbox escape refused"}]
    assert yolo.close() == 0
    asked = engine(*scripts, args=args)
    messages, _ = run_turn(asked)
    (approval,) = requests(messages)
    assert approval["action"] == "mcp:shout (leaves the sandbox: full)"
    assert approval["description"] == (
        "Call MCP tool `shout` — it leaves the sandbox: the whole sandbox (network, writes anywhere, "
        "secrets visible)"
    )
    assert results(messages)["c1"]["output"] == [{"type": "text", "text": "HELLO"}]
