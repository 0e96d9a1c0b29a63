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

The agents are started interleaved (a start of each per round: on a shared machine both see
the same load); the output has the `initialize` ratio against `soulwire` and the 1-minute load
average at the start and the end.

Two more measurements of Soulwire alone:

- `--ws N`: ACP round trips (N `initialize` requests, then N one-chunk turns) over stdio
  (`soulwire acp`) against the same over WebSocket through a real `soulwire serve` on
  127.0.0.1 (`/acp`, where a turn also crosses the session's hub as a Wire client);
- `--fold N`: the per-update cost of folding a delegated ACP agent's updates into Soulwire's
  sub-agent events (`engine/acp_delegate.py`'s fold: N message chunks, then N tool calls with
  their results), in process.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procfs import cpu_seconds


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
        return cpu_seconds(self.proc.pid)

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


def _roundtrips(send: Any, receive: Any, count: int, session_id: str) -> dict[str, float]:
    """`count` initialize requests, then `count` one-chunk turns; median milliseconds each."""
    init, turns = [], []
    for n in range(count):
        start = time.perf_counter()
        send({"jsonrpc": "2.0", "id": f"i{n}", "method": "initialize", "params": INIT})
        receive(f"i{n}")
        init.append((time.perf_counter() - start) * 1000)
    for n in range(count):
        start = time.perf_counter()
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        send({"jsonrpc": "2.0", "id": f"p{n}", "method": "session/prompt", "params": prompt})
        receive(f"p{n}")
        turns.append((time.perf_counter() - start) * 1000)
    return {"initialize_ms": statistics.median(init), "turn_ms": statistics.median(turns)}


def bench_ws(count: int) -> dict[str, Any]:
    """The same round trips over stdio and over serve's WebSocket."""
    from websockets.sync.client import connect

    scripts = ["text: ok"] * (count + 1)
    stdio = Agent(f"{sys.executable} -m soulwire acp --config-file {{config}} --work-dir {{work}}", scripts)
    try:
        stdio.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        stdio.wait_for(0)
        stdio.send({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                    "params": {"cwd": str(stdio.work), "mcpServers": []}})  # fmt: skip
        session = stdio.wait_for(1)[1]["result"]["sessionId"]
        local = _roundtrips(stdio.send, lambda rid: stdio.wait_for(rid), count, session)
    finally:
        stdio.close()
    world = Agent("true", scripts)  # a temporary HOME, share dir and config for the server
    argv = [sys.executable, "-m", "soulwire", "serve", "--listen", "127.0.0.1:0", "--config-file",
            str(world.dir / "config.json"), "--work-dir", str(world.work)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
    env.update(HOME=str(world.dir / "home"), SOULWIRE_SHARE_DIR=str(world.dir / "home" / ".soulwire"))
    server = subprocess.Popen(argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    try:
        assert server.stderr is not None
        port = 0
        while not port:
            line = server.stderr.readline().decode()
            if not line:
                raise RuntimeError("serve did not start")
            found = re.search(r"listening on http://127.0.0.1:(\d+)", line)
            port = int(found.group(1)) if found else 0
        token = (world.dir / "home" / ".soulwire" / "server-token").read_text().strip()
        with connect(f"ws://127.0.0.1:{port}/acp", additional_headers={"Authorization": f"Bearer {token}"},
                     open_timeout=60, proxy=None, max_size=None) as ws:  # fmt: skip

            def send(message: dict[str, Any]) -> None:
                ws.send(json.dumps(message))

            def receive(request_id: Any) -> dict[str, Any]:
                while True:
                    message = json.loads(ws.recv(timeout=120))
                    if message.get("id") == request_id and "method" not in message:
                        return message

            send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
            receive(0)
            send({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                  "params": {"cwd": str(world.work), "mcpServers": []}})  # fmt: skip
            session = receive(1)["result"]["sessionId"]
            remote = _roundtrips(send, receive, count, session)
    finally:
        server.terminate()
        server.wait(timeout=30)
        world.close()
    return {"stdio": local, "websocket": remote}


def bench_fold(count: int) -> dict[str, float]:
    """Microseconds per delegated update folded into sub-agent events (chunks; tool calls)."""
    from acp.schema import AgentMessageChunk, TextContentBlock, ToolCallProgress, ToolCallStart

    from soulwire.engine.acp_delegate import _Turn  # pyright: ignore[reportPrivateUsage]
    from soulwire.wire.messages import SubagentEvent, envelope

    out: list[Any] = []

    def emit(message: Any) -> None:  # what the Agent tool does with each folded event
        out.append(
            SubagentEvent(parent_tool_call_id="a1", agent_id="a", subagent_type="x", event=envelope(message))
        )

    chunks = [
        AgentMessageChunk(
            session_update="agent_message_chunk", content=TextContentBlock(type="text", text=f"w{i}")
        )
        for i in range(count)
    ]
    calls = []
    for i in range(count):
        calls.append(
            ToolCallStart(session_update="tool_call", tool_call_id=f"c{i}", title="Read", kind="read")
        )
        result = [{"type": "content", "content": {"type": "text", "text": "ok"}}]
        calls.append(
            ToolCallProgress(
                session_update="tool_call_update", tool_call_id=f"c{i}", status="completed", content=result
            )
        )
    results: dict[str, float] = {}
    for name, updates in (("chunk_us", chunks), ("tool_update_us", calls)):
        turn = _Turn(emit)
        start = time.perf_counter()
        for update in updates:
            turn.update(update)
        turn.finish()
        results[name] = (time.perf_counter() - start) / len(updates) * 1e6
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", action="append", default=[], metavar="NAME=TEMPLATE")
    parser.add_argument("--ws", type=int, default=0, metavar="N", help="stdio vs WebSocket round trips")
    parser.add_argument("--fold", type=int, default=0, metavar="N", help="delegated updates folded")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--stream-repeat", type=int, default=3)
    parser.add_argument("--stream-sizes", default="1000,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.stream_sizes.split(",") if s]
    # The machine's load beside the numbers: on a shared machine the ratios of one run are
    # what to compare, and the load says how far the absolute numbers are from a quiet one's.
    results: dict[str, Any] = {"load_1min": {"start": round(os.getloadavg()[0], 1)}}
    agents = [entry.partition("=")[::2] for entry in args.cmd]
    # Interleaved (one start of each agent per round): both see the same load on a shared machine.
    starts: dict[str, list[float]] = {name: [] for name, _ in agents}
    for _ in range(args.repeat):
        for name, template in agents:
            starts[name].append(bench_init(template))
    for name, template in agents:
        inits = starts[name]
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
    if args.ws:
        results["ws"] = bench_ws(args.ws)
    if args.fold:
        results["fold"] = bench_fold(args.fold)
    medians = {name: r["init_ms"]["median"] for name, r in results.items() if "init_ms" in r}
    if "soulwire" in medians and len(medians) > 1:
        results["init_ratio"] = {
            other: round(ms / medians["soulwire"], 1) for other, ms in medians.items() if other != "soulwire"
        }
    results["load_1min"]["end"] = round(os.getloadavg()[0], 1)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
