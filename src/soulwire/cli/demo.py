"""`soulwire demo`: a scripted session end to end, offline, no API key.

It starts a real `soulwire --wire` process with the scripted provider in a temporary home,
acts as its client, and narrates what travels over the wire: streamed text, a tool call, and
a round trip through a tool the client itself provides, and a shell command the client
approves.

Like any command it ends quietly: `soulwire demo | head -1` exits 141 and Ctrl-C exits 130,
both after ending the engine, without a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from soulwire.config.scripts_file import SCRIPTS_ENV
from soulwire.wire.environment import SHARE_DIR_ENV

_WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city (answered by the demo client).",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _words(sentence: str) -> list[str]:
    """One `text:` line per word; the DSL drops one space after the colon, so a second one
    carries the word's leading space."""
    words = sentence.split(" ")
    return [f"text: {words[0]}"] + [f"text:  {w}" for w in words[1:]]


def _scripts() -> list[str]:
    call = json.dumps({"id": "call-1", "name": "get_weather", "arguments": json.dumps({"city": "Paris"})})
    step1 = "\n".join(
        [
            "id: demo-1",
            "usage: input_other=120 output=18",
            "think: The user wants the weather; the client has a tool for that.",
            *_words("Let me check the weather in Paris."),
            f"tool_call: {call}",
        ]
    )
    note = json.dumps({"command": "echo 'Paris: sunny, 21 °C' > weather.txt && cat weather.txt"})
    shell = json.dumps({"id": "call-2", "name": "Shell", "arguments": note})
    words = _words("Sunny. I'll note it down.")
    step2 = "\n".join(["id: demo-2", "usage: input_other=180 output=12", *words, f"tool_call: {shell}"])
    step3 = "\n".join(["id: demo-3", "usage: input_other=230 output=9", *_words("It is sunny, 21 °C.")])
    return [step1, step2, step3]


def _write_sandbox(root: Path) -> list[str]:
    (root / "work").mkdir()
    scripts = root / "scripts.json"
    scripts.write_text(json.dumps(_scripts()), encoding="utf-8")
    config = {
        "default_model": "demo",
        "models": {"demo": {"provider": "offline", "model": "scripted_echo", "max_context_size": 100000,
                            "capabilities": ["thinking"]}},
        "providers": {
            "offline": {"type": "_scripted_echo", "env": {SCRIPTS_ENV[0]: str(scripts)}}
        },
    }  # fmt: skip
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(root / "config.json"),
            "--work-dir", str(root / "work")]  # fmt: skip


class _EngineGone(Exception):
    """The engine closed its output before the demo was over."""


class _Client:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        # A session of its own: Ctrl-C reaches the demo only, which then ends the engine.
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, start_new_session=True
        )
        self.sent = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> str:
        self.sent += 1
        rid = f"{self.sent}_{method}"
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def messages(self) -> Iterator[dict[str, Any]]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            yield json.loads(line)
        raise _EngineGone

    def stop(self) -> int:
        """Close the engine's input (it then ends its session and exits); kill it if it
        does not within a few seconds. Returns its exit code."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()


def _say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def run_demo(argv: list[str]) -> int:
    from soulwire.usage import CommandParser

    CommandParser(
        prog="soulwire demo",
        description=(
            "Drive a real `soulwire --wire` with a scripted offline model: streamed text, thinking, "
            "a client tool and an approved shell command. Needs no key and writes only to a temp dir."
        ),
        examples=("soulwire demo", "soulwire demo | less"),
    ).parse_args(argv)
    # Ctrl-C ends the demo also when it came with SIGINT ignored (a background job of a
    # non-interactive shell), in which case Python would raise no KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="soulwire-demo-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "HOME": str(root), SHARE_DIR_ENV[0]: str(root / "share")}
        client = _Client(_write_sandbox(root), env)
        try:
            _narrate(client)
        except BrokenPipeError:  # `soulwire demo | head -1`: the reader has all it wanted
            _silence_stdout()
            client.stop()
            return 128 + signal.SIGPIPE
        except KeyboardInterrupt:
            client.stop()
            return 128 + signal.SIGINT
        except _EngineGone:
            code = client.stop()
            sys.stderr.write(f"soulwire: demo: the engine stopped early (exit code {code})\n")
            return code or 1
        code = client.stop()
        _say(f"» engine exited with code {code}\n")
        return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _narrate(client: _Client) -> None:
    """Drive the demo session and tell what travels over the wire."""
    started = time.perf_counter()
    rid = client.request("initialize", {"protocol_version": "1.3", "client": {"name": "soulwire-demo"},
                                        "external_tools": [_WEATHER_TOOL]})  # fmt: skip
    stream = client.messages()
    reply = next(m for m in stream if m.get("id") == rid)["result"]
    server = reply["server"]
    _say(f"» engine {server['name']} {server['version']}, Wire {reply['protocol_version']}, "
         f"ready in {(time.perf_counter() - started) * 1000:.0f} ms; "
         f"client tool accepted: {reply['external_tools']['accepted']}\n")  # fmt: skip
    _say("» prompt: What's the weather in Paris?\n")
    rid = client.request("prompt", {"user_input": "What's the weather in Paris?"})
    for message in stream:
        if message.get("id") == rid and "method" not in message:
            _say(f"\n» turn result: {message.get('result') or message.get('error')}\n")
            break
        params = message.get("params") or {}
        kind, payload = params.get("type"), params.get("payload") or {}
        if message.get("method") == "request" and kind == "ApprovalRequest":
            _say(f"\n» engine asks for approval: {payload['description']} — approving\n")
            client.send({"jsonrpc": "2.0", "id": message["id"],
                         "result": {"request_id": payload["id"], "response": "approve"}})  # fmt: skip
        elif message.get("method") == "request" and kind == "ToolCallRequest":
            args = json.loads(payload.get("arguments") or "{}")
            _say(f"\n» engine asks the client to run {payload['name']}({args}) — answering\n")
            client.send({"jsonrpc": "2.0", "id": message["id"], "result": {"tool_call_id": payload["id"],
                         "return_value": {"is_error": False, "output": "sunny, 21 °C",
                                          "message": "", "display": []}}})  # fmt: skip
        elif kind == "ContentPart" and payload.get("type") == "think":
            _say(f"  (thinking: {payload['think']})\n")
        elif kind == "ContentPart" and payload.get("type") == "text":
            _say(payload["text"])
        elif kind == "ToolCall":
            _say(f"\n» tool call {payload['id']}: {payload['function']['name']}")
        elif kind == "ToolResult":
            _say(f"» tool result: {payload['return_value']['output']!r}\n")
        elif kind == "StatusUpdate" and payload.get("token_usage"):
            _say(f"\n  [step usage: {payload['token_usage']['input_other']} in / "
                 f"{payload['token_usage']['output']} out]\n")  # fmt: skip
        elif kind in ("TurnBegin", "TurnEnd", "StepBegin"):
            _say(f"\n» {kind} {payload.get('n', '')}".rstrip() + "\n")
