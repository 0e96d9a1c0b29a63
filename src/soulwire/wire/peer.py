"""One JSON-RPC 2.0 peer for every surface: the engine's stdio server, the server's
WebSocket sessions and the SDK all talk through it.

The peer reads messages from a `MessageStream` and answers requests from a method table
(params validated strictly against typed models, so a wrongly typed field is a -32602 that
names it); it sends requests of its own and matches their answers by id; notifications go to
their handlers. Bad input of any kind gets the JSON-RPC error the spec gives and the peer
keeps serving. Handlers run in the peer's task group, so nothing outlives it:

    async with Peer(stream, methods={"ping": Method(ping)}) as peer:
        await peer.input_closed.wait()
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
from pydantic import BaseModel, ValidationError

from soulwire.wire.jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    RPCError,
    WireError,
    classify,
    encode,
    error_line,
    internal_error,
    invalid_params,
    response_line,
)
from soulwire.wire.streams import MessageStream

log = logging.getLogger("soulwire.wire")

DEFERRED: Any = object()
"""Returned by a handler that answers later with `Peer.respond` / `respond_error`."""

Answer = Callable[[Any, BaseException | None], None]
"""Called once with (result, None), or (None, error): an RPCError the other side answered
with, or PeerClosedError (or the error given to `close`) when no answer can come."""


class PeerClosedError(WireError):
    """The connection ended before the answer came."""


class Method:
    """One entry of a method table. `handler(params, request_id)` returns the result, an
    awaitable of it (run in the peer's task group), or DEFERRED; it raises RPCError to
    answer with an error. `params` is the model params are validated against (strictly),
    or a function that imports and returns it at the first call (a rarely used method's
    models then cost nothing at start-up); without one the handler gets them raw. (A plain
    class: a dataclass costs a thousand calls at import, on every engine's start-up path.)"""

    __slots__ = ("_params", "handler")

    def __init__(
        self,
        handler: Callable[[Any, str], Any],
        params: type[BaseModel] | Callable[[], type[BaseModel]] | None = None,
    ) -> None:
        self.handler = handler
        self._params = params

    @property
    def params(self) -> type[BaseModel] | None:
        """The params model (loaded now if it was given as a function)."""
        params = self._params
        if params is not None and not isinstance(params, type):
            params = self._params = params()
        return params


def validation_error(method: str, exc: ValidationError) -> RPCError:
    """-32602 naming the first field that does not fit."""
    first = exc.errors(include_url=False)[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or None
    detail = f"{field}: {first.get('msg', 'invalid')}" if field else str(first.get("msg", "invalid"))
    return invalid_params(method, detail, field)


class Peer:
    """Both sides of one JSON-RPC connection over a message stream."""

    def __init__(
        self,
        stream: MessageStream,
        *,
        methods: Mapping[str, Method] | None = None,
        notifications: Mapping[str, Callable[[Any], None]] | None = None,
        fast_lane: Callable[[bytes], bool] | None = None,
        error_for: Callable[[Exception], RPCError] = internal_error,
        id_prefix: str = "",
        skip_blank_lines: bool = False,
    ) -> None:
        self.stream = stream
        self.methods: dict[str, Method] = dict(methods or {})
        self.notifications: dict[str, Callable[[Any], None]] = dict(notifications or {})
        self._fast_lane = fast_lane
        self._error_for = error_for
        self._id_prefix = id_prefix
        self._skip_blank = skip_blank_lines
        self._counter = 0
        self._pending: dict[str, Answer] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self._wake = anyio.Event()
        self._wake_set = False
        self._kick: Callable[[], None] = self._wake_kick
        self._closed_with: BaseException | None = None
        self._token: Any = None
        self._thread = 0
        self.input_closed = anyio.Event()
        """Set when the other side stopped sending (end of stream)."""

    # -- lifecycle --------------------------------------------------------------------
    async def __aenter__(self) -> Peer:
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()
        self._kick = self._flush_soon_kick() or self._wake_kick
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        group.start_soon(self._write_loop)
        group.start_soon(self._read_loop)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        group = self._group
        assert group is not None
        group.cancel_scope.cancel()
        try:
            return await group.__aexit__(exc_type, exc, tb)
        finally:
            self._group = None
            self.close(self._closed_with or PeerClosedError("the connection was closed"))
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.stream.drain()

    def start_soon(self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run a task in the peer's task group (it is cancelled when the peer exits)."""
        if self._group is None:
            raise RuntimeError("the peer is not running")
        self._group.start_soon(func, *args)

    @property
    def running(self) -> bool:
        return self._group is not None

    @property
    def closed(self) -> bool:
        """No more answers can come: `close` was called or the peer stopped."""
        return self._closed_with is not None

    def close(self, error: BaseException | None = None) -> None:
        """Fail every request still waiting for an answer (and every later one) with `error`."""
        if self._closed_with is None:
            self._closed_with = error or PeerClosedError("the connection was closed")
        pending, self._pending = self._pending, {}
        for answer in pending.values():
            self._settle(answer, None, self._closed_with)

    # -- reading ----------------------------------------------------------------------
    async def _read_loop(self) -> None:
        try:
            while True:
                try:
                    line = await self.stream.receive()
                except anyio.EndOfStream:
                    return
                self.handle(line)
        finally:
            self.input_closed.set()

    def handle(self, line: bytes) -> None:
        """Handle one inbound message."""
        if self._fast_lane is not None and self._fast_lane(line):
            return
        if self._skip_blank and not line.strip():
            return
        inbound = classify(line)
        kind = inbound.kind
        if kind == "request":
            assert inbound.method is not None
            self._on_request(inbound.id, inbound.method, inbound.params)
        elif kind == "notification":
            handler = self.notifications.get(inbound.method or "")
            if handler is not None:
                try:
                    handler(inbound.params)
                except Exception:  # a handler bug must not stop the reader
                    log.exception("notification handler failed: %s", inbound.method)
        elif kind == "response":
            self._on_response(inbound.id, inbound.raw)
        elif kind == "invalid":
            assert inbound.error is not None
            self.respond_error(None, inbound.error)

    def _on_request(self, request_id: str, name: str, params: Any) -> None:
        method = self.methods.get(name)
        if method is None:
            self.respond_error(request_id, RPCError(METHOD_NOT_FOUND, f"Unexpected method received: {name}"))
            return
        try:
            model = method.params
            if model is not None:
                try:
                    params = model.model_validate({} if params is None else params, strict=True)
                except ValidationError as exc:
                    raise validation_error(name, exc) from None
            result = method.handler(params, request_id)
        except RPCError as error:
            self.respond_error(request_id, error)
            return
        except Exception as exc:  # a bug must not take the peer down
            self.respond_error(request_id, self._failed(exc, name))
            return
        if result is DEFERRED:
            return
        if inspect.isawaitable(result):
            self.start_soon(self._answer_later, request_id, result)
        else:
            self.respond(request_id, result)

    async def _answer_later(self, request_id: str, pending: Awaitable[Any]) -> None:
        try:
            result = await pending
        except RPCError as error:
            self.respond_error(request_id, error)
        except Exception as exc:
            self.respond_error(request_id, self._failed(exc, "a deferred request"))
        else:
            if result is not DEFERRED:
                self.respond(request_id, result)

    def _failed(self, exc: Exception, what: str) -> RPCError:
        """The error a handler's exception is answered with. Only an unexpected one (mapped to
        an internal error) is logged with its traceback; an expected one, such as a provider
        error ending a turn, is the client's answer and a debug line (a person reading the
        engine's stderr must not see a traceback for a 500 from the provider)."""
        error = self._error_for(exc)
        if error.code == INTERNAL_ERROR:
            log.exception("handler of %s failed", what)
        else:
            log.debug("handler of %s answered %d", what, error.code, exc_info=exc)
        return error

    def _on_response(self, request_id: Any, raw: dict[str, Any]) -> None:
        answer = self._pending.pop(request_id, None) if isinstance(request_id, str) else None
        if answer is None:
            return  # an answer to nothing we asked (or to a replayed request): ignored
        error = raw.get("error")
        if error is not None:
            self._settle(answer, None, remote_error(error))
        else:
            self._settle(answer, raw.get("result"), None)

    @staticmethod
    def _settle(answer: Answer, result: Any, error: BaseException | None) -> None:
        try:
            answer(result, error)
        except Exception:  # an answer handler's bug must not stop the reader
            log.exception("answer handler failed")

    # -- writing ----------------------------------------------------------------------
    def send(self, line: bytes) -> None:
        """Send one encoded message (a line ending in a newline): the hot path for events."""
        self.stream.send(line)
        if not self._wake_set:
            self._wake_set = True
            self._kick()

    def _flush_soon_kick(self) -> Callable[[], None] | None:
        """On asyncio, a stream that writes synchronously (stdio) is flushed by a plain
        callback at the end of the current loop pass: a batch then costs one callback, where
        waking the writer task costs an event and a task switch (measured: ~5% of a streamed
        chunk's instructions). Other streams and backends use the writer task."""
        flush = getattr(self.stream, "flush", None)
        if not callable(flush):
            return None
        try:
            import asyncio

            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio)
            return None

        def flush_now() -> None:
            self._wake_set = False
            flush()

        def kick() -> None:
            loop.call_soon(flush_now)

        return kick

    def _wake_kick(self) -> None:
        self._wake.set()

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            self._wake_set = False
            await self.stream.drain()

    def _on_loop(self, func: Callable[..., None], *args: Any) -> None:
        """Run `func` on the peer's event loop, from whatever thread calls."""
        if self._token is None or threading.get_ident() == self._thread:
            func(*args)
        else:
            from anyio.from_thread import run_sync  # rare: only answers from other threads

            run_sync(func, *args, token=self._token)

    def notify(self, method: str, params: Any = None) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        self._on_loop(self.send, (encode(body) + "\n").encode())

    def respond(self, request_id: Any, result: Any) -> None:
        """Answer a request (callable from any thread)."""
        self._on_loop(self.send, response_line(request_id, result))

    def respond_error(self, request_id: Any, error: RPCError) -> None:
        """Answer a request with an error (callable from any thread)."""
        self._on_loop(self.send, error_line(request_id, error))

    def send_request(self, method: str, params: Any, answer: Answer, *, request_id: str | None = None) -> str:
        """Send a request now; `answer` gets its result or error later (at once when the
        connection is closed)."""
        if request_id is None:
            self._counter += 1
            request_id = f"{self._id_prefix}{self._counter}-{method}"
        if self._closed_with is not None:
            self._settle(answer, None, self._closed_with)
            return request_id
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
        if params is not None:
            body["params"] = params
        self._pending[request_id] = answer
        self.send((encode(body) + "\n").encode())
        return request_id

    async def request(self, method: str, params: Any = None, *, request_id: str | None = None) -> Any:
        """Send a request and wait for its result; raises RPCError (the other side's error)
        or PeerClosedError. Cancelling the wait forgets the request."""
        done = anyio.Event()
        outcome: list[Any] = [None, None]

        def settle(result: Any, error: BaseException | None) -> None:
            outcome[0], outcome[1] = result, error
            done.set()

        sent_id = self.send_request(method, params, settle, request_id=request_id)
        try:
            await done.wait()
        finally:
            self._pending.pop(sent_id, None)
        if outcome[1] is not None:
            raise outcome[1]
        return outcome[0]

    def forget(self, request_id: str) -> None:
        """Stop waiting for the answer to `request_id`."""
        self._pending.pop(request_id, None)


def remote_error(error: Any) -> RPCError:
    """The RPCError for an `error` member the other side sent (tolerating malformed ones)."""
    if isinstance(error, dict):
        raw: dict[str, Any] = error
        code = raw.get("code")
        message = raw.get("message")
        return RPCError(
            code if isinstance(code, int) else INTERNAL_ERROR,
            message if isinstance(message, str) else repr(raw),
            raw.get("data"),
        )
    return RPCError(INTERNAL_ERROR, f"malformed error: {error!r}")


__all__ = ["DEFERRED", "Answer", "Method", "Peer", "PeerClosedError", "remote_error", "validation_error"]
