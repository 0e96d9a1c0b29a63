"""The ACP server: the SDK's agent-side connection over our transport, around the agent.
Imported in the background by the start-up path (the SDK and the engine are heavy)."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from typing import Any

import anyio

from soulwire.runtime.options import SessionOptions
from soulwire.ui.acp.agent import SoulwireAgent
from soulwire.ui.acp.handshake import Handshake
from soulwire.ui.acp.routes import agent_connection
from soulwire.ui.acp.stdio import LineInput, LineOutput
from soulwire.ui.acp.transport import StdioTransport


async def _serve(
    options: SessionOptions, reader: LineInput, writer: LineOutput, handshake: Handshake
) -> None:
    transport = StdioTransport(reader, writer, handshake)
    writer.bind(asyncio.get_running_loop().call_soon)
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    heads: dict[str, bytes] = {}

    def notify(session_id: str, update: dict[str, Any] | str) -> None:
        """One `session/update`; `update` may come JSON-encoded already (streamed chunks: this
        runs once per chunk, so the line is assembled as text)."""
        head = heads.get(session_id)
        if head is None:
            head = heads[session_id] = (
                '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
                + encode(session_id)
                + ',"update":'
            ).encode()
        body = update if isinstance(update, str) else encode(update)
        writer.write(head + body.encode("utf-8", "replace") + b"}}\n")

    def extension(method: str, params: dict[str, Any]) -> None:
        """An extension notification (`_soulwire/…`), in order with the updates."""
        writer.write(encode({"jsonrpc": "2.0", "method": method, "params": params}).encode() + b"\n")

    async with anyio.create_task_group() as sessions:  # each session's lifetime is a task here
        agent = SoulwireAgent(options, notify, transport.defer, lambda: handshake.client, sessions, extension)
        connection = agent_connection(agent, transport)
        try:
            async with anyio.create_task_group() as listening:
                listening.start_soon(_stop_on_signal, listening.cancel_scope)
                await connection.listen()  # returns at the end of stdin
                listening.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await agent.shutdown()  # every turn cancelled, every command killed, sessions ended
            sessions.cancel_scope.cancel()
    writer.bind(None)


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    """SIGTERM / SIGINT end the server as the end of stdin does (the default would leave the
    running commands, each in its own process group, behind)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return


class _OneLine(logging.Formatter):
    """The SDK logs every failed handler with a traceback; a person reading the editor's log
    gets one line with the error instead."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"soulwire acp: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {type(error).__name__}: {error}"
        return text


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def run_server(options: SessionOptions, reader: LineInput, writer: LineOutput, handshake: Handshake) -> int:
    """Serve until stdin ends; every session is closed (and its commands killed) on the way out."""
    _log_to_stderr()
    anyio.run(_serve, options, reader, writer, handshake)
    return 0
