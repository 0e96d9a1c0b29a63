"""Starting the Wire server fast: the lean first path.

Python, asyncio, pydantic and the engine take ~150 ms of CPU to load on a small machine, while
a client waits for its `initialize` reply. So the heavy modules load in a background thread
from the first millisecond, and meanwhile this module (stdlib + light soulwire modules only)
reads the first line; when it is a plain `initialize` it is answered at once, from the same
handshake code the full server uses. Everything after that waits for the engine.

(Holding the reply until the engine is ready was measured too: it serves a prompt sent right
after the handshake in ~2 ms instead of ~150, but it moves the whole load into the handshake,
~200 ms, which is the one wait every client has. See bench/RESULTS.md.)
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from soulwire.config.loader import ConfigError
from soulwire.config.process_env import import_pydantic_plugin_loader, startup_finished
from soulwire.engine.catalog import configured_hook_events, describe_builtin, describe_hooks
from soulwire.engine.skills import session_skills
from soulwire.runtime.options import SessionOptions
from soulwire.runtime.session import SessionHeldError, lock_session, resolve_session_id
from soulwire.sessions.lock import SessionLock
from soulwire.sessions.store import FileSessionStore
from soulwire.ui.wire.handshake import ClientHello, initialize_result, lean_hello
from soulwire.wire import PROTOCOL_VERSION, jsonrpc
from soulwire.wire.lines import LineReader


class _Warmup(threading.Thread):
    """Imports the engine and builds the session's runtime while the main thread answers
    `initialize`: the first prompt then finds everything ready. Once `initialize` is answered
    (`answered`), it also sets up a real provider's SDK (`server.preload_provider`)."""

    def __init__(self, options: SessionOptions, lock: SessionLock) -> None:
        super().__init__(name="soulwire-warmup", daemon=True)
        self.options = options
        self.lock = lock
        self.runtime: Any = None
        self.error: BaseException | None = None
        self.answered = threading.Event()

    def run(self) -> None:
        try:
            import_pydantic_plugin_loader()
            builder = importlib.import_module("soulwire.runtime.builder")
            server = importlib.import_module("soulwire.ui.wire.server")
            self.runtime = builder.build_runtime(self.options, lock=self.lock)
            if self.answered.is_set():
                # Here, once `initialize` is answered (the main thread then only waits for the
                # warm-up): still start-up, so the collector is off while the SDK's ~150
                # modules load and freezes them after, and no thread runs beside it for the
                # interpreter's lock (a preload in a thread of its own beside the server's
                # start cost ~10 ms more CPU a start than it saved, bench/RESULTS.md §31). A
                # prompt sent meanwhile waits for it as for the rest of the warm-up. When
                # `initialize` needs the full server, its `_preload_provider` does it instead.
                server.preload_provider(self.runtime)
            server.prewarm(self.runtime)
        except BaseException as exc:  # surfaced on the main thread
            self.error = exc


def _early_initialize(line: bytes, options: SessionOptions) -> tuple[ClientHello, bytes] | None:
    """The hello and the reply line if the first line is an `initialize` that needs no
    engine; else None (the full server handles it)."""
    inbound = jsonrpc.classify(line)
    if inbound.kind != "request" or inbound.method != "initialize":
        return None
    hello = lean_hello(inbound.params)
    if hello is None:
        return None  # external tools or anything unusual: the full server validates it
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
    skills = session_skills(options.work_dir, options.share_dir, options.skills_dirs, options.raw_config)
    commands = [*describe_builtin(), *skills.describe()]
    extensions = {"supports_model_switch": True} if hello.supports_model_switch else None
    result = initialize_result(slash_commands=commands, session=session, hooks=hooks, extensions=extensions)
    return hello, jsonrpc.response_line(inbound.id, result)


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the client is gone; the server notices when it reads EOF


def _cannot_start(error: BaseException, reader: LineReader, *, answered: bool) -> int:
    """The engine could not be built (the command line already refused what a light check
    can find, config/precheck.py). One line on stderr, never a traceback; and when
    `initialize` was already answered, every request gets the error until the client hangs
    up, so that no request is left without a reply. Exit 2 for configuration, 1 otherwise."""
    if isinstance(error, ConfigError):
        problem, code = " ".join(str(error).split()), 2
        refusal = jsonrpc.RPCError(jsonrpc.INTERNAL_ERROR, f"The engine cannot start: {problem}")
    else:  # a bug: its text and traceback go to the log, never to the client
        refusal, code = jsonrpc.internal_error(error), 1
        problem = f"cannot start: {refusal.message}"
    sys.stderr.write(f"soulwire: {problem}\n")
    sys.stderr.flush()
    if answered:
        _refuse_every_request(refusal, reader)
    return code


def _refuse_every_request(refusal: jsonrpc.RPCError, reader: LineReader) -> None:
    """Answer every request with `refusal` (bad lines with their own error) until the client
    hangs up: no request is left without a reply."""
    while (line := reader.read_line()) is not None:
        inbound = jsonrpc.classify(line)
        if inbound.kind == "request":
            _write_all(1, jsonrpc.error_line(inbound.id, refusal))
        elif inbound.kind == "invalid" and inbound.error is not None:
            _write_all(1, jsonrpc.error_line(None, inbound.error))


def _session_held(error: SessionHeldError) -> int:
    """Another process holds the session: said on stderr at once, and to the client as the
    answer to `initialize` (and to every request after it): -32000 with `data.reason`
    `session_held` and the holder (`pid`, `host`, `since`). Exit 2 when the client hangs up."""
    sys.stderr.write(f"soulwire: error: {error}\n")
    sys.stderr.flush()
    data = {"reason": jsonrpc.SESSION_HELD, "session_id": error.session_id, "holder": error.holder}
    _refuse_every_request(jsonrpc.RPCError(jsonrpc.INVALID_STATE, str(error), data), LineReader(0))
    return 2


def _asks_for_extensions(line: bytes) -> bool:
    """The first line is an `initialize` with a `serve` member (the server's extensions)."""
    if b'"serve"' not in line:
        return False
    inbound = jsonrpc.classify(line)
    params: Any = inbound.params
    return (
        inbound.kind == "request"
        and inbound.method == "initialize"
        and isinstance(params, dict)
        and "serve" in params
    )


def serve_wire(options: SessionOptions, extended: Callable[[Any, LineReader], int] | None = None) -> int:
    """Run `--wire` mode until stdin closes; returns the process exit code. `extended` serves
    a client whose `initialize` asks for the server's extensions (given by the CLI, which may
    use the server package: this layer may not)."""
    try:
        options.session_id = resolve_session_id(options) or FileSessionStore.new_id()
        options.continue_last = False
        # Taken before the handshake, so that `initialize` already says who holds it.
        lock = lock_session(options, options.session_id)
    except SessionHeldError as exc:
        return _session_held(exc)
    except ConfigError as exc:
        sys.stderr.write(f"soulwire: error: {exc}\n")
        return 2
    warmup = _Warmup(options, lock)
    previous_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # the main thread answers promptly while the warm-up runs
    warmup.start()
    reader = LineReader(0)
    first = reader.read_line()
    wants = extended is not None and first is not None and _asks_for_extensions(first)
    early = _early_initialize(first, options) if first is not None and not wants else None
    if early is not None:
        _write_all(1, early[1])
        warmup.answered.set()
    elif first is not None:
        reader.push_front(first)
    warmup.join()
    sys.setswitchinterval(previous_interval)
    startup_finished()
    if warmup.error is not None:
        return _cannot_start(warmup.error, reader, answered=early is not None)
    if wants and extended is not None:
        code = extended(warmup.runtime, reader)
        sys.stderr.flush()
        os._exit(code)
    server: Any = sys.modules["soulwire.ui.wire.server"]
    hello = early[0] if early is not None else None
    code: int = server.run_server(warmup.runtime, reader, hello)
    # Session files are closed and stdout is flushed: skip interpreter teardown (tens of ms
    # of module cleanup) so a client waiting for the exit is not kept waiting.
    sys.stderr.flush()
    os._exit(code)
