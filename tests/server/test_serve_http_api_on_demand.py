"""FastAPI (~0.5 s of imports) is off the path to a first WebSocket session: the forked copies of
`soulwire serve --processes N` serve sessions without it and build the HTTP API at their first
request for it (and load the price table its answers may need then); a single-process server
builds it as it starts (its web UI's first page needs it). Either way the API and its OpenAPI
document answer as before, behind the same guard."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2

from tests.server.serve_client import ServeProcess
from tests.server.test_serve_processes import children, wait_until
from tests.waiting import observation_window
from tests.wire_client import Sandbox

IMPORT_TIMES = {"PYTHONPROFILEIMPORTTIME": "1"}
"""Each process of the server prints every module it imports (once: when it first does)."""


def imports(server: ServeProcess, module: str) -> int:
    """How many of the server's processes have imported `module` so far."""
    pattern = re.compile(rf"^import time:.*\|\s+{re.escape(module)}$")
    return sum(bool(pattern.match(line.rstrip())) for line in list(server.stderr_lines))


def fastapi_imports(server: ServeProcess) -> int:
    return imports(server, "fastapi")


def turn_on_a_new_socket(server: ServeProcess, port: int) -> str:
    """A session created on its WebSocket (`/ws/sessions/new`, as fleets do) at `port`, one
    prompt: the answer's text."""
    ws = server.ws("new", at=port, work_dir=str(server.sandbox.work))
    ws.initialize()
    rid = ws.request("prompt", {"user_input": "hi"})
    seen = ws.until(lambda m: m.get("id") == rid and "method" not in m)
    assert seen[-1]["result"]["status"] == "finished", seen[-1]
    ws.close()
    return "".join(
        m["params"]["payload"].get("text", "")
        for m in seen
        if m.get("method") == "event" and m["params"]["type"] == "ContentPart"
    )


def test_forked_copies_serve_sessions_without_fastapi_until_an_http_api_request(serve) -> None:
    started = time.monotonic()
    server = serve("text: hello", args=("--yolo", "--processes", "2"), expect=2, env=IMPORT_TIMES)
    first, second = server.ports
    assert turn_on_a_new_socket(server, first) == "hello"
    assert turn_on_a_new_socket(server, second) == "hello"
    # Neither do the web app's static files nor a request the guard refuses need the API.
    assert httpx2.get(f"http://127.0.0.1:{second}/web/").status_code == 200
    assert httpx2.get(f"http://127.0.0.1:{second}/api/sessions").status_code == 401
    assert fastapi_imports(server) == 0
    # Nor the price table, in the SDK's package (a single process loads it 2 s after its start).
    observation_window(max(0.0, started + 3 - time.monotonic()), "a copy loading the price table on a timer")
    assert imports(server, "soulwire.sdk") == 0

    # The first API request to a copy is answered, the API built on its way: in that process only.
    listed = server.api("GET", f"http://127.0.0.1:{second}/api/sessions").json()
    assert len(listed) == 2 and {s["live"] for s in listed} == {True, False}  # one lives there
    assert wait_until(lambda: fastapi_imports(server) >= 1 and imports(server, "soulwire.sdk") >= 1)
    observation_window(0.3, "the other copy building the API or loading the prices too")
    assert fastapi_imports(server) == 1 and imports(server, "soulwire.sdk") == 1

    # Many first requests at once to the other: each answered, by the one API it builds.
    def openapi(_: int) -> httpx2.Response:
        return httpx2.get(f"http://127.0.0.1:{first}/openapi.json", headers=server.auth(), timeout=30)

    with ThreadPoolExecutor(8) as pool:
        documents = [r.json() for r in pool.map(openapi, range(8)) if r.status_code == 200]
    assert len(documents) == 8 and all(d == documents[0] for d in documents)
    assert "/api/sessions" in documents[0]["paths"] and "/api/web/search" in documents[0]["paths"]
    assert wait_until(lambda: fastapi_imports(server) == 2)
    assert turn_on_a_new_socket(server, first) == "hello"  # sessions go on as before
    assert server.close() == 0


def test_a_single_process_server_builds_its_http_api_as_it_starts(serve) -> None:
    server = serve(env=IMPORT_TIMES)
    assert wait_until(lambda: fastapi_imports(server) == 1)  # without any request
    assert server.api("GET", "/").json()["name"] == "soulwire"


def test_the_http_api_is_built_once_however_many_ask_at_once(tmp_path: Path, monkeypatch) -> None:
    from soulwire.server import api
    from soulwire.server.app import ServerApp
    from soulwire.server.registry import ServeSettings
    from soulwire.server.security import Guard

    builds: list[str] = []
    callers: list[str] = []
    create_api = api.create_api

    def slow_create_api(*args, **kwargs):
        builds.append(threading.current_thread().name)
        # The build goes on until every caller has asked, so that they all ask while it builds.
        assert wait_until(lambda: len(callers) == 8, timeout=30)
        return create_api(*args, **kwargs)

    monkeypatch.setattr(api, "create_api", slow_create_api)
    app = ServerApp(
        ServeSettings(share=tmp_path, work_dir=tmp_path), Guard.for_listen("t" * 20, "127.0.0.1", 1, [])
    )
    build_api = app.build_api

    def counted_build_api():
        callers.append(threading.current_thread().name)
        return build_api()

    assert not app.api_built
    with ThreadPoolExecutor(8) as pool:
        built = list(pool.map(lambda _: counted_build_api(), range(8)))
    assert len(builds) == 1 and all(b is built[0] for b in built) and app.api_built


def test_sigterm_to_the_first_process_winds_down_a_turn_on_a_copy(serve, sandbox: Sandbox) -> None:
    # The first process stops its copies as its own shutdown begins; each copy still cancels
    # its turns and closes its session files before it ends.
    from tests.server.test_serve_lifecycle import gone, long_running, wait_for_pid

    pid_file = sandbox.root / "tool.pid"
    server = serve(long_running(pid_file), args=("--yolo", "--processes", "2"), expect=2)
    (copy,) = children(server.proc.pid, 1)
    session_id = server.create_session(at=server.ports[1])
    ws = server.ws(session_id, at=server.ports[1])
    ws.initialize()
    ws.request("prompt", {"user_input": "go"})
    pid = wait_for_pid(pid_file)
    directory = Path(
        server.api("GET", f"http://127.0.0.1:{server.ports[1]}/api/sessions/{session_id}").json()["dir"]
    )
    assert server.close() == 0  # SIGTERM to the first process only
    assert gone(pid) and gone(copy)
    assert "".join(server.stderr_lines).count("soulwire serve: stopped") == 2
    last = (directory / "wire.jsonl").read_text().splitlines()[-1]
    assert '"type": "TurnEnd"' in last, last
