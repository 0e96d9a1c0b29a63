"""The first prompt of a session with a real provider: how long until the first ContentPart.

A real provider's SDK is heavy to import (`openai` ~0.65 s, `anthropic` ~1.4 s here). This
spawns the engine against the project's fake SSE server on 127.0.0.1 (tests/fake_llm_server.py,
the providers' real stream shapes from tests/provider_streams.py), sends `initialize`, waits
`--think` seconds (a person typing their first prompt; 0 for a script), sends a prompt and
times prompt → first ContentPart.

    python3 bench/real_provider_start.py --cmd soulwire=.venv/bin/soulwire --think 0,1.5 --repeat 5
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

from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, stream_reply

PATHS = {"openai_legacy": "/v1", "openai_responses": "/v1", "anthropic": ""}


def once(command: str, provider: str, server: FakeLLMServer, think: float) -> float:
    server.queue(stream_reply(provider, Answer(message_id="m1", text=["Hello", " there"])))
    root = Path(tempfile.mkdtemp(prefix="real-start-"))
    config = {
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "some-model", "max_context_size": 100000}},
        "providers": {"p": {"type": provider, "base_url": server.url + PATHS[provider], "api_key": "k"}},
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
    lines: list[tuple[float, dict[str, Any]]] = []
    arrived = threading.Condition()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            with arrived:
                lines.append((time.perf_counter(), json.loads(raw)))
                arrived.notify_all()

    threading.Thread(target=read, daemon=True).start()

    def wait_for(test: Any) -> float:
        with arrived:
            while True:
                for at, message in lines:
                    if test(message):
                        return at
                if not arrived.wait(60):
                    raise TimeoutError(command)

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocol_version": "1.9"}})
        wait_for(lambda m: m.get("id") == "i")
        time.sleep(think)
        sent = time.perf_counter()
        send({"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {"user_input": "hi"}})
        first = wait_for(lambda m: (m.get("params") or {}).get("type") == "ContentPart")
        wait_for(lambda m: m.get("id") == "p")
        return (first - sent) * 1000
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", action="append", required=True, help="label=command (repeatable)")
    parser.add_argument("--provider", action="append", choices=sorted(PATHS), help="default: all")
    parser.add_argument("--think", default="0,1.5", help="seconds between handshake and prompt")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    thinks = [float(t) for t in args.think.split(",")]
    with FakeLLMServer() as server:
        for provider in args.provider or sorted(PATHS):
            for think in thinks:
                for spec in args.cmd:
                    label, _, command = spec.partition("=")
                    once(command, provider, server, think)  # warm page cache and .pyc files
                    samples = [once(command, provider, server, think) for _ in range(args.repeat)]
                    median, low, high = statistics.median(samples), min(samples), max(samples)
                    print(
                        f"{provider:14s} think {think:3.1f} s  {label:20s} prompt → first ContentPart: "
                        f"median {median:7.1f} ms  (min {low:.1f}, max {high:.1f})"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
