"""The engine as one session sees it: its process and the JSON-RPC peer that talks to it.

Everything JSON-RPC is the shared `soulwire.wire.peer.Peer`; this module only routes what it
delivers: `event` notifications decoded into `soulwire.wire` models (streamed text and
thinking through a fast lane that skips the full JSON parse, the hot path), the engine's
`request`s passed up, and answers turned into the SDK's exceptions.

Nothing here raises on unexpected input: unknown event types and malformed lines are
delivered raw or logged, because a newer engine must never break an older SDK."""

from __future__ import annotations

import logging
from collections.abc import Callable
from json import decoder as json_decoder
from types import TracebackType
from typing import Any, Protocol

import anyio

from soulwire.sdk.errors import SDKError, engine_error
from soulwire.sdk.jsonutil import as_object
from soulwire.wire import jsonrpc
from soulwire.wire.jsonrpc import RPCError
from soulwire.wire.messages import UnknownMessage, parse_envelope
from soulwire.wire.peer import DEFERRED, Method, Peer
from soulwire.wire.streams import MessageStream
from soulwire.wire.types import TextPart, ThinkPart, WireModel

log = logging.getLogger("soulwire.sdk")

ResponseHandler = Callable[[Any, SDKError | None], None]
"""Called once with (result, None) or (None, error)."""
EventHandler = Callable[[WireModel], None]
RequestHandler = Callable[[str, str, dict[str, Any]], None]
"""(JSON-RPC id, request type, payload)."""
EXIT_WAIT_S = 2.0
"""After stdout closes, how long to wait for the exit code that explains it."""

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


class EngineLink(Protocol):
    """What a session needs of its engine: a spawned process (`EngineProcess`) or a session on
    a server (`sdk.link.RemoteLink`)."""

    @property
    def stream(self) -> MessageStream: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def returncode(self) -> int | None: ...
    def stderr_tail(self) -> str: ...
    def exited_error(self, during: str = "") -> SDKError: ...
    async def pump_stderr(self) -> None: ...
    async def wait(self) -> int: ...
    async def close(self, timeout: float) -> int | None: ...


class Engine:
    """A running engine and its peer. `async with` it (in the task that will also leave it):
    that runs the peer, the stderr pump and the exit watcher. `respond*` may be called from
    any thread (the sync wrapper does)."""

    def __init__(self, process: EngineLink) -> None:
        self.process = process
        self.on_part: EventHandler = _ignore_event
        """Streamed text/think chunks (the hot path): bound straight to the running turn."""
        self.on_event: EventHandler = _ignore_event
        """Every other event."""
        self.on_text: Callable[[str], None] | None = None
        """When set, streamed text chunks go here as plain strings (no TextPart is made)."""
        self.on_request: RequestHandler | None = None
        self.failure: SDKError | None = None
        """Set once the engine is gone; every later call fails with it."""
        self.closing_error: SDKError | None = None
        """What to report instead of "the engine exited" when we closed it on purpose."""
        self.closed = anyio.Event()
        self.peer = Peer(
            process.stream,
            methods={"request": Method(self._on_request)},
            notifications={"event": self._on_event},
            fast_lane=self._fast_lane,
            id_prefix="sdk-",
            skip_blank_lines=True,
        )

    async def __aenter__(self) -> Engine:
        await self.peer.__aenter__()
        self.peer.start_soon(self.process.pump_stderr)
        self.peer.start_soon(self._watch_exit)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self.peer.__aexit__(exc_type, exc, tb)

    @property
    def alive(self) -> bool:
        return self.failure is None

    def start_soon(self, func: Callable[..., Any], *args: Any) -> None:
        """Run a task for as long as the engine link lives."""
        self.peer.start_soon(func, *args)

    # -- inbound ----------------------------------------------------------------
    async def _watch_exit(self) -> None:
        await self.peer.input_closed.wait()
        with anyio.move_on_after(EXIT_WAIT_S):  # stdout closed: the exit code usually follows
            await self.process.wait()
        self.fail(self.closing_error or self.process.exited_error())

    def fail(self, error: SDKError) -> None:
        """Mark the engine gone: every pending and later request fails with `error`."""
        if self.failure is not None:
            return
        self.failure = error
        self.peer.close(error)
        self.closed.set()

    def _fast_lane(self, line: bytes) -> bool:
        on_text = self.on_text
        if on_text is not None and line.startswith(_TEXT_HEAD) and line.endswith(_TEXT_TAIL):
            text = _string_literal(line, len(_TEXT_HEAD), len(line) - len(_TEXT_TAIL))
            if text is not None:
                on_text(text)
                return True
        part = fast_content_part(line)
        if part is None:
            return False
        self.on_part(part)
        return True

    def _on_event(self, params: Any) -> None:
        obj = as_object(params)
        if obj is not None:
            self.on_event(decode_event(obj.get("type"), obj.get("payload")))

    def _on_request(self, params: Any, request_id: str) -> Any:
        obj = as_object(params)
        if obj is None:
            log.warning("ignoring a malformed request: %r", params)
            raise RPCError(jsonrpc.INVALID_PARAMS, "malformed request")
        if self.on_request is None:
            raise RPCError(jsonrpc.METHOD_NOT_FOUND, "no request handler")
        type_ = obj.get("type")
        self.on_request(
            request_id, type_ if isinstance(type_, str) else "", as_object(obj.get("payload")) or {}
        )
        return DEFERRED

    # -- outbound ---------------------------------------------------------------
    def _sdk_error(self, error: BaseException | None, method: str) -> SDKError | None:
        if error is None:
            return None
        if isinstance(error, RPCError):
            return engine_error(error.to_json(), method=method)
        if isinstance(error, SDKError):
            return error
        return self.failure or self.closing_error or self.process.exited_error()

    def send_request(self, method: str, params: Any, handler: ResponseHandler) -> str:
        """Send a request whose answer goes to `handler` (called at once if the engine is gone).
        If the pipe is already broken the engine is gone: the exit watcher fails the request
        with the exit code and stderr, which are not known yet at this point."""

        def answer(result: Any, error: BaseException | None) -> None:
            handler(result, self._sdk_error(error, method))

        return self.peer.send_request(method, params, answer)

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result; JSON-RPC errors raise EngineError and a
        timeout raises TimeoutError."""
        done = anyio.Event()
        outcome: list[Any] = [None, None]

        def settle(result: Any, error: SDKError | None) -> None:
            outcome[0], outcome[1] = result, error
            done.set()

        request_id = self.send_request(method, params, settle)
        try:
            with anyio.fail_after(timeout):
                await done.wait()
        finally:
            self.peer.forget(request_id)
        if outcome[1] is not None:
            raise outcome[1]
        return outcome[0]

    def respond(self, request_id: str, result: Any) -> None:
        self.peer.respond(request_id, result)

    def respond_error(self, request_id: str, code: int, message: str) -> None:
        self.peer.respond_error(request_id, RPCError(code, message))


def ignore_event(_event: WireModel) -> None:
    """An event handler that drops everything."""


__all__ = ["Engine", "EngineLink", "decode_event", "fast_content_part", "ignore_event"]
