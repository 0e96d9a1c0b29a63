"""Starting the Wire server fast: the lean first path.

Python, asyncio, pydantic and the engine take ~200 ms to import on a small machine, while a
client waits for its `initialize` reply. So the heavy modules load in a background thread
from the first millisecond, and meanwhile this module (stdlib + light soulwire modules only)
reads the first line; when it is a plain `initialize` it is answered at once, from the same
handshake code the full server uses. Everything after that waits for the engine."""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any

from soulwire.config.loader import ConfigError
from soulwire.engine.catalog import describe_builtin
from soulwire.runtime.options import SessionOptions
from soulwire.runtime.session import resolve_session_id
from soulwire.sessions.store import FileSessionStore
from soulwire.ui.wire.handshake import ClientHello, initialize_result, parse_initialize
from soulwire.ui.wire.lines import LineReader
from soulwire.ui.wire.output import OutputWriter
from soulwire.wire import PROTOCOL_VERSION, jsonrpc

_HEAVY = ("soulwire.runtime.builder", "soulwire.ui.wire.server")


class _Warmup(threading.Thread):
    def __init__(self) -> None:
        super().__init__(name="soulwire-warmup", daemon=True)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for name in _HEAVY:
                importlib.import_module(name)
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
    result = initialize_result(slash_commands=describe_builtin(), session=session)
    writer.write(jsonrpc.response_line(inbound.id, result))
    return hello


def serve_wire(options: SessionOptions) -> int:
    """Run `--wire` mode until stdin closes; returns the process exit code."""
    warmup = _Warmup()
    previous_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # keep the main thread responsive while the warm-up imports
    warmup.start()
    try:
        options.session_id = resolve_session_id(options) or FileSessionStore.new_id()
        options.continue_last = False
    except ConfigError as exc:
        sys.stderr.write(f"soulwire: {exc}\n")
        return 2
    writer = OutputWriter(1)
    reader = LineReader(0)
    first = reader.read_line()
    hello: ClientHello | None = None
    replay_first: bytes | None = first
    if first is not None:
        hello = _early_initialize(first, options, writer)
        if hello is not None:
            replay_first = None
    warmup.join()
    sys.setswitchinterval(previous_interval)
    if warmup.error is not None:
        raise warmup.error
    builder: Any = sys.modules["soulwire.runtime.builder"]
    server: Any = sys.modules["soulwire.ui.wire.server"]
    try:
        runtime = builder.build_runtime(options)
    except ConfigError as exc:
        writer.flush()
        sys.stderr.write(f"soulwire: {exc}\n")
        return 2
    if replay_first is not None:
        reader.push_front(replay_first)
    return server.run_server(runtime, writer, reader, hello)
