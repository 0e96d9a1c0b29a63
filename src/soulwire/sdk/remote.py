"""A session on a `soulwire serve`, over WebSocket, through the same JSON-RPC peer as the
stdio SDK — and a connection that drops is re-opened from the last `seq` seen, so a turn's
events arrive exactly once however often the network fails.

    async with RemoteSession.attach("ws://127.0.0.1:7437/ws/sessions/ID", token) as session:
        async for event in session.prompt("fix the failing test"):
            print(event["type"], event["payload"])

`RemoteSession.create("ws://127.0.0.1:7437", token, work_dir="/src/app")` makes a new session
and attaches to it on one connection (`session.session_id` names it).

Events are the Wire event params (`{"seq", "type", "payload"}`, or `blob` for a large one).
Requests to the client (approvals, questions, tool calls) go to `on_request(type, payload)`;
its return value is the answer, and None leaves the request to its deadline's default.
The `websockets` library is imported when a session attaches."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlencode

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from soulwire.sdk.link import ws_options
from soulwire.wire.peer import DEFERRED, Method, Peer, PeerClosedError
from soulwire.wire.streams import CallbackStream

OnRequest = Callable[[str, dict[str, Any]], Awaitable[Any] | Any]
NOTICES = ("attached", "role/changed", "request/resolved", "approvals/rules/changed")


class RemoteSession:
    """One session on a server; re-attaches after a dropped connection."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        mode: Literal["controller", "observer"] = "controller",
        on_request: OnRequest | None = None,
        serve_options: dict[str, Any] | None = None,
        reconnect_delay_s: float = 0.2,
        external_tools: list[dict[str, Any]] | None = None,
        create: dict[str, str] | None = None,
        initialize: dict[str, Any] | None = None,
    ) -> None:
        self.url = url
        self._initialize_extra = initialize or {}
        """More `initialize` params (`budget`, `prices`, `capabilities` merged over ours)."""
        self.session_id: str | None = None
        """The session's id, from the server's `attached` notice."""
        self._create = create
        """Query fields of `/ws/sessions/new` (`work_dir`, `title`, `model`) until it exists."""
        self.mode = mode
        self.last_seq = 0
        self.epoch: str | None = None
        self.complete = True
        """False when a re-attach could not deliver the gap (reload the history over HTTP)."""
        self.reconnects = 0
        self.last_result: dict[str, Any] | None = None
        """The last prompt's answer (`{"status": …}`), once it came."""
        self.last_error: str | None = None
        """The last prompt's error answer (an engine may send it after `TurnEnd`: a turn that
        could not run, such as one with no model configured)."""
        self._answered = anyio.Event()
        self._token = token
        self._on_request = on_request
        # `batch`: the server may join the messages it has ready into one frame (fewer frames
        # and wake-ups on both sides when a turn streams); `_messages` splits them again.
        self._serve = {"seq": True, "batch": True, **(serve_options or {})}
        self._delay = reconnect_delay_s
        self._external_tools = external_tools
        """`{name, description, parameters}` entries registered in `initialize`; their
        `ToolCallRequest`s go to `on_request` like any request."""
        self._peer: Peer | None = None
        self._connected = anyio.Event()
        self._attached = anyio.Event()  # the first `attached` notice: the backlog's extent is known
        self._history_end = 0  # the server's last seq when we first attached: what came before us
        self._closing = False
        self._listener: MemoryObjectSendStream[dict[str, Any]] | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._socket: Any = None

    @classmethod
    @asynccontextmanager
    async def attach(cls, url: str, token: str, **options: Any) -> AsyncGenerator[RemoteSession]:
        """Attach (and keep attached) until the block ends."""
        session = cls(url, token, **options)
        async with session._running():
            yield session

    @classmethod
    @asynccontextmanager
    async def create(
        cls,
        server: str,
        token: str,
        *,
        work_dir: str | None = None,
        title: str | None = None,
        model: str | None = None,
        **options: Any,
    ) -> AsyncGenerator[RemoteSession]:
        """A new session on the server at `server` (`ws://HOST:PORT`), attached on the same
        connection until the block ends; its id is `session_id` once the block starts. A
        refused creation (a missing work dir, an unknown model) raises as a refused attach."""
        fields = {"work_dir": work_dir, "title": title, "model": model}
        create = {k: v for k, v in fields.items() if v is not None}
        session = cls(server.rstrip("/") + "/ws/sessions/new", token, create=create, **options)
        async with session._running():
            yield session

    @asynccontextmanager
    async def _running(self) -> AsyncGenerator[None]:
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self._supervise)
            await self._connected.wait()
            try:
                yield
            finally:
                await self.aclose()
                group.cancel_scope.cancel()

    # -- the connection ---------------------------------------------------------------
    def _query(self, *, again: bool) -> str:
        query: dict[str, Any] = {"token": self._token, "since_seq": self.last_seq, "mode": self.mode}
        if self.session_id is None and self._create is not None:
            if again:  # the connection dropped before the server named the new session
                raise ConnectionError("the connection closed before the new session was created")
            query.update(self._create)
        if self.epoch is not None:
            query["epoch"] = self.epoch
        if again and self.mode == "controller":
            query["take"] = 1  # our old connection may still count as the controller
        return f"{self.url}?{urlencode(query)}"

    async def _supervise(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus

        first = True
        while not self._closing:
            try:
                address = self._query(again=not first)
                socket = await connect(address, **ws_options(address))
            except (OSError, InvalidStatus) as exc:
                # Once attached, a refusal for a while is a replica on its way out (draining,
                # its store down: 503) or one not up yet: try again, as for a refused connection.
                if first or (isinstance(exc, InvalidStatus) and exc.response.status_code < 500):
                    raise
                await anyio.sleep(self._delay)
                continue
            self._socket = socket
            stream = CallbackStream(
                _messages(socket.recv), socket.send, socket.close, closed_errors=(ConnectionClosed,)
            )
            notices: dict[str, Callable[[Any], None]] = {name: self._on_notice for name in NOTICES}
            notices["event"] = self._on_event
            async with Peer(
                stream, methods={"request": Method(self._on_server_request)}, notifications=notices
            ) as peer:
                peer.send_request("initialize", self._initialize_params(), lambda _r, _e: None)
                self._peer = peer
                if self.session_id is not None or self._create is None:
                    self._connected.set()  # (a new session's waits for `attached`, which names it)
                await peer.input_closed.wait()
                self._peer = None
            first = False
            if not self._closing:
                self.reconnects += 1
                await anyio.sleep(self._delay)

    def _initialize_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "protocol_version": "1.10",
            "client": {"name": "soulwire-sdk-remote", "version": "1"},
            "capabilities": {"supports_question": self._on_request is not None},
            "serve": self._serve,
        }
        if self._external_tools:
            params["external_tools"] = self._external_tools
        extra = dict(self._initialize_extra)
        params["capabilities"].update(extra.pop("capabilities", {}))
        params.update(extra)
        return params

    def _seen(self, params: Any) -> bool:
        """Record the message's seq; False for one already seen (never delivered twice)."""
        seq = params.get("seq") if isinstance(params, dict) else None
        if not isinstance(seq, int):
            return True
        if seq <= self.last_seq:
            return False
        self.last_seq = seq
        return True

    def _on_notice(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        if "epoch" in params and "complete" in params:  # `attached`
            named = params.get("session_id")
            if isinstance(named, str) and self.session_id is None:
                self.session_id = named
                if self._create is not None:  # re-attach to it, never create another
                    self.url = self.url.removesuffix("/new") + "/" + named
                    self._connected.set()
            self.epoch = params["epoch"]
            self.complete = bool(params["complete"])
            if not self.complete:
                self.last_seq = int(params.get("last_seq") or 0)
            if not self._attached.is_set():
                self._history_end = int(params.get("last_seq") or 0)
                self._attached.set()
            return
        self._seen(params)

    def _on_event(self, params: Any) -> None:
        if not self._seen(params) or self._listener is None:
            return
        seq = params.get("seq") if isinstance(params, dict) else None
        if isinstance(seq, int) and seq <= self._history_end:
            return  # the replayed backlog (an earlier turn's TurnEnd must not end this prompt)
        self._listener.send_nowait(params)

    def _on_server_request(self, params: Any, request_id: str) -> Any:
        resent = isinstance(params, dict) and params.get("resent")
        if not self._seen(params) and not resent:
            return DEFERRED  # a copy of one being answered already
        if self._on_request is None or not isinstance(params, dict):
            return DEFERRED  # nobody answers here: the request's deadline decides
        return self._answer(params)

    async def _answer(self, params: dict[str, Any]) -> Any:
        answer = self._on_request(str(params.get("type")), params.get("payload") or {})  # type: ignore[misc]
        if isinstance(answer, Awaitable):
            answer = await answer
        return DEFERRED if answer is None else answer

    async def _current_peer(self) -> Peer:
        while self._peer is None or self._peer.closed:
            if self._closing:
                raise PeerClosedError("the session is closed")
            await anyio.sleep(0.01)
        return self._peer

    # -- what a client does -----------------------------------------------------------
    async def prompt(self, user_input: Any) -> AsyncGenerator[dict[str, Any]]:
        """Run a turn; yields its events until TurnEnd, across reconnects."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        self._listener = send
        self.last_result, self.last_error = None, None
        answered = self._answered = anyio.Event()

        def settle(result: Any, error: BaseException | None) -> None:
            if error is None and isinstance(result, dict):
                self.last_result = result
            elif error is not None and not isinstance(error, PeerClosedError):
                self.last_error = str(error)
                with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    send.send_nowait({"type": "_error", "payload": {"message": str(error)}})
            answered.set()

        peer = await self._current_peer()
        await self._attached.wait()
        peer.send_request("prompt", {"user_input": user_input}, settle)
        try:
            async with receive:
                async for event in receive:
                    if event.get("type") == "_error":
                        raise RuntimeError(event["payload"]["message"])
                    yield event
                    if event.get("type") == "TurnEnd":
                        return
        finally:
            self._listener = None
            send.close()  # (an answer after the turn's end has nowhere to go)

    async def wait_answer(self) -> None:
        """Until the last prompt's answer (`last_result` or `last_error`) is in: `TurnEnd`
        can come before it."""
        await self._answered.wait()

    async def call(self, method: str, params: Any = None) -> Any:
        """Any other method (cancel, steer, attach, requests/pending, approvals/rules/…)."""
        return await (await self._current_peer()).request(method, params)

    def drop_connection(self) -> None:
        """Break the current connection abruptly (as a network failure would; for tests)."""
        if self._socket is not None:
            self._socket.transport.abort()

    async def aclose(self) -> None:
        self._closing = True
        if self._socket is not None:
            await self._socket.close()

    async def __aenter__(self) -> RemoteSession:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _messages(receive: Callable[[], Awaitable[str | bytes]]) -> Callable[[], Awaitable[str | bytes]]:
    """One message per call from frames that may hold several, newline-separated (negotiated
    `batch`); a frame of one message passes through as it is."""
    pending: deque[str | bytes] = deque()

    async def next_message() -> str | bytes:
        while not pending:
            frame = await receive()
            text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
            if "\n" not in text.rstrip("\n"):
                return frame
            pending.extend(line for line in text.split("\n") if line)
        return pending.popleft()

    return next_message


__all__ = ["RemoteSession"]
