"""The Wire server: JSON-RPC 2.0 over stdin/stdout around one session's engine.

Every inbound message is handled as it arrives: `prompt` and `replay` run as tasks and answer
when they end; `cancel`, answers to our requests and everything else are handled at once, so
waiting for a client's answer never blocks the event stream."""

from __future__ import annotations

import asyncio
import importlib
import os
import signal
import stat
import sys
import threading
from typing import Any

import anyio
import anyio.abc
from pydantic import ValidationError

from soulwire.engine.client import ClientRequestError
from soulwire.llm.errors import AuthenticationError, ChatProviderError, LLMNotSet, LLMNotSupported
from soulwire.runtime.builder import Runtime
from soulwire.ui.wire.handshake import (
    BASELINE_VERSION,
    ClientHello,
    initialize_result,
    parse_initialize,
)
from soulwire.ui.wire.lines import LineReader
from soulwire.ui.wire.output import OutputWriter
from soulwire.ui.wire.replay import ReplayCounts, replay_records
from soulwire.wire import jsonrpc
from soulwire.wire.jsonrpc import RPCError, error_line, request_line, response_line
from soulwire.wire.messages import (
    EVENT_TYPES,
    INTRODUCED_IN,
    REQUEST_TYPES,
    SUBAGENT_FIELDS_SINCE,
    SubagentEvent,
    legacy_subagent_envelope,
    type_name,
)
from soulwire.wire.serde import event_line
from soulwire.wire.types import WireModel, user_input_adapter

SHUTDOWN_GRACE_S = 2.0
_BUSY = "An agent turn is already in progress"
_IDLE = "No agent turn is in progress"
AUTH_EXPIRED_MESSAGE = (
    'Authentication failed. Your login session may have expired. Please run "/login" to sign in again.'
)


def session_info(runtime: Runtime) -> dict[str, Any]:
    return {
        "id": runtime.session.id,
        "resumed": runtime.session.resumed,
        "work_dir": str(runtime.options.work_dir),
    }


class WireServer:
    """Serves one client over a pair of file descriptors."""

    def __init__(self, runtime: Runtime, writer: OutputWriter) -> None:
        self.runtime = runtime
        self.writer = writer
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._busy = False
        self._prompting = False
        self._scope: anyio.CancelScope | None = None
        self._closing = False
        self._group: anyio.abc.TaskGroup | None = None
        self._blocked: frozenset[type] = frozenset()
        self._blocked_names: frozenset[str] = frozenset()
        self.hello = ClientHello()
        self._apply_version(None)
        runtime.attach_client(self)
        runtime.bus.subscribe(self._send_event)

    # -- outbound -----------------------------------------------------------
    def _apply_version(self, hello: ClientHello | None) -> None:
        """Types newer than what the client declared (and the 1.3 baseline) are not sent.
        Capabilities count too: QuestionRequest goes only to a client that declared
        `supports_question`, and a client that subscribed hooks knows HookRequest."""
        ceiling: tuple[int, int] = hello.event_ceiling() if hello else BASELINE_VERSION
        self._legacy_subagent_events = ceiling < SUBAGENT_FIELDS_SINCE
        names = {n for n, v in INTRODUCED_IN.items() if v > ceiling}
        if hello is not None:
            if hello.supports_question:
                names.discard("QuestionRequest")
            else:
                names.add("QuestionRequest")
            if hello.hooks:
                names.discard("HookRequest")
        self._blocked_names = frozenset(names)
        self._blocked = frozenset(c for n, c in {**EVENT_TYPES, **REQUEST_TYPES}.items() if n in names)

    def _send_event(self, message: WireModel) -> None:
        if type(message) in self._blocked:
            return
        if type(message) is SubagentEvent:
            self._send_subagent_event(message)
            return
        self.writer.write(event_line(message))

    def _send_subagent_event(self, message: SubagentEvent) -> None:
        """A sub-agent's event, in the shape the client's version knows; an inner event the
        client does not know is not sent at all."""
        if message.event.get("type") in self._blocked_names:
            return
        if not self._legacy_subagent_events:
            self.writer.write(event_line(message))
            return
        legacy = legacy_subagent_envelope(message.parent_tool_call_id, message.event)
        body = {"jsonrpc": "2.0", "method": "event", "params": legacy}
        self.writer.write((jsonrpc.encode(body) + "\n").encode())

    async def request(self, message: WireModel) -> Any:
        """Send a request (JSON-RPC id = payload id) and wait for the client's answer."""
        name = type_name(message)
        request_id = str(getattr(message, "id", ""))
        if self._closing or self.writer.closed:
            raise ClientRequestError("client disconnected", closed=True)
        if name in self._blocked_names:
            raise ClientRequestError(f"the client does not support {name}", unsupported=True)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self.writer.write(request_line(request_id, name, message.model_dump(mode="json")))
        try:
            return await future
        finally:
            self._pending.pop(request_id, None)

    def _reply(self, request_id: Any, result: Any) -> None:
        self.writer.write(response_line(request_id, result))

    def _error(self, request_id: Any, error: RPCError) -> None:
        self.writer.write(error_line(request_id, error))

    # -- inbound ------------------------------------------------------------
    def handle_line(self, line: bytes) -> None:
        inbound = jsonrpc.classify(line.decode("utf-8", "replace"))
        if inbound.kind == "invalid":
            assert inbound.error is not None
            self._error(None, inbound.error)
        elif inbound.kind == "response":
            self._on_response(inbound.id, inbound.raw)
        elif inbound.kind == "request":
            assert inbound.method is not None
            try:
                self._dispatch(inbound.id, inbound.method, inbound.params)
            except RPCError as exc:
                self._error(inbound.id, exc)
            except Exception as exc:  # a bug must not take the server down
                self._error(inbound.id, RPCError(jsonrpc.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))

    def _on_response(self, request_id: Any, raw: dict[str, Any]) -> None:
        future = self._pending.get(request_id) if isinstance(request_id, str) else None
        if future is None or future.done():
            return  # an answer to nothing we asked (or a replayed request): ignored
        error = raw.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None  # pyright: ignore[reportUnknownMemberType]
            future.set_exception(ClientRequestError(str(message or "client error")))
        else:
            future.set_result(raw.get("result"))

    def _dispatch(self, request_id: str, method: str, params: Any) -> None:
        if method == "initialize":
            self._on_initialize(request_id, params)
        elif method == "prompt":
            self._on_prompt(request_id, params)
        elif method == "cancel":
            self._on_cancel(request_id)
        elif method == "replay":
            self._on_replay(request_id)
        elif method == "steer":
            self._on_steer(request_id, params)
        elif method == "set_plan_mode":
            self._on_set_plan_mode(request_id, params)
        else:
            raise RPCError(jsonrpc.METHOD_NOT_FOUND, f"Unexpected method received: {method}")

    def apply_hello(self, hello: ClientHello) -> None:
        """Adopt what the client declared in `initialize` (also the one the start-up path
        answered before the engine was loaded)."""
        self.hello = hello
        self._apply_version(hello)
        self.runtime.apply_client(
            supports_question=hello.supports_question,
            supports_plan_mode=hello.supports_plan_mode,
            hook_subscriptions=hello.hooks,
        )

    def _on_initialize(self, request_id: str, params: Any) -> None:
        hello = parse_initialize(params)
        if self._busy:
            raise RPCError(jsonrpc.INVALID_STATE, _BUSY)
        self.apply_hello(hello)
        external = (
            self.runtime.register_external_tools(hello.external_tools) if hello.external_tools else None
        )
        result = initialize_result(
            slash_commands=self.runtime.soul.slash_commands.describe(),
            session=session_info(self.runtime),
            external=external,
            hooks=self.runtime.hooks.describe(),
        )
        self._reply(request_id, result)

    def _start(self, job: Any, *args: Any) -> None:
        assert self._group is not None
        self._busy = True
        self._group.start_soon(job, *args)

    def _on_prompt(self, request_id: str, params: Any) -> None:
        if not isinstance(params, dict) or "user_input" not in params:
            raise jsonrpc.invalid_params("prompt")
        try:
            user_input = user_input_adapter().validate_python(params["user_input"])
        except ValidationError:
            raise jsonrpc.invalid_params("prompt") from None
        if self._busy:
            raise RPCError(jsonrpc.INVALID_STATE, _BUSY)
        self._prompting = True  # from now on a steer belongs to this turn
        self._start(self._run_prompt, request_id, user_input)

    def _on_steer(self, request_id: str, params: Any) -> None:
        if not isinstance(params, dict) or "user_input" not in params:
            raise jsonrpc.invalid_params("steer")
        try:
            user_input = user_input_adapter().validate_python(params["user_input"])
        except ValidationError:
            raise jsonrpc.invalid_params("steer") from None
        if not self._prompting:
            raise RPCError(jsonrpc.INVALID_STATE, _IDLE)
        try:
            self.runtime.soul.steer(user_input)
        except LLMNotSupported as exc:
            raise RPCError(jsonrpc.LLM_NOT_SUPPORTED, str(exc)) from None
        self._reply(request_id, {"status": "steered"})

    def _on_set_plan_mode(self, request_id: str, params: Any) -> None:
        enabled = params.get("enabled") if isinstance(params, dict) else None
        if not isinstance(enabled, bool):
            raise jsonrpc.invalid_params("set_plan_mode")
        self._reply(request_id, {"status": "ok", "plan_mode": self.runtime.set_plan_mode(enabled)})

    def _on_cancel(self, request_id: str) -> None:
        if self._scope is None:
            raise RPCError(jsonrpc.INVALID_STATE, _IDLE)
        self._scope.cancel()
        self._reply(request_id, {})

    def _on_replay(self, request_id: str) -> None:
        if self._busy:
            raise RPCError(jsonrpc.INVALID_STATE, _BUSY)
        self._start(self._run_replay, request_id)

    # -- jobs ---------------------------------------------------------------
    async def _run_prompt(self, request_id: str, user_input: Any) -> None:
        scope = anyio.CancelScope()
        self._scope = scope
        try:
            outcome = None
            with scope:
                outcome = await self.runtime.soul.run(user_input)
            if outcome is None:
                self._reply(request_id, {"status": "cancelled"})
            else:
                result: dict[str, Any] = {"status": outcome.status}
                if outcome.steps is not None:
                    result["steps"] = outcome.steps
                self._reply(request_id, result)
        except LLMNotSet as exc:
            self._error(request_id, RPCError(jsonrpc.LLM_NOT_SET, str(exc)))
        except LLMNotSupported as exc:
            self._error(request_id, RPCError(jsonrpc.LLM_NOT_SUPPORTED, str(exc)))
        except AuthenticationError as exc:
            # Only a provider that logs in with OAuth has a login to renew (-32004, spec §2.3).
            error = RPCError(jsonrpc.AUTH_EXPIRED, AUTH_EXPIRED_MESSAGE) if exc.oauth else None
            self._error(request_id, error or RPCError(jsonrpc.CHAT_PROVIDER_ERROR, str(exc)))
        except ChatProviderError as exc:
            self._error(request_id, RPCError(jsonrpc.CHAT_PROVIDER_ERROR, str(exc)))
        except Exception as exc:
            self._error(request_id, RPCError(jsonrpc.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            self._scope = None
            self._busy = False
            self._prompting = False

    async def _run_replay(self, request_id: str) -> None:
        scope = anyio.CancelScope()
        self._scope = scope
        counts = ReplayCounts()
        try:
            with scope:
                records = self.runtime.session.store.wire_records_verbatim()
                await replay_records(
                    records,
                    self.writer.write,
                    hidden=self._blocked_names,
                    counts=counts,
                    legacy_subagents=self._legacy_subagent_events,
                )
            status = "cancelled" if scope.cancelled_caught else "finished"
            self._reply(request_id, {"status": status, "events": counts.events, "requests": counts.requests})
        except Exception:
            self._error(request_id, RPCError(jsonrpc.INTERNAL_ERROR, "Replay failed"))
        finally:
            self._scope = None
            self._busy = False

    # -- lifecycle ----------------------------------------------------------
    async def serve(self, reader: LineReader) -> None:
        """Serve until the input ends (or SIGTERM/SIGINT), then wind down the running turn."""
        loop = asyncio.get_running_loop()
        self.writer.bind(loop.call_soon)
        lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        _start_reading(reader, loop, lines)
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, lines.put_nowait, None)
            except (NotImplementedError, RuntimeError):
                pass
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self.runtime.session_started)
            while True:
                line = await lines.get()
                if line is None:
                    break
                self.handle_line(line)
            self._shutdown()
            with anyio.move_on_after(SHUTDOWN_GRACE_S):
                while self._busy:
                    await anyio.sleep(0.005)
            group.cancel_scope.cancel()
        await self.runtime.session_ended()
        self.writer.flush()

    def _shutdown(self) -> None:
        """Input closed: cancel the running job and void every request still waiting."""
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(ClientRequestError("client disconnected", closed=True))


def _start_reading(
    reader: LineReader, loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[bytes | None]
) -> None:
    """Feed input lines into `lines` (None at the end). A pipe or socket is read by the event
    loop itself — no thread hand-off on the way to an approval's answer; anything else (a
    regular file, a terminal) by a thread doing blocking reads."""
    fd = reader.fd
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        mode = 0
    if not reader.eof and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        for line in reader.feed(None):  # lines the start-up path read ahead
            lines.put_nowait(line)

        def readable() -> None:
            try:
                chunk = os.read(fd, 1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            for line in reader.feed(chunk):
                lines.put_nowait(line)
            if not chunk:
                loop.remove_reader(fd)
                lines.put_nowait(None)

        os.set_blocking(fd, False)
        loop.add_reader(fd, readable)
        return

    def pump() -> None:
        while True:
            line = reader.read_line()
            loop.call_soon_threadsafe(lines.put_nowait, line)
            if line is None:
                return

    threading.Thread(target=pump, name="wire-stdin", daemon=True).start()


def prewarm(runtime: Runtime) -> None:
    """Do now what the first prompt would otherwise pay for: pydantic builds validators and
    serializers on first use and anyio loads its event-loop backend on first run. (Tool
    schemas are not generated here: an adapter generates them when it first sends them.)"""
    importlib.import_module("anyio._backends._asyncio")
    from soulwire.engine.soul import tool_message
    from soulwire.llm.message import Message
    from soulwire.wire.messages import StatusUpdate, StepBegin, ToolResult, TurnBegin, TurnEnd
    from soulwire.wire.types import TextPart, TokenUsage, ToolReturnValue

    user_input_adapter().validate_python([{"type": "text", "text": "x"}])
    value = ToolReturnValue(is_error=False, output="x")
    for message in (
        TurnBegin(user_input="x"),
        StepBegin(n=1),
        TextPart(text="x"),
        StatusUpdate(token_usage=TokenUsage()),
        ToolResult(tool_call_id="x", return_value=value),
        TurnEnd(),
    ):
        event_line(message)
    Message(role="user", content="x").to_record()
    tool_message("x", value).to_record()


def run_server(runtime: Runtime, writer: OutputWriter, reader: LineReader, hello: ClientHello | None) -> int:
    """Run the server to completion on the asyncio backend; returns the exit code."""

    async def main() -> None:
        server = WireServer(runtime, writer)
        if hello is not None:
            server.apply_hello(hello)
        await server.serve(reader)

    try:
        anyio.run(main)
    finally:
        runtime.close()
        sys.stderr.flush()
    return 0
