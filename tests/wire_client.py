"""A small synchronous Wire client for tests: spawns the real `soulwire --wire` (or any
command) and talks JSON lines over its pipes, with timeouts everywhere."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT = 15.0
# Provider settings of the developer's shell must not leak into a test engine.
ENV_PREFIXES_OF_OTHER_SETUPS = ("KIMI_", "SOULWIRE_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_API_KEY")


def engine_env(home: Path) -> dict[str, str]:
    """The environment of an engine talking to a fake provider: a private HOME and share dir,
    none of the developer's provider settings, and two seconds of silence counting as a
    stalled stream (so stall scenarios stay quick)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIXES_OF_OTHER_SETUPS)}
    env.update(
        {"HOME": str(home), "SOULWIRE_SHARE_DIR": str(home / ".soulwire"), "SOULWIRE_LLM_TIMEOUT": "2"}
    )
    return env


def scripted_config(
    scripts_path: Path,
    *,
    max_context_size: int = 100_000,
    capabilities: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The kimi-compatible test config: one `_scripted_echo` model named `scripted`."""
    config: dict[str, Any] = {
        "default_model": "scripted",
        "telemetry": False,
        "models": {
            "scripted": {
                "provider": "scripted_provider",
                "model": "scripted_echo",
                "max_context_size": max_context_size,
                "capabilities": capabilities or [],
            }
        },
        "providers": {
            "scripted_provider": {
                "type": "_scripted_echo",
                "base_url": "",
                "api_key": "",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(scripts_path)},
            }
        },
    }
    config.update(extra or {})
    return config


ECHO_MODELS = {
    # `echo` plays the user's own message as its script: a reply only it gives (a switch shows)
    "echo": {"provider": "echo_provider", "model": "echo", "max_context_size": 150_000},
    "thinker": {
        "provider": "echo_provider", "model": "echo", "max_context_size": 160_000, "capabilities": ["thinking"],
    },
}  # fmt: skip


def add_echo_models(sandbox: Sandbox) -> None:
    """Two more models beside the sandbox's scripted one (`scripted`, `echo`, `thinker`)."""
    base = scripted_config(sandbox.root / "scripts.json", capabilities=sandbox.capabilities)
    echo_provider = {"type": "_echo", "base_url": "", "api_key": ""}
    sandbox.config_extra = {
        **sandbox.config_extra,
        "models": {**base["models"], **ECHO_MODELS},
        "providers": {**base["providers"], "echo_provider": echo_provider},
    }


@dataclass
class Sandbox:
    """A private HOME, share dir and work dir for one engine process."""

    root: Path
    scripts: list[str] = field(default_factory=list)
    config_extra: dict[str, Any] = field(default_factory=dict)
    capabilities: list[str] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def share(self) -> Path:
        return self.home / ".soulwire"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    def write(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        scripts_path = self.root / "scripts.json"
        scripts_path.write_text(json.dumps(self.scripts), encoding="utf-8")
        config = scripted_config(scripts_path, capabilities=self.capabilities, extra=self.config_extra)
        self.config_path.write_text(json.dumps(config), encoding="utf-8")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIXES_OF_OTHER_SETUPS)}
        env.update({"HOME": str(self.home), "SOULWIRE_SHARE_DIR": str(self.share)})
        return env

    def argv(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "soulwire",
            "--wire",
            "--config-file",
            str(self.config_path),
            "--work-dir",
            str(self.work),
            *extra,
        ]


class WireProcess:
    """One engine process. `send` writes a message; `recv` returns the next one."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr_lines: list[str] = []
        self._counter = 0
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if not raw.endswith(b"\n"):
                break  # the engine was killed in the middle of a line: nothing more will come
            self._inbox.put(json.loads(raw))  # a complete line must be valid JSON
        self._inbox.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_lines.append(raw.decode("utf-8", "replace"))

    # -- sending ---------------------------------------------------------
    def send_raw(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() if isinstance(line, str) else line)
        if not (line.endswith("\n") if isinstance(line, str) else line.endswith(b"\n")):
            self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message))

    def request(self, method: str, params: Any = None, *, id: str | None = None) -> str:
        self._counter += 1
        rid = id or f"{self._counter}_{method}"
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return rid

    def respond(self, request_id: str, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    # -- receiving -------------------------------------------------------
    def recv(self, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any] | None:
        """The next message, or None when stdout closed; raises TimeoutError."""
        try:
            return self._inbox.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(
                f"no message within {timeout}s; stderr: {''.join(self.stderr_lines)[-2000:]}"
            ) from None

    def until_response(
        self,
        request_id: str,
        *,
        answer: Callable[[dict[str, Any]], Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Messages up to (not including) the response to `request_id`, and the response.
        Server requests are answered by `answer` (its return value is the result)."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            message = self.recv(max(0.01, deadline - time.monotonic()))
            if message is None:
                raise EOFError(f"engine closed stdout; stderr: {''.join(self.stderr_lines)[-2000:]}")
            if message.get("id") == request_id and "method" not in message:
                return seen, message
            seen.append(message)
            if message.get("method") == "request" and answer is not None:
                self.respond(message["id"], answer(message))

    def initialize(self, **params: Any) -> dict[str, Any]:
        params.setdefault("protocol_version", "1.3")
        params.setdefault("client", {"name": "soulwire-tests", "version": "1"})
        _, response = self.until_response(self.request("initialize", params))
        return response

    def prompt(self, user_input: Any, **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return self.until_response(self.request("prompt", {"user_input": user_input}), **kwargs)

    def close(self, timeout: float = 10) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def event_types(messages: list[dict[str, Any]]) -> list[str]:
    """`type` of each event / request, requests prefixed with `request:`."""
    out: list[str] = []
    for m in messages:
        params = m.get("params") or {}
        if m.get("method") == "event":
            out.append(params.get("type"))
        elif m.get("method") == "request":
            out.append("request:" + str(params.get("type")))
    return out


def payloads(messages: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [m["params"]["payload"] for m in messages if (m.get("params") or {}).get("type") == type_]
