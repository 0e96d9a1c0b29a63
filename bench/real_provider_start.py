"""The first prompt of a session with a real provider: how long until the first ContentPart.

A real provider's SDK is heavy to import (`openai` ~0.65 s, `anthropic` ~1.4 s here). This
spawns the engine against the project's fake SSE server on 127.0.0.1 (tests/fake_llm_server.py,
the providers' real stream shapes from tests/provider_streams.py), sends `initialize`, waits
`--think` seconds (a person typing their first prompt; 0 for a script), sends a prompt and
times prompt → first ContentPart, and the engine's CPU time (all its threads) from the
handshake's answer to that part: on a loaded machine, where wall times swing, the CPU time
still says how much work the prompt waited for. `scripted` (the offline `_scripted_echo` model, no SDK) is
the baseline: each provider's line also says how much later than it its first part came.

    python3 bench/real_provider_start.py --cmd soulwire=.venv/bin/soulwire --think 0,1.5 --repeat 5

Run it from an environment with the runtime dependencies only (`pip install -e .`), as a user
installs it: the dev extras add `trio`, which `httpcore2` imports whenever it is installed
(~100 CPU-ms more for every provider here, a cost no user install pays).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from procfs import cpu_seconds
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, stream_reply

PATHS = {"kimi": "/v1", "gemini": "/v1", "openai_legacy": "/v1", "openai_responses": "/v1", "anthropic": ""}
STREAM_SHAPES = {"gemini": "openai_legacy"}
"""Gemini's OpenAI-compatible endpoint streams Chat Completions chunks."""
SCRIPTED = "scripted"


def _cpu_ms(pid: int) -> float:
    """User + system CPU time of process `pid` so far (every thread), in ms."""
    try:
        return cpu_seconds(pid) * 1000
    except OSError:
        return float("nan")


def once(command: str, provider: str, server: FakeLLMServer, think: float) -> tuple[float, float]:
    """Prompt → first ContentPart (ms), and the engine's CPU ms from the handshake's answer to it."""
    root = Path(tempfile.mkdtemp(prefix="real-start-"))
    if provider == SCRIPTED:
        scripts = root / "scripts.json"
        scripts.write_text(json.dumps(["text: Hello there"]))
        entry = {"type": "_scripted_echo", "env": {"SOULWIRE_SCRIPTED_ECHO_SCRIPTS": str(scripts)}}
    else:
        answer = Answer(message_id="m1", text=["Hello", " there"])
        server.queue(stream_reply(STREAM_SHAPES.get(provider, provider), answer))
        entry = {"type": provider, "base_url": server.url + PATHS[provider], "api_key": "k"}
    config = {
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "some-model", "max_context_size": 100000}},
        "providers": {"p": entry},
    }
    (root / "config.json").write_text(json.dumps(config))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(HOME=str(root), SOULWIRE_SHARE_DIR=str(root / "share"), KIMI_SHARE_DIR=str(root / "kimi"))
    proc = subprocess.Popen(
        [command, "--wire", "--config-file", str(root / "config.json"), "--work-dir", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[tuple[float, float, dict[str, Any]]] = []
    arrived = threading.Condition()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            with arrived:
                lines.append((time.perf_counter(), _cpu_ms(proc.pid), json.loads(raw)))
                arrived.notify_all()

    threading.Thread(target=read, daemon=True).start()

    def wait_for(test: Any) -> tuple[float, float]:
        with arrived:
            while True:
                for at, cpu, message in lines:
                    if test(message):
                        return at, cpu
                if not arrived.wait(60):
                    raise TimeoutError(command)

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocol_version": "1.9"}})
        _, cpu_ready = wait_for(lambda m: m.get("id") == "i")
        time.sleep(think)
        sent = time.perf_counter()
        send({"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {"user_input": "hi"}})
        first, cpu_first = wait_for(lambda m: (m.get("params") or {}).get("type") == "ContentPart")
        wait_for(lambda m: m.get("id") == "p")
        return (first - sent) * 1000, cpu_first - cpu_ready
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", action="append", required=True, help="label=command (repeatable)")
    parser.add_argument("--provider", action="append", choices=sorted(PATHS), help="default: all")
    parser.add_argument("--runs", type=int, default=1, help="rounds of all the measurements, interleaved")
    parser.add_argument("--think", default="0,1.5", help="seconds between handshake and prompt")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    thinks = [float(t) for t in args.think.split(",")]
    providers = [SCRIPTED, *(args.provider or sorted(PATHS))]
    cmds = [spec.partition("=")[::2] for spec in args.cmd]
    samples: dict[tuple[str, float, str], list[tuple[float, float]]] = {}
    with FakeLLMServer() as server:
        for command in {command for _, command in cmds}:
            for provider in providers:
                once(command, provider, server, 0)  # warm the page cache and the .pyc files
        # Round-robin over every case, so a change in the machine's load hits them all alike.
        for _ in range(args.runs * args.repeat):
            for provider in providers:
                for think in thinks:
                    for label, command in cmds:
                        sample = once(command, provider, server, think)
                        samples.setdefault((provider, think, label), []).append(sample)
    for (provider, think, label), values in samples.items():
        walls, cpus = [v[0] for v in values], [v[1] for v in values]
        median, low, high, cpu = statistics.median(walls), min(walls), max(walls), statistics.median(cpus)
        base = samples[(SCRIPTED, think, label)]
        base_wall, base_cpu = statistics.median(v[0] for v in base), statistics.median(v[1] for v in base)
        print(
            f"{provider:16s} think {think:3.1f} s  {label:10s} prompt → first ContentPart: "
            f"median {median:7.1f} ms (min {low:.1f}, max {high:.1f}), "
            f"scripted +{median - base_wall:6.1f} ms; "
            f"engine CPU {cpu:6.0f} ms, scripted +{cpu - base_cpu:5.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
