"""JSON-RPC 2.0 over the engine's pipes: string ids for our requests, responses matched to
their handlers, `event` notifications decoded into `soulwire.wire` models (with a hand-written
fast path for streamed text and thinking, the hot path), and the engine's `request`s passed up.

Nothing here raises on unexpected input: unknown event types and malformed lines are
delivered raw or logged, because a newer engine must never break an older SDK."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable
from json import decoder as json_decoder
from typing import Any

from soulwire.sdk.errors import SDKError, engine_error
from soulwire.sdk.jsonutil import as_object
from soulwire.sdk.process import EngineProcess
from soulwire.wire import jsonrpc
from soulwire.wire.messages import UnknownMessage, parse_envelope
from soulwire.wire.types import TextPart, ThinkPart, WireModel

log = logging.getLogger("soulwire.sdk")

ResponseHandler = Callable[[Any, SDKError | None], None]
"""Called once with (result, None) or (None, error)."""
EventHandler = Callable[[WireModel], None]
RequestHandler = Callable[[str, str, dict[str, Any]], None]
"""(JSON-RPC id, request type, payload)."""

_PART_HEAD = b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":{"type":"'
_TEXT_HEAD = _PART_HEAD + b'text","text":'
_THINK_HEAD = _PART_HEAD + b'think","think":'
_TEXT_TAIL = b"}}}"
_THINK_TAIL = b',"encrypted":null}}}'
_scan: Callable[[str, int], tuple[str, int]] = json_decoder.scanstring  # pyright: ignore[reportAttributeAccessIssue]


def _string_literal(line: bytes, start: int, stop: int) -> str | None:
    """The JSON string spanning exactly line[start:stop], or None if it is anything else."""
    literal = line[start:stop].decode("utf-8", "replace")
    if len(literal) < 2 or literal[0] != '"':
        return None
    try:
        value, end = _scan(literal, 1)
    except ValueError:
        return None
    return value if end == len(literal) else None


def fast_content_part(line: bytes) -> WireModel | None:
    """A text or think chunk in the exact compact form engines write, decoded without a full
    JSON parse (about 3x cheaper); None for every other line (the general path handles it)."""
    if line.startswith(_TEXT_HEAD) and line.endswith(_TEXT_TAIL):
        text = _string_literal(line, len(_TEXT_HEAD), len(line) - len(_TEXT_TAIL))
        return None if text is None else TextPart(text=text)
    if line.startswith(_THINK_HEAD) and line.endswith(_THINK_TAIL):
        think = _string_literal(line, len(_THINK_HEAD), len(line) - len(_THINK_TAIL))
        return None if think is None else ThinkPart(think=think)
    return None


def decode_event(type_: Any, payload: Any) -> WireModel:
    """A typed event, or UnknownMessage for a type (or payload) this version does not know."""
    if not isinstance(type_, str):
        return UnknownMessage(type=str(type_), payload=as_object(payload) or {})
    return parse_envelope(type_, payload)


def _ignore_event(_event: WireModel) -> None:
    pass


class Connection:
    """The JSON-RPC peer of one engine process. Runs on the event loop that created it;
    `respond*` may also be called from other threads (the sync wrapper does)."""

    def __init__(self, process: EngineProcess) -> None:
        self.process = process
        self.on_part: EventHandler = _ignore_event
        """Streamed text/think chunks (the hot path): bound straight to the running turn."""
        self.on_event: EventHandler = _ignore_event
        """Every other event."""
        self.on_request: RequestHandler | None = None
        self.failure: SDKError | None = None
        """Set once the engine is gone; every later call fails with it."""
        self.closing_error: SDKError | None = None
        """What to report instead of "the engine exited" when we closed it on purpose."""
        self._pending: dict[str, tuple[str, ResponseHandler]] = {}
        self._counter = 0
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    def start(self) -> None:
        self._reader = self._loop.create_task(self._read(), name="soulwire-sdk-reader")

    @property
    def alive(self) -> bool:
        return self.failure is None

    # -- inbound ----------------------------------------------------------------
    async def _read(self) -> None:
        try:
            await self.process.pump_stdout(self._on_lines)
        except Exception:  # a broken pipe or a bug: either way the connection is over
            log.exception("reading the engine's stdout failed")
        # stdout closed: the exit code usually follows within milliseconds
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.process.wait(), 2.0)
        self.fail(self.closing_error or self.process.exited_error())

    def fail(self, error: SDKError) -> None:
        """Mark the connection dead: every pending and later request fails with `error`."""
        if self.failure is not None:
            return
        self.failure = error
        pending, self._pending = self._pending, {}
        for _method, handler in pending.values():
            self._call_handler(handler, None, error)
        self.closed.set()

    def _on_lines(self, lines: list[bytes]) -> None:
        for line in lines:
            part = fast_content_part(line)
            if part is not None:
                self.on_part(part)
                continue
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("ignoring a line that is not JSON: %r", line[:200])
                continue
            obj = as_object(message)
            if obj is not None:
                self._on_message(obj)
            else:
                log.warning("ignoring a JSON value that is not an object: %r", line[:200])

    def _on_message(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "event":
            params = as_object(message.get("params"))
            if params is not None:
                self.on_event(decode_event(params.get("type"), params.get("payload")))
            return
        request_id = message.get("id")
        if method == "request":
            params = as_object(message.get("params"))
            if not isinstance(request_id, str) or params is None:
                log.warning("ignoring a malformed request: %r", message)
                return
            type_ = params.get("type")
            if self.on_request is None:
                self.respond_error(request_id, jsonrpc.METHOD_NOT_FOUND, "no request handler")
                return
            self.on_request(
                request_id, type_ if isinstance(type_, str) else "", as_object(params.get("payload")) or {}
            )
            return
        if isinstance(method, str):
            if request_id is not None:
                self.respond_error(
                    str(request_id), jsonrpc.METHOD_NOT_FOUND, f"Unexpected method received: {method}"
                )
            return
        if "result" in message or "error" in message:
            entry = self._pending.pop(request_id, None) if isinstance(request_id, str) else None
            if entry is None:
                log.debug("ignoring a response to nothing pending: %r", request_id)
                return
            method_name, handler = entry
            if "error" in message and message["error"] is not None:
                self._call_handler(handler, None, engine_error(message["error"], method=method_name))
            else:
                self._call_handler(handler, message.get("result"), None)

    @staticmethod
    def _call_handler(handler: ResponseHandler, result: Any, error: SDKError | None) -> None:
        try:
            handler(result, error)
        except Exception:  # a handler bug must not stop the reader
            log.exception("response handler failed")

    # -- outbound ---------------------------------------------------------------
    def _next_id(self, method: str) -> str:
        self._counter += 1
        return f"sdk-{self._counter}-{method}"

    def send_request(self, method: str, params: Any, handler: ResponseHandler) -> str:
        """Send a request whose answer goes to `handler` (called at once if the engine is gone)."""
        request_id = self._next_id(method)
        if self.failure is not None:
            self._call_handler(handler, None, self.failure)
            return request_id
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        self._pending[request_id] = (method, handler)
        # If the pipe is already broken the engine is gone: the reader's EOF fails this
        # request with the exit code and stderr, which are not known yet at this point.
        self.process.write((jsonrpc.encode(body) + "\n").encode())
        return request_id

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result; JSON-RPC errors raise EngineError."""
        future: asyncio.Future[Any] = self._loop.create_future()

        def settle(result: Any, error: SDKError | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        request_id = self.send_request(method, params, settle)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(request_id, None)

    def _write(self, body: dict[str, Any]) -> None:
        data = (jsonrpc.encode(body) + "\n").encode()
        if threading.get_ident() == self._loop_thread:
            self.process.write(data)
        else:
            self._loop.call_soon_threadsafe(self.process.write, data)

    def respond(self, request_id: str, result: Any) -> None:
        self._write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: str, code: int, message: str) -> None:
        self._write({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    async def wait_closed(self) -> None:
        if self._reader is not None:
            await asyncio.shield(self._reader)


def ignore_event(_event: WireModel) -> None:
    """An event handler that drops everything."""


__all__ = ["Connection", "decode_event", "fast_content_part", "ignore_event"]
