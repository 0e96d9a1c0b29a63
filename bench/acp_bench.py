"""ACP agents side by side: `soulwire acp` and the reference `kimi acp`.

Each measurement spawns a fresh agent in a private temporary HOME / share dir / work dir with
a scripted (offline) model, and talks to it over pipes as an editor does (raw JSON-RPC lines,
client-side wall clock):

- `init`: spawn → the `initialize` response (what an editor waits for before anything else);
- `stream`: one `session/prompt` whose single scripted step streams N text chunks; reports the
  turn's wall time from the prompt to its response, chunks/s, the first chunk's latency and
  the agent's CPU time per chunk (user + system, from /proc: far less sensitive than wall time
  to a busy machine).

Commands are templates: {config} (a kimi-format config.json with a `_scripted_echo` model),
{work} (the work dir) and {home} are filled in per run; HOME, SOULWIRE_SHARE_DIR and
KIMI_SHARE_DIR point into the temporary dir, and the config is also copied to
`<share>/config.toml` for an agent that takes no --config-file (`kimi acp`).

    python3 bench/acp_bench.py \
        --cmd "soulwire=.venv/bin/soulwire acp --config-file {config} --work-dir {work}" \
        --cmd "kimi=/tmp/kimi313/bin/kimi acp" \
        --repeat 10 --stream-sizes 1000,10000
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def _toml(config: dict[str, Any]) -> str:
    """The bench config as TOML (for an agent that reads `<share>/config.toml` only)."""
    lines = [f"default_model = {json.dumps(config['default_model'])}"]
    for table in ("models", "providers"):
        for name, entry in config[table].items():
            lines.append(f"[{table}.{name}]")
            for key, value in entry.items():
                if isinstance(value, dict):
                    continue
                lines.append(f"{key} = {json.dumps(value)}")
            for key, value in entry.items():
                if isinstance(value, dict):
                    lines.append(f"[{table}.{name}.{key}]")
                    lines += [f"{k} = {json.dumps(v)}" for k, v in value.items()]
    return "\n".join(lines) + "\n"


_CHUNK_LINE = re.compile(rb'"sessionUpdate": ?"agent_message_chunk"')


class Agent:
    """One agent process in its own temporary world."""

    def __init__(self, template: str, scripts: list[str]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="acp-bench-"))
        home, work = self.dir / "home", self.dir / "work"
        work.mkdir(parents=True)
        for share in (home / ".soulwire", home / ".kimi"):
            share.mkdir(parents=True)
        (self.dir / "scripts.json").write_text(json.dumps(scripts))
        config = {
            "default_model": "scripted",
            "models": {
                "scripted": {
                    "provider": "p",
                    "model": "scripted_echo",
                    "max_context_size": 100000,
                    "capabilities": [],
                }
            },
            "providers": {
                "p": {
                    "type": "_scripted_echo",
                    "base_url": "",
                    "api_key": "",
                    "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(self.dir / "scripts.json")},
                }
            },
        }
        config_path = self.dir / "config.json"
        config_path.write_text(json.dumps(config))
        for share in (home / ".soulwire", home / ".kimi"):
            (share / "config.toml").write_text(_toml(config))
        # `kimi acp` refuses session/new without a stored Kimi Code login, even for a model that
        # needs none: a dummy token (never sent anywhere — the model is scripted) lets it start.
        credentials = home / ".kimi" / "credentials"
        credentials.mkdir()
        token = {"access_token": "bench", "refresh_token": "bench", "expires_at": time.time() + 86400,
                 "scope": "", "token_type": "Bearer"}  # fmt: skip
        (credentials / "kimi-code.json").write_text(json.dumps(token))
        argv = [part.format(config=config_path, work=work, home=home) for part in shlex.split(template)]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
        env.update(
            HOME=str(home), SOULWIRE_SHARE_DIR=str(home / ".soulwire"), KIMI_SHARE_DIR=str(home / ".kimi")
        )
        self.work = work
        self.spawned = time.perf_counter()
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=work,
            )
        except OSError:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.inbox: queue.Queue[tuple[float, dict[str, Any] | None]] = queue.Queue()
        self.chunk_count = 0
        self.first_chunk_at = 0.0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        """Whole pipe reads; a text-chunk line is only counted (with the time of the first and
        the last), never parsed or queued: the reader must not be what limits the stream."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        partial = b""
        while block := os.read(fd, 1 << 18):
            now = time.perf_counter()
            lines = (partial + block).split(b"\n")
            partial = lines.pop()
            for line in lines:
                if _CHUNK_LINE.search(line):
                    if not self.chunk_count:
                        self.first_chunk_at = now
                    self.chunk_count += 1
                    continue
                try:
                    self.inbox.put((now, json.loads(line)))
                except ValueError:
                    continue
        self.inbox.put((time.perf_counter(), None))

    def send(self, message: dict[str, Any]) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        return time.perf_counter()

    def wait_for(self, request_id: int, on_message: Any = None) -> tuple[float, dict[str, Any]]:
        while True:
            at, message = self.inbox.get(timeout=120)
            if message is None:
                raise RuntimeError("agent exited")
            if message.get("id") == request_id and "method" not in message:
                return at, message
            if message.get("method") == "session/request_permission":
                answer = {
                    "outcome": {
                        "outcome": "selected",
                        "optionId": message["params"]["options"][0]["optionId"],
                    }
                }
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
            elif on_message is not None:
                on_message(at, message)

    def cpu_s(self) -> float:
        """CPU time (user + system) the agent process has used so far (Linux)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        """End the agent (its stdin closes), then remove its temporary world."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


INIT = {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "acp-bench", "version": "1"}}


def bench_init(template: str) -> float:
    agent = Agent(template, [])
    try:
        agent.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        at, reply = agent.wait_for(0)
        if "result" not in reply:
            raise RuntimeError(f"initialize failed: {reply}")
        return (at - agent.spawned) * 1000
    finally:
        agent.close()


def bench_stream(template: str, size: int) -> dict[str, float]:
    script = "\n".join(f"text: chunk{i} " for i in range(size))
    agent = Agent(template, [script])
    try:
        agent.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        agent.wait_for(0)
        agent.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/new",
                "params": {"cwd": str(agent.work), "mcpServers": []},
            }
        )
        _, created = agent.wait_for(1)
        session_id = created["result"]["sessionId"]
        time.sleep(0.3)  # let a background warm-up finish: this measures streaming, not start-up
        while not agent.inbox.empty():
            agent.inbox.get()
        agent.chunk_count = 0
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "stream"}]}
        cpu_before = agent.cpu_s()
        sent = agent.send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
        done, reply = agent.wait_for(2)
        cpu = agent.cpu_s() - cpu_before
        if "result" not in reply:
            raise RuntimeError(f"prompt failed: {reply}")
        wall = done - sent
        return {
            "wall_ms": wall * 1000,
            "chunks": agent.chunk_count,
            "chunks_per_s": agent.chunk_count / wall,
            "first_chunk_ms": (agent.first_chunk_at - sent) * 1000 if agent.chunk_count else float("nan"),
            "agent_cpu_us_per_chunk": cpu / max(agent.chunk_count, 1) * 1e6,
        }
    finally:
        agent.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", action="append", required=True, metavar="NAME=TEMPLATE")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--stream-repeat", type=int, default=3)
    parser.add_argument("--stream-sizes", default="1000,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.stream_sizes.split(",") if s]
    results: dict[str, Any] = {}
    for entry in args.cmd:
        name, _, template = entry.partition("=")
        inits = [bench_init(template) for _ in range(args.repeat)]
        result: dict[str, Any] = {
            "init_ms": {"min": min(inits), "median": statistics.median(inits), "max": max(inits)}
        }
        for size in sizes:
            runs = [bench_stream(template, size) for _ in range(args.stream_repeat)]
            result[f"stream_{size}"] = {
                key: statistics.median(r[key] for r in runs)
                for key in ("wall_ms", "chunks_per_s", "first_chunk_ms", "agent_cpu_us_per_chunk")
            } | {"chunks": runs[0]["chunks"]}
        results[name] = result
        print(f"{name}: {json.dumps(result, indent=1)}", file=sys.stderr)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
