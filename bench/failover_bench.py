"""From SIGKILL of the replica that runs a session to its client's first event from the new
owner (issue 35: ≤ 3 s, median of 10).

Starts a throwaway PostgreSQL cluster (as the tests do: `tests/postgres_cluster.py`), three
`soulwire serve --store` replicas and HAProxy with the configuration `serve haproxy-config`
generates (health checks every 1000 ms, as shipped), all on 127.0.0.1. Each round: a session
created through HAProxy, a Wire client attached through HAProxy (`since_seq`), a prompt whose
tool call waits for an approval; then the owning replica (found in `sw_owners`) is SIGKILLed and
the client does what the SDK's RemoteSession does: re-connects through HAProxy at once (then
every 0.2 s while refused), re-attaching from its last `seq`. Measured from the SIGKILL to the
first `event` message that reaches the client from the new owner: the recorded start of the
continued turn (its `turn.resumed` notice: the approval is asked again) when the re-attach is
complete (`path: backlog`); when the new owner cannot
send what was missed (`complete: false`), the client sends its next prompt and the event is
that turn's `TurnBegin` (`path: prompt`). Also reported: when the client saw its connection
drop, and when the new owner answered the attach. The killed replica is started again on its
port before the next round.

    python3 bench/failover_bench.py [--rounds 10] [--check-interval 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import psycopg
from scripted_config import scripted_config
from websockets.sync.client import ClientConnection, connect

from postgres_cluster import PASSWORD, make_cluster

TOOL_CALL = {"id": "tc-1", "name": "Shell", "arguments": json.dumps({"command": "echo ok"})}
TOKEN = secrets.token_urlsafe(24)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def until(condition: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the cluster did not come up")
        time.sleep(0.05)


class Replica:
    def __init__(self, root: Path, store: str, port: int, front: str) -> None:
        self.root, self.store, self.port, self.front = root, store, port, front
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "HOME": str(self.root / "home"),
            "SOULWIRE_SHARE_DIR": str(self.root / "home" / ".soulwire"),
            "SOULWIRE_SERVER_TOKEN": TOKEN,
            "PGPASSWORD": PASSWORD,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "soulwire", "serve", "--listen", f"127.0.0.1:{self.port}",
             "--config-file", str(self.root / "config.json"), "--work-dir", str(self.root / "work"),
             "--store", self.store, "--allow-host", self.front],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        until(lambda: healthy(self.base))

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def messages(conn: ClientConnection, timeout: float = 30.0) -> Any:
    """Each message received (frames may carry several, newline-separated)."""
    while True:
        frame = conn.recv(timeout=timeout)
        text = frame if isinstance(frame, str) else frame.decode()
        for line in text.splitlines():
            if line:
                yield json.loads(line)


def send(conn: ClientConnection, rid: str, method: str, params: Any) -> None:
    conn.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))


def one_round(front: str, replicas: list[Replica], url: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://{front}/api/sessions", data=b"{}", method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        session = json.loads(answer.read())["id"]
    ws = f"ws://{front}/ws/sessions/{session}?token={TOKEN}"
    last_seq, epoch = 0, None
    connections = ExitStack()
    conn = connections.enter_context(connect(f"{ws}&since_seq=0&mode=controller"))
    send(conn, "i1", "initialize", {"protocol_version": "1.10", "serve": {"seq": True}})
    send(conn, "p1", "prompt", {"user_input": "run it"})
    for message in messages(conn):
        params = message.get("params") or {}
        if message.get("method") == "attached":
            epoch = params["epoch"]
        if isinstance(params.get("seq"), int):
            last_seq = max(last_seq, params["seq"])
        if message.get("method") == "request" and params.get("type") == "ApprovalRequest":
            break
    with psycopg.connect(url) as db:
        row = db.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
    assert row is not None
    (owner,) = [r for r in replicas if r.base == row[0]]

    killed = time.perf_counter()
    owner.kill()
    try:
        for _ in messages(conn, timeout=30):
            pass
    except Exception:  # the connection dropped: the client knows
        dropped = time.perf_counter()
    connections.close()
    query = f"{ws}&since_seq={last_seq}&mode=controller&take=1" + (f"&epoch={epoch}" if epoch else "")
    while True:
        try:
            conn = connections.enter_context(connect(query, open_timeout=5))
            break
        except Exception:  # refused while HAProxy and the replicas catch up: as the SDK, retry
            time.sleep(0.2)
    path = "backlog"
    first_event = attached_at = None
    with connections:
        stream = messages(conn)
        for message in stream:
            if message.get("method") == "attached":
                attached_at = time.perf_counter()
                if not message["params"]["complete"]:
                    path = "prompt"
                    send(conn, "i2", "initialize", {"protocol_version": "1.10", "serve": {"seq": True}})
                    send(conn, "p2", "prompt", {"user_input": "and now?"})
            elif message.get("method") == "event":
                first_event = time.perf_counter()
                break
    owner.start()  # on its port again, for the next round
    assert first_event is not None and attached_at is not None
    return {
        "dropped_s": dropped - killed,
        "attached_s": attached_at - killed,
        "first_event_s": first_event - killed,
        "path": path,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--check-interval", type=int, default=1000, help="HAProxy's, in ms")
    args = parser.parse_args()
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        sys.exit("failover_bench: HAProxy is not installed (apt-get install -y haproxy)")
    root = Path(tempfile.mkdtemp(prefix="soulwire-failover-"))
    (root / "work").mkdir()
    scripts = root / "scripts.json"
    scripts.write_text(json.dumps(["tool_call: " + json.dumps(TOOL_CALL)] * 4))
    (root / "config.json").write_text(json.dumps(scripted_config(scripts)))
    cluster = make_cluster()
    replicas: list[Replica] = []
    proxy: subprocess.Popen[bytes] | None = None
    try:
        url = cluster.create_database("failover")
        bare = url.replace(f":{PASSWORD}@", "@")
        front = f"127.0.0.1:{free_port()}"
        replicas = [Replica(root, bare, free_port(), front) for _ in range(3)]
        for replica in replicas:
            replica.start()
        upstreams = [a for r in replicas for a in ("--replica", r.base)]
        config = subprocess.run(
            [sys.executable, "-m", "soulwire", "serve", "haproxy-config", "--listen", front,
             "--check-interval", str(args.check_interval), *upstreams],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        (root / "haproxy.cfg").write_text(config)
        proxy = subprocess.Popen([haproxy, "-db", "-f", str(root / "haproxy.cfg")], stderr=subprocess.DEVNULL)
        until(lambda: healthy(f"http://{front}"))
        rounds = []
        for n in range(args.rounds):
            result = one_round(front, replicas, url)
            rounds.append(result)
            print(
                f"round {n + 1}: dropped {result['dropped_s']:.3f} s, attached {result['attached_s']:.3f} s, "
                f"first event {result['first_event_s']:.3f} s ({result['path']})",
                flush=True,
            )
            until(lambda: healthy(f"http://{front}"))
            time.sleep(2 * args.check_interval / 1000)  # HAProxy sees the restarted replica up again
        firsts = sorted(r["first_event_s"] for r in rounds)
        print(
            f"SIGKILL → first event from the new owner: median {statistics.median(firsts):.3f} s, "
            f"min {firsts[0]:.3f} s, max {firsts[-1]:.3f} s over {len(firsts)} rounds"
        )
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=30)
        for replica in replicas:
            replica.stop()
        cluster.remove()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
