#!/usr/bin/env python3
"""A fake OpenAI Chat Completions provider with latency, for fleet benchmarks: a real HTTP
server on 127.0.0.1 that answers every `POST .../chat/completions` after `--latency` seconds
with a streamed reply (the real API's SSE shape, from tests/provider_streams.py).

Stateless, so any number of sessions can share it: a request whose messages hold fewer than
`--calls - 1` tool results gets a `WriteFile` tool call (`step<N>.txt`), the next one the
final text. So each session makes exactly `--calls` model calls.

    python3 bench/latency_provider.py --latency 0.5 --calls 3     # prints its URL, then serves
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.provider_streams import Answer, Call, chat_stream


def answer_for(body: Any, calls: int) -> Answer:
    messages = body.get("messages", []) if isinstance(body, dict) else []
    done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
    if done < calls - 1:
        args = json.dumps({"path": f"step{done}.txt", "content": f"step {done}\n"})
        return Answer(message_id=f"m{done}", calls=[Call(id=f"c{done}", name="WriteFile", args=[args])])
    return Answer(message_id="final", text=["All ", "done."])


class Counter:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.in_flight = 0
        self.peak = 0


def serve(latency: float, calls: int, port: int) -> ThreadingHTTPServer:
    counter = Counter()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Real providers send with TCP_NODELAY; without it every answer on a kept-alive
        # connection waits ~40 ms for the client's delayed ACK (Nagle), which no real API has.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # /stats: what the benchmark reads at the end
            with counter.lock:
                data = json.dumps({"requests": counter.requests, "peak_in_flight": counter.peak}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            with counter.lock:
                counter.requests += 1
                counter.in_flight += 1
                counter.peak = max(counter.peak, counter.in_flight)
            try:
                body = json.loads(raw)
                time.sleep(latency)
                reply = chat_stream(answer_for(body, calls), moonshot=False)
                self.send_response(200)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for chunk in reply.chunks:
                    assert isinstance(chunk, bytes)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with counter.lock:
                    counter.in_flight -= 1

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 512  # 50 sessions connect at once

    return Server(("127.0.0.1", port), Handler)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = serve(args.latency, args.calls, args.port)
    host, port = server.server_address[:2]
    print(f"http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
