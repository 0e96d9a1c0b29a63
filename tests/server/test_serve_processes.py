"""`soulwire serve --processes N`: one loaded process forks N-1 copies, each on its own port
with its own sessions; a copy that dies is reported, and all stop together."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.server.serve_client import ServeProcess


def children(pid: int, count: int) -> list[int]:
    """The `count` copies `pid` forked (the `listening on` lines come before the fork)."""
    found: list[int] = []

    def forked() -> bool:
        with Path(f"/proc/{pid}/task/{pid}/children").open(encoding="ascii") as handle:
            found[:] = [int(p) for p in handle.read().split()]
        return len(found) >= count

    assert wait_until(forked), found
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def run_turn(server: ServeProcess, port: int) -> str:
    """A session on the process at `port`, one prompt: the answer's text."""
    session_id = server.create_session(at=port)
    server.last_session = session_id
    ws = server.ws(session_id, at=port)
    ws.initialize()
    rid = ws.request("prompt", {"user_input": "hi"})
    seen = ws.until(lambda m: m.get("id") == rid and "method" not in m)
    assert seen[-1]["result"]["status"] == "finished", seen[-1]
    text = "".join(
        m["params"]["payload"].get("text", "")
        for m in seen
        if m.get("method") == "event" and m["params"]["type"] == "ContentPart"
    )
    return text


def test_each_process_serves_its_own_port_and_all_stop_together(serve) -> None:
    server = serve("text: hello", args=("--yolo", "--processes", "2"), expect=2)
    first, second = server.ports
    assert first != second
    (copy,) = children(server.proc.pid, 1)
    assert run_turn(server, first) == "hello"

    # A session is live in the process that created it; the other finds it on disk only.
    def live_at(port: int) -> bool:
        return server.api("GET", f"http://127.0.0.1:{port}/api/sessions/{server.last_session}").json()["live"]

    assert live_at(first) and not live_at(second)
    assert run_turn(server, second) == "hello"
    assert server.close() == 0
    assert wait_until(lambda: not alive(copy))
    stderr = "".join(server.stderr_lines)
    assert "Traceback" not in stderr and " exited (code " not in stderr  # a stop is no failure


def test_a_copy_that_dies_is_reported_and_the_others_keep_serving(serve) -> None:
    server = serve("text: still here", args=("--yolo", "--processes", "3"), expect=3)
    copies = children(server.proc.pid, 2)
    os.kill(copies[0], signal.SIGKILL)
    assert wait_until(lambda: " exited (code -9)" in "".join(server.stderr_lines))
    line = next(x for x in server.stderr_lines if " exited (code " in x)
    found = re.search(rf"process {copies[0]} \(http://127\.0\.0\.1:(\d+)\) exited", line)
    assert found is not None, line
    dead = int(found.group(1))
    live = next(p for p in server.ports if p != dead)
    assert run_turn(server, live) == "still here"
    assert server.close() == 0
    assert wait_until(lambda: not alive(copies[1]))


def test_killing_the_first_process_ends_its_copies(serve) -> None:
    server = serve(args=("--processes", "2"), expect=2)
    (copy,) = children(server.proc.pid, 1)
    server.proc.kill()
    server.proc.wait()
    assert wait_until(lambda: not alive(copy))  # they do not outlive it, even without a signal to the group


def test_processes_need_a_free_port_each(sandbox) -> None:
    sandbox.write()
    argv = [sys.executable, "-m", "soulwire", "serve", "--listen", "127.0.0.1:7999", "--processes", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, env=sandbox.env(), timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "soulwire serve: error: --processes needs --listen HOST:0 (each process takes a free port)"
    ]


def test_sessions_of_one_server_share_the_provider_connection(sandbox, serve) -> None:
    from tests.fake_llm_server import FakeLLMServer
    from tests.provider_streams import Answer, chat_stream

    with FakeLLMServer() as provider:
        sandbox.config_extra = {
            "default_model": "remote",
            "models": {"remote": {"provider": "fake", "model": "m", "max_context_size": 100_000}},
            "providers": {
                "fake": {"type": "openai_legacy", "base_url": provider.url + "/v1", "api_key": "k"}
            },
        }
        provider.queue(
            *(chat_stream(Answer(message_id=f"r{i}", text=["fine"]), moonshot=False) for i in range(3))
        )
        server = serve()
        answers = [run_turn(server, server.port) for _ in range(3)]
        assert answers == ["fine"] * 3
        assert len(provider.requests) == 3
        # Three sessions, one kept-alive connection: no connect (or TLS handshake) per session.
        assert len({r.client for r in provider.requests}) == 1, [r.client for r in provider.requests]


def test_the_first_process_leaves_its_sessions_tool_processes_to_their_waiters(serve) -> None:
    # It collects its dead copies on SIGCHLD, which comes for its sessions' commands too: a
    # wait for any child could take a command's exit status from the one waiting for it (on
    # 3.11 asyncio's watcher thread blocks in its own wait and wins; watchers that poll
    # may not).
    from tests.tool_calls import call

    server = serve(
        call("c1", "Shell", {"command": "sleep 0.2; exit 3"}),
        "text: done",
        args=("--yolo", "--processes", "2"),
        expect=2,
    )
    children(server.proc.pid, 1)
    session_id = server.create_session(at=server.port)
    ws = server.ws(session_id, at=server.port)
    ws.initialize()
    rid = ws.request("prompt", {"user_input": "go"})
    seen = ws.until(lambda m: m.get("id") == rid and "method" not in m)
    (result,) = [
        m["params"]["payload"]["return_value"]
        for m in seen
        if m.get("method") == "event" and m["params"]["type"] == "ToolResult"
    ]
    assert result["is_error"] is True and "3" in result["message"], result
    assert server.close() == 0
