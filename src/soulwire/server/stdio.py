"""The server's Wire extensions on stdio: `soulwire --wire` with a client that asked for them.

When the first line a `--wire` engine reads is an `initialize` with a `serve` member, the
engine serves its one session through the same `LiveSession` hub as `soulwire serve`, with a
single client on stdin/stdout: events carry `seq`, requests `deadline_ms` and `on_timeout`,
`cancel` answers with a receipt, `approvals/rules/*`, `requests/pending`, `blob/read` and
`attach` answer, and large payloads go by reference — all negotiated exactly as over
WebSocket (docs/serve.md). A client that does not ask gets today's Wire through the plain
server (ui/wire/server.py); nothing of this module is even imported then."""

from __future__ import annotations

import sys
from typing import Any

import anyio

from soulwire.runtime.builder import Runtime
from soulwire.server.blobs import BlobStore
from soulwire.server.client import Client
from soulwire.server.hub import LiveSession
from soulwire.server.messages import HubSettings
from soulwire.server.registry import content_digest
from soulwire.sessions.paths import WIRE_FILE
from soulwire.wire.lines import LineReader
from soulwire.wire.streams import FdStream

STDIO_QUEUE_BYTES = 1 << 30
"""Writes to stdout block the loop when the reader is slow (as for the plain server), so the
queue never holds more than an event-loop pass; the bound is only a backstop."""


def run_extended(runtime: Runtime, reader: LineReader) -> int:
    """Serve stdin/stdout through the hub until stdin closes; returns the exit code."""
    store: Any = runtime.session.store
    digest, records = content_digest(store.dir / WIRE_FILE)
    settings = HubSettings(blobs=BlobStore(runtime.options.share_dir / "blobs"))

    async def main() -> None:
        stream = FdStream(reader, 1)
        live = LiveSession(runtime, settings, on_empty=lambda _live: None)
        live.signals = True  # as for the plain server: SIGTERM/SIGINT end the input
        live.loaded = {"session_id": live.id, "records": records, "content_hash": digest}
        client = Client(1, max_queued_bytes=STDIO_QUEUE_BYTES, max_message_bytes=settings.max_message_bytes)
        live.connect(client)
        async with anyio.create_task_group() as group:
            group.start_soon(_write_loop, client, stream)
            group.start_soon(_read_loop, live, client, stream)
            await live.run()  # until stdin ends or a signal
            while client.queued and not stream.broken:
                await anyio.sleep(0.001)  # the last answers go out before the process ends
            group.cancel_scope.cancel()
        stream.flush()

    try:
        anyio.run(main)
    finally:
        sys.stderr.flush()
    return 0


async def _read_loop(live: LiveSession, client: Client, stream: FdStream) -> None:
    while True:
        try:
            line = await stream.receive()
        except anyio.EndOfStream:
            break
        if line.strip():
            live.handle(client, line)
    live.close()


async def _write_loop(client: Client, stream: FdStream) -> None:
    while (batch := await client.next_batch()) is not None:
        for line in batch:
            stream.send(line if line.endswith(b"\n") else line + b"\n")
        stream.flush()
        if stream.broken:
            return


__all__ = ["run_extended"]
