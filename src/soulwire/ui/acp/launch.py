"""Starting `soulwire acp` fast. The ACP SDK (its pydantic schema) and the engine take most of
a second to import; an editor waits for the `initialize` reply before anything else. So they
load in a background thread from the first millisecond while this module — stdlib and light
soulwire modules only — reads the first line and answers `initialize` itself."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import Any

from soulwire.config.process_env import import_pydantic_plugin_loader, startup_finished
from soulwire.runtime.options import SessionOptions
from soulwire.ui.acp.handshake import Handshake
from soulwire.ui.acp.stdio import LineInput, LineOutput
from soulwire.wire.jsonrpc import RPCError, parse


class _Warmup(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="soulwire-acp-warmup", daemon=True)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            import_pydantic_plugin_loader()
            importlib.import_module("soulwire.ui.acp.server")
            importlib.import_module("anyio._backends._asyncio")
        except BaseException as exc:  # surfaced on the main thread
            self.error = exc


def _first_initialize(line: bytes) -> tuple[Any, Any] | None:
    """(id, params) when the line is an `initialize` request."""
    try:
        message = parse(line)
    except RPCError:
        return None  # the server answers it
    if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
        return message["id"], message.get("params")
    return None


def serve_acp(options: SessionOptions) -> int:
    """Run `soulwire acp` until stdin closes; returns the exit code."""
    warmup = _Warmup()
    previous_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # the main thread answers promptly while the warm-up runs
    warmup.start()
    reader, writer = LineInput(0), LineOutput(1)
    handshake = Handshake(options)
    first = reader.read_line()
    early = _first_initialize(first) if first is not None else None
    if early is not None:
        writer.send(handshake(*early))
    elif first is not None:
        reader.push_front(first)
    warmup.join()
    sys.setswitchinterval(previous_interval)
    startup_finished()
    if warmup.error is not None:
        raise warmup.error
    server: Any = sys.modules["soulwire.ui.acp.server"]
    code: int = server.run_server(options, reader, writer, handshake)
    # Sessions are closed and every line is written: skip interpreter teardown.
    sys.stderr.flush()
    os._exit(code)
