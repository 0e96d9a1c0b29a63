"""A session on a `soulwire serve` as the SDK's engine link: what `Session.attach(url, token)`
drives instead of a spawned process, under the same `Engine` and JSON-RPC peer.

The link's stream survives dropped connections: it re-opens the WebSocket from the last
`seq` it delivered (taking the controller role back, with the same `client_key` so answers
to requests sent before the drop arrive on the new connection), drops anything numbered at
or below that `seq` (nothing is delivered twice), and answers a request the server sends
again (`resent`) with the answer it already gave, if it gave one (and delivers one it never
saw). A prompt still unanswered is named when re-attaching (`prompt_id`): a replica that took
the session over after its owner died answers it when the turn it continued ends (or says it
was interrupted). The peer above never notices. The `websockets` library is imported when the
link connects."""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict, deque
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

import anyio

from soulwire.hosts import is_loopback
from soulwire.sdk.errors import EngineExitedError

_SEQ_AT = b'"params":{"seq":'
MAX_ANSWERS = 256
"""Answers remembered for requests the server may send again after a reconnect."""
NORMAL_CLOSE = (1000, 1001)
REFUSED = 4409


class ConnectionLostError(EngineExitedError):
    """The server could not be reached again within the reconnect timeout (or refused us)."""

    def __init__(self, detail: str) -> None:
        super().__init__(None, detail, during="")
        self.detail = detail

    def __str__(self) -> str:
        return f"the connection to the server was lost: {self.detail}"


def ws_options(url: str) -> dict[str, Any]:
    """`websockets` connect options for a server at `url`: no compression (small JSON events
    cost more CPU to deflate than they save), no size cap, and no proxy for a loopback server
    (a proxy cannot reach our 127.0.0.1, and looking one up reads the whole environment:
    a tenth of a fleet driver's CPU per connection, measured)."""
    options: dict[str, Any] = {"max_size": None, "compression": None}
    if is_loopback(urlsplit(url).hostname or ""):
        options["proxy"] = None
    return options


def seq_of(line: bytes) -> int | None:
    """The `seq` a message carries (the server puts it first inside params), if any."""
    at = line.find(_SEQ_AT, 0, 64)
    if at < 0:
        return None
    start = at + len(_SEQ_AT)
    end = start
    while end < len(line) and 48 <= line[end] <= 57:
        end += 1
    return int(line[start:end]) if end > start else None


class ReconnectingStream:
    """The MessageStream of one attached session, re-opened after every unexpected drop."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        mode: Literal["controller", "observer"],
        take: bool,
        reconnect_timeout_s: float,
        reconnect_delay_s: float = 0.1,
    ) -> None:
        self.url = url
        self.mode = mode
        self.last_seq = 0
        self.epoch: str | None = None
        self.complete = True
        """False after an attach that could not deliver the gap (reload the history)."""
        self.reconnects = 0
        self.attached: dict[str, Any] = {}
        """The last `attached` notice (session id, epoch, mode, what was loaded)."""
        self._token = token
        self._take = take
        self._key = secrets.token_urlsafe(18)
        self._timeout = reconnect_timeout_s
        self._delay = reconnect_delay_s
        self._socket: Any = None
        self._ready = anyio.Event()
        self._lines: deque[bytes] = deque()
        self._outbox: deque[bytes] = deque()
        self._answers: OrderedDict[str, bytes] = OrderedDict()
        self._delivered: OrderedDict[str, None] = OrderedDict()
        """Ids of the requests delivered to the peer (one sent again that is not among them
        was never seen here: it is delivered)."""
        self._prompt: str | None = None
        """The id of our `prompt` not answered yet (sent as `prompt_id` when re-attaching: a
        replica that took the session over answers it; server/takeover.py)."""
        self._closing = False
        self._broken = False
        self.ended = anyio.Event()
        self.failure: str | None = None

    # -- connecting ---------------------------------------------------------------------
    def _address(self, *, again: bool) -> str:
        query: dict[str, Any] = {
            "token": self._token,
            "since_seq": self.last_seq,
            "mode": self.mode,
            "client_key": self._key,
        }
        if self.epoch is not None:
            query["epoch"] = self.epoch
        if again and self._prompt is not None:
            query["prompt_id"] = self._prompt
        if self.mode == "controller" and (again or self._take):
            query["take"] = 1  # our old connection may still count as the controller
        return f"{self.url}?{urlencode(query)}"

    async def connect(self, *, again: bool = False) -> None:
        """Open a connection (the first raises what went wrong; later ones retry until the
        reconnect timeout, then the stream ends with `failure` set)."""
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus

        if not again:
            address = self._address(again=False)
            self._socket = await connect(address, **ws_options(address), ping_interval=None)
            self._ready.set()
            return
        with anyio.move_on_after(self._timeout):
            while not self._closing:
                try:
                    address = self._address(again=True)
                    self._socket = await connect(address, **ws_options(address), ping_interval=None)
                except InvalidStatus as exc:
                    status = exc.response.status_code
                    if status < 500:
                        self.failure = f"the server refused to re-attach (HTTP {status})"
                        return
                    # A replica on its way out (draining, its store down) or not up yet:
                    # retry, as for a refused connection, until the reconnect timeout.
                    await anyio.sleep(self._delay)
                    continue
                except (OSError, InvalidHandshake, TimeoutError):
                    await anyio.sleep(self._delay)
                    continue
                self.reconnects += 1
                self._ready.set()
                return
        self.failure = self.failure or f"no connection within {self._timeout} s"

    async def _reconnect(self) -> bool:
        self._ready = anyio.Event()
        self._socket = None
        await self.connect(again=True)
        return self._socket is not None

    # -- receiving ----------------------------------------------------------------------
    async def receive(self) -> bytes:
        from websockets.exceptions import ConnectionClosed

        while True:
            while self._lines:
                line = self._accept(self._lines.popleft())
                if line is not None:
                    return line
            if self._closing or self.failure is not None:
                self.ended.set()
                raise anyio.EndOfStream
            socket = self._socket
            try:
                frame = await socket.recv()
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else None
                if self._closing or code in NORMAL_CLOSE:
                    self.ended.set()
                    raise anyio.EndOfStream from None
                if code == REFUSED:
                    self.failure = exc.rcvd.reason if exc.rcvd is not None else "attach refused"
                    continue
                if self._socket is socket and not await self._reconnect():
                    continue
                continue
            data = frame.encode() if isinstance(frame, str) else frame
            self._lines.extend(line for line in data.split(b"\n") if line.strip())

    def _accept(self, line: bytes) -> bytes | None:
        """The line to deliver, or None for one already delivered or consumed here."""
        seq = seq_of(line)
        if seq is not None:
            if seq <= self.last_seq:
                return self._sent_again(line)
            self.last_seq = seq
            return self._delivering(line)
        if line.startswith(b'{"jsonrpc":"2.0","method":"attached"'):
            params = json.loads(line).get("params") or {}
            self.attached = params
            self.epoch = params.get("epoch")
            if not params.get("complete", True):
                self.complete = False
                self.last_seq = int(params.get("last_seq") or 0)
            return None
        if (
            self._prompt is not None
            and b'"method"' not in line[:40]
            and json.loads(line).get("id") == self._prompt
        ):
            self._prompt = None  # answered
        return self._delivering(line)

    def _delivering(self, line: bytes) -> bytes:
        """`line`, delivered: a request's id is remembered."""
        if b'"method":"request"' in line[:80]:
            request_id = json.loads(line).get("id")
            if isinstance(request_id, str):
                self._delivered[request_id] = None
                while len(self._delivered) > MAX_ANSWERS:
                    self._delivered.popitem(last=False)
        return line

    def _sent_again(self, line: bytes) -> bytes | None:
        """A request sent again after a reconnect: repeat the answer we gave (it may have
        been lost with the old connection); one delivered and not answered yet is being
        answered; one never delivered (asked again by a replica that took the session over,
        or sent just as the old connection died) is delivered now."""
        if b'"resent":true' not in line:
            return None
        request_id = json.loads(line).get("id")
        if not isinstance(request_id, str):
            return None
        answer = self._answers.get(request_id)
        if answer is not None:
            self._outbox.append(answer)
            return None
        return None if request_id in self._delivered else self._delivering(line)

    # -- sending ------------------------------------------------------------------------
    @property
    def broken(self) -> bool:
        return self._broken

    def send(self, message: bytes) -> None:
        if self._broken:
            return
        if b'"method"' not in message[:40] and b'"id"' in message:
            request_id = json.loads(message).get("id")
            if isinstance(request_id, str):
                self._answers[request_id] = message
                while len(self._answers) > MAX_ANSWERS:
                    self._answers.popitem(last=False)
        elif b'"method":"prompt"' in message[:80]:
            request_id = json.loads(message).get("id")
            self._prompt = request_id if isinstance(request_id, str) else None
        self._outbox.append(message)

    async def drain(self) -> None:
        from websockets.exceptions import ConnectionClosed

        outbox = self._outbox
        while outbox and not self._broken:
            if self._socket is None:
                await self._ready.wait()  # the reader is reconnecting
                if self.failure is not None or self._socket is None:
                    self._broken = True
                    outbox.clear()
                    return
                continue
            message, socket = outbox[0], self._socket
            try:
                await socket.send(message.rstrip(b"\n").decode("utf-8", "replace"))
            except (ConnectionClosed, OSError):
                while self._socket is socket and not self._closing and self.failure is None:
                    await anyio.sleep(0.01)  # the reader notices the drop and reconnects
                continue  # resent on the new connection
            outbox.popleft()

    async def aclose(self) -> None:
        self._closing = True
        self._broken = True
        self._ready.set()
        socket = self._socket
        if socket is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                await socket.close()
        self.ended.set()

    def drop(self) -> None:
        """Break the connection abruptly, as a network failure would (for tests)."""
        if self._socket is not None:
            self._socket.transport.abort()


class RemoteLink:
    """What `Engine` needs of an engine process, for a session on a server."""

    def __init__(self, stream: ReconnectingStream) -> None:
        self.stream = stream

    @property
    def pid(self) -> int | None:
        return None

    @property
    def returncode(self) -> int | None:
        return 0 if self.stream.ended.is_set() else None

    def stderr_tail(self) -> str:
        return ""

    def exited_error(self, during: str = "") -> EngineExitedError:
        if self.stream.failure is not None:
            return ConnectionLostError(self.stream.failure)
        return EngineExitedError(0, "the server closed the session", during=during)

    async def pump_stderr(self) -> None:
        return None

    async def wait(self) -> int:
        await self.stream.ended.wait()
        return 0

    async def close(self, timeout: float) -> int | None:
        del timeout  # closing a socket is bounded by itself
        await self.stream.aclose()
        return 0


__all__ = ["ConnectionLostError", "ReconnectingStream", "RemoteLink", "seq_of"]
