"""Starting the Wire server fast: the lean first path.

Python, asyncio, pydantic and the engine take ~200 ms to import on a small machine, while a
client waits for its `initialize` reply. So the heavy modules load in a background thread
from the first millisecond, and meanwhile this module (stdlib + light soulwire modules only)
reads the first line; when it is a plain `initialize` it is answered at once, from the same
handshake code the full server uses. Everything after that waits for the engine."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import Any

from soulwire.config.loader import ConfigError
from soulwire.engine.catalog import configured_hook_events, describe_builtin, describe_hooks
from soulwire.runtime.options import SessionOptions
from soulwire.runtime.session import resolve_session_id
from soulwire.sessions.store import FileSessionStore
from soulwire.ui.wire.handshake import ClientHello, initialize_result, parse_initialize
from soulwire.ui.wire.lines import LineReader
from soulwire.ui.wire.output import OutputWriter
from soulwire.wire import PROTOCOL_VERSION, jsonrpc


class _Warmup(threading.Thread):
    """Imports the engine and builds the session's runtime while the main thread answers
    `initialize`: the first prompt then finds everything ready."""

    def __init__(self, options: SessionOptions) -> None:
        super().__init__(name="soulwire-warmup", daemon=True)
        self.options = options
        self.runtime: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            builder = importlib.import_module("soulwire.runtime.builder")
            server = importlib.import_module("soulwire.ui.wire.server")
            self.runtime = builder.build_runtime(self.options)
            server.prewarm(self.runtime)
        except BaseException as exc:  # surfaced on the main thread
            self.error = exc


def _early_initialize(line: bytes, options: SessionOptions, writer: OutputWriter) -> ClientHello | None:
    """Answer `initialize` if the first line is one that needs no engine; else None."""
    inbound = jsonrpc.classify(line.decode("utf-8", "replace"))
    if inbound.kind != "request" or inbound.method != "initialize":
        return None
    try:
        hello = parse_initialize(inbound.params)
    except jsonrpc.RPCError:
        return None  # the full server answers with the error
    if hello.external_tools:
        return None  # schema checks need the engine
    store = FileSessionStore(
        options.share_dir, options.work_dir, options.session_id or "", protocol_version=PROTOCOL_VERSION
    )
    session = {
        "id": options.session_id,
        "resumed": store.existed and store.has_wire_records(),
        "work_dir": str(options.work_dir),
    }
    subscribed = [
        h["event"] for h in hello.hooks if isinstance(h.get("id"), str) and isinstance(h.get("event"), str)
    ]
    hooks = describe_hooks([*configured_hook_events(options.raw_config.get("hooks")), *subscribed])
    result = initialize_result(slash_commands=describe_builtin(), session=session, hooks=hooks)
    writer.write(jsonrpc.response_line(inbound.id, result))
    return hello


def serve_wire(options: SessionOptions) -> int:
    """Run `--wire` mode until stdin closes; returns the process exit code."""
    try:
        options.session_id = resolve_session_id(options) or FileSessionStore.new_id()
        options.continue_last = False
    except ConfigError as exc:
        sys.stderr.write(f"soulwire: {exc}\n")
        return 2
    warmup = _Warmup(options)
    previous_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # keep the main thread responsive while the warm-up runs
    warmup.start()
    writer = OutputWriter(1)
    reader = LineReader(0)
    first = reader.read_line()
    hello = _early_initialize(first, options, writer) if first is not None else None
    if first is not None and hello is None:
        reader.push_front(first)
    writer.flush()
    warmup.join()
    sys.setswitchinterval(previous_interval)
    if isinstance(warmup.error, ConfigError):
        sys.stderr.write(f"soulwire: {warmup.error}\n")
        return 2
    if warmup.error is not None:
        raise warmup.error
    server: Any = sys.modules["soulwire.ui.wire.server"]
    code: int = server.run_server(warmup.runtime, writer, reader, hello)
    # Session files are closed and stdout is flushed: skip interpreter teardown (tens of ms
    # of module cleanup) so a client waiting for the exit is not kept waiting.
    sys.stderr.flush()
    os._exit(code)
