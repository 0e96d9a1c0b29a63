"""Test helpers for `soulwire serve`: the real server as a subprocess on a free loopback port,
HTTP through httpx2 and Wire over real WebSockets (the `websockets` library's sync client)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx2
from websockets.sync.client import ClientConnection, connect

from soulwire.wire.environment import SERVER_TOKEN_FILE
from tests.server.serve_shapes import ShapeChecker
from tests.wire_client import Sandbox

TIMEOUT = 15.0


class ServeProcess:
    """One `soulwire serve --listen 127.0.0.1:0` with the sandbox's scripted model."""

    def __init__(
        self,
        sandbox: Sandbox,
        *args: str,
        stdin: int = subprocess.DEVNULL,
        expect: int = 1,
        env: dict[str, str] | None = None,
    ) -> None:
        sandbox.write()
        self.sandbox = sandbox
        argv = [
            sys.executable, "-m", "soulwire", "serve", "--listen", "127.0.0.1:0",
            "--config-file", str(sandbox.config_path), "--work-dir", str(sandbox.work), *args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**sandbox.env(), **(env or {})}, cwd=sandbox.work, start_new_session=True,
        )  # fmt: skip
        self.stderr_lines: list[str] = []
        self._port_found = threading.Event()
        self._expect = expect
        self.port = 0
        self.ports: list[int] = []
        """Every `listening on` port (several with `--processes N`); `port` is the first."""
        self.last_session = ""
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        if not self._port_found.wait(TIMEOUT):
            self.close()
            raise TimeoutError("the server did not start: " + "".join(self.stderr_lines))
        self.token = (sandbox.share / SERVER_TOKEN_FILE).read_text().strip()
        self.base = f"http://127.0.0.1:{self.port}"
        self.http = httpx2.Client(base_url=self.base, timeout=TIMEOUT)
        self._sockets = ExitStack()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            self.stderr_lines.append(line)
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.ports.append(int(found.group(1)))
                self.port = self.ports[0]
                if len(self.ports) >= self._expect:
                    self._port_found.set()

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def api(self, method: str, path: str, **kwargs: Any) -> httpx2.Response:
        headers = {**self.auth(), **kwargs.pop("headers", {})}
        return self.http.request(method, path, headers=headers, **kwargs)

    def create_session(self, *, at: int | None = None, **body: Any) -> str:
        """A new session on this server (`at`: on the process listening on that port)."""
        url = f"http://127.0.0.1:{at}/api/sessions" if at else "/api/sessions"
        response = self.api("POST", url, json=body)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def ws(
        self, session_id: str, *, token: str | None = None, at: int | None = None, **query: Any
    ) -> WireSocket:
        params = "&".join(f"{k}={v}" for k, v in {"token": token or self.token, **query}.items())
        url = f"ws://127.0.0.1:{at or self.port}/ws/sessions/{session_id}?{params}"
        return WireSocket(self._sockets.enter_context(connect(url)))

    def close(self) -> int:
        self._sockets.close()
        self.http.close()
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            # Every line the process wrote is read before anyone looks at `stderr_lines`.
            self._stderr_reader.join(timeout=15)


class WireSocket:
    """A Wire client over one WebSocket connection."""

    def __init__(self, conn: ClientConnection) -> None:
        self.conn = conn
        self._counter = 0
        self.sizes: list[int] = []
        """Size in bytes of every frame received."""
        self.frames = 0
        self._pending: list[str] = []
        """Messages of a frame that carried several (negotiated `batch`), not yet returned."""
        self.shapes = ShapeChecker()
        """Every message sent and received goes through it (tests/server/serve_shapes.py)."""

    def send(self, message: dict[str, Any]) -> None:
        self.shapes.sent(message)
        self.conn.send(json.dumps(message))

    def request(self, method: str, params: Any = None) -> str:
        self._counter += 1
        rid = f"{self._counter}_{method}"
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return rid

    def respond(self, request_id: str, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def recv(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        if not self._pending:
            raw = self.conn.recv(timeout=timeout)
            text = raw if isinstance(raw, str) else raw.decode()
            self.sizes.append(len(text.encode()))
            self.frames += 1
            self._pending = text.splitlines()[::-1]
        message = json.loads(self._pending.pop())
        self.shapes.received(message)
        return message

    def until(
        self,
        done: Callable[[dict[str, Any]], bool],
        *,
        answer: Callable[[dict[str, Any]], Any] | None = None,
        timeout: float = TIMEOUT,
    ) -> list[dict[str, Any]]:
        """Messages up to and including the first for which `done` holds; server requests
        are answered by `answer` when given."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            message = self.recv(max(0.01, deadline - time.monotonic()))
            seen.append(message)
            if done(message):
                return seen
            if answer is not None and message.get("method") == "request":
                self.respond(message["id"], answer(message))

    def call(
        self, method: str, params: Any = None, **kwargs: Any
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Send a request; (messages before its response, the response)."""
        rid = self.request(method, params)
        seen = self.until(lambda m: m.get("id") == rid and "method" not in m, **kwargs)
        return seen[:-1], seen[-1]

    def initialize(self, serve: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
        params.setdefault("protocol_version", "1.10")
        params.setdefault("client", {"name": "serve-tests", "version": "1"})
        if serve is not None:
            params["serve"] = serve
        _, response = self.call("initialize", params)
        assert "result" in response, response
        return response["result"]

    def close(self) -> None:
        self.conn.close()


def events(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("method") in ("event", "request")]


def seqs(messages: list[dict[str, Any]]) -> list[int]:
    return [m["params"]["seq"] for m in messages if "seq" in (m.get("params") or {})]


def wire_records(share: Path) -> list[dict[str, Any]]:
    """Every message record of every session's wire.jsonl under `share`."""
    out: list[dict[str, Any]] = []
    for path in share.glob("sessions/*/*/wire.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "message" in record:
                out.append(record["message"])
    return out
