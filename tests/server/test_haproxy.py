"""`soulwire serve haproxy-config` as shipped, run by a real HAProxy on 127.0.0.1: every path of
one session reaches one replica, sessions spread over the replicas, a replica that dies leaves
the ring (only its sessions move), and a replica's `/healthz` needs no token."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
import pytest

from tests.server.serve_client import ServeProcess
from tests.system_tools import require


@pytest.fixture(scope="module")
def haproxy() -> str:
    return require("haproxy")


SESSIONS = [f"session-{i:02d}" for i in range(24)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Replica:
    """A stand-in replica that answers every path with its own name (and /healthz with ok)."""

    def __init__(self, name: str) -> None:
        self.name = name

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b"ok\n" if self.path == "/healthz" else name.encode()
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def cluster(tmp_path: Path, haproxy: str) -> Iterator[tuple[str, list[Replica]]]:
    replicas = [Replica("one"), Replica("two")]
    front = f"127.0.0.1:{_free_port()}"
    config = tmp_path / "haproxy.cfg"
    generated = subprocess.run(
        [sys.executable, "-m", "soulwire", "serve", "haproxy-config", "--listen", front, "--check-interval", "200"]
        + [arg for r in replicas for arg in ("--replica", f"http://127.0.0.1:{r.port}")],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    config.write_text(generated.stdout)
    proxy = subprocess.Popen([haproxy, "-db", "-f", str(config)], stderr=subprocess.PIPE)
    try:
        _until(lambda: _get(f"http://{front}/") is not None, "HAProxy to answer")
        yield f"http://{front}", replicas
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)
        for replica in replicas:
            replica.stop()


# Plain HTTP through urllib, no proxy: `httpx2.get` built a client (and its TLS context, the
# CA bundle read) for each of the hundreds of requests these tests send: most of their time.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str) -> str | None:
    try:
        with _OPENER.open(url, timeout=10) as response:
            return response.read().decode() if response.status == 200 else None
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None  # (an HTTPError, a non-2xx answer, is a URLError)


def _until(condition, what: str, bound: float = 30.0) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _owner(base: str, session: str) -> str:
    """The replica every path of `session` reaches (asserted to be one)."""
    paths = [
        f"/ws/sessions/{session}",
        f"/acp/sessions/{session}",
        f"/api/sessions/{session}",
        f"/api/sessions/{session}/history?since_seq=3",
    ]
    seen = {_get(base + path) for path in paths}
    assert len(seen) == 1, f"{session} reached {seen}"
    (owner,) = seen
    assert owner is not None
    return owner


def test_all_paths_of_a_session_reach_one_replica_and_sessions_spread(cluster):
    base, _ = cluster
    owners = {session: _owner(base, session) for session in SESSIONS}
    assert set(owners.values()) == {"one", "two"}
    assert owners == {session: _owner(base, session) for session in SESSIONS}  # stable


def test_a_dead_replica_leaves_the_ring_and_only_its_sessions_move(cluster):
    base, replicas = cluster
    before = {session: _owner(base, session) for session in SESSIONS}
    replicas[1].stop()
    _until(
        lambda: all(_get(base + f"/api/sessions/{s}") == "one" for s in SESSIONS), "the dead replica to leave"
    )
    kept = [s for s, owner in before.items() if owner == "one"]
    assert kept and all(_owner(base, s) == "one" for s in kept)


def test_the_generated_config_is_valid_for_haproxy(tmp_path, haproxy):
    out = subprocess.run(
        [sys.executable, "-m", "soulwire", "serve", "haproxy-config", "--replica", "10.1.2.3:7437",
         "--replica", "[::1]:7438", "--listen", "0.0.0.0:8443"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    config = tmp_path / "haproxy.cfg"
    config.write_text(out.stdout)
    check = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--replica"),
        (("--replica", "ftp://h:1"), "--replica wants http://HOST:PORT"),
        (("--replica", "h"), "--replica wants http://HOST:PORT"),
        (("--replica", "h:1", "--listen", "nope"), "--listen wants HOST:PORT"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(args, message):
    out = subprocess.run(
        [sys.executable, "-m", "soulwire", "serve", "haproxy-config", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert message in out.stderr and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_healthz_needs_no_token_and_tells_nothing_else(serve):
    server: ServeProcess = serve()
    health = httpx2.get(server.base + "/healthz", timeout=30)
    assert (health.status_code, health.text) == (200, "ok\n")
    assert httpx2.get(server.base + "/api/sessions", timeout=30).status_code == 401
    assert httpx2.post(server.base + "/healthz", timeout=30).status_code == 401
    foreign = httpx2.get(server.base + "/healthz", headers={"Host": "evil.example"}, timeout=30)
    assert foreign.status_code == 200  # the check runs before Host routing; it reveals nothing
