"""ACP over WebSocket: `/acp` serves the Agent Client Protocol (JSON-RPC text frames, one
message per frame, as the transport RFD and the SDK's WebSocket stream have it) over this
server's sessions. Behind the same guard as everything else (token, Host, Origin); each ACP
session is a Wire client of the session's hub, so it shares roles, approvals and observers
with the web UI and the SDK: the first connection of a session controls it, later ones
observe, and an observer token makes every connection an observer."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

from soulwire.runtime.model_switch import model_info
from soulwire.server.access import may_see, refusal_to_drive, user_of, visible
from soulwire.server.client import Client
from soulwire.server.hub import LiveSession
from soulwire.server.messages import AttachParams
from soulwire.server.registry import SessionError, SessionRegistry
from soulwire.server.users import User
from soulwire.ui.acp.handshake import model_capabilities
from soulwire.ui.acp.remote import RemoteAgent
from soulwire.ui.acp.routes import agent_connection
from soulwire.ui.acp.transport import Deferrals, inbound
from soulwire.wire.session_settings import SandboxMode

log = logging.getLogger("soulwire.server")


class HubLink:
    """A `WireLink` into a live session: a hub client whose lines are read in process."""

    def __init__(self, live: LiveSession, client: Client, work_dir: str, plan_mode: bool) -> None:
        self.live = live
        self.client = client
        self.session_id = live.id
        self.work_dir = Path(work_dir)
        self.plan_mode = plan_mode
        self.model = model_info(live.runtime)
        sandbox = live.runtime.soul.sandbox
        self.sandbox = sandbox.mode if sandbox is not None else "off"
        self._pending: list[bytes] = []

    def send(self, message: dict[str, Any]) -> None:
        self.live.handle(self.client, json.dumps(message, ensure_ascii=False))

    async def receive(self) -> dict[str, Any] | None:
        while not self._pending:
            batch = await self.client.next_batch()
            if batch is None:
                return None
            self._pending = [line for item in batch for line in item.splitlines() if line.strip()]
        line = self._pending.pop(0)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}

    async def close(self) -> None:
        self.live.detach(self.client)
        self.client.close(1000, "")


class RegistryHost:
    """The `SessionHost` of a server: its registry, clients numbered like its sockets'."""

    def __init__(
        self,
        registry: SessionRegistry,
        numbers: Any,
        settings: Any,
        *,
        read_only: bool,
        user: User | None = None,
    ) -> None:
        self._registry = registry
        self._numbers = numbers
        self._settings = settings
        self._read_only = read_only
        self._user = user
        """The named user of the connection (server/access.py decides what they see)."""

    async def _link(self, session_id: str) -> HubLink:
        try:
            if self._user is not None:
                state = await anyio.to_thread.run_sync(self._registry.state_of, session_id)
                if not may_see(self._user, state):
                    raise _error(-32000, f"{self._user.name} may not see session {session_id}")
            live = await self._registry.open(session_id)
            found = self._registry.locate(session_id)
        except SessionError as exc:
            raise _request_error(exc) from None
        client = Client(
            next(self._numbers),
            max_queued_bytes=self._settings.hub.client_queue_bytes,
            max_message_bytes=self._settings.hub.max_message_bytes,
            read_only=self._read_only,
        )
        client.user = self._user.name if self._user else None
        if self._read_only:
            live.attach(client, AttachParams(mode="observer"))
        else:
            live.connect(client)  # controller when free, else an observer
        plan_mode = self._registry.describe(found, priced=False).get("plan_mode") is True  # (state.json)
        return HubLink(live, client, found.work_dir, plan_mode)

    async def create(self, cwd: str) -> HubLink:
        if self._read_only:
            who = refusal_to_drive(self._user, "creating a session") if self._user else None
            raise _error(-32000, who or "an observer token cannot create sessions")
        owner = self._user.name if self._user else None
        try:
            created = await anyio.to_thread.run_sync(
                lambda: self._registry.create(cwd, None, owner=owner), limiter=self._registry.disk_limiter
            )
        except SessionError as exc:
            raise _request_error(exc) from None
        return await self._link(created.id)

    async def open(self, session_id: str) -> HubLink:
        return await self._link(session_id)

    async def set_sandbox(self, link: Any, mode: str) -> None:
        if not (isinstance(link, HubLink) and link.client is link.live.controller):
            raise _error(-32000, "changing the sandbox needs the controller role; this connection observes")
        try:
            await self._registry.set_sandbox(link.session_id, cast(SandboxMode, mode))
        except SessionError as exc:
            raise _request_error(exc) from None

    def list(self, cwd: str | None) -> list[dict[str, Any]]:
        sessions: list[dict[str, Any]] = []
        for info in visible(self._user, self._registry.list(cwd)):
            entry: dict[str, Any] = {"sessionId": info["id"], "cwd": info["work_dir"]}
            if info.get("title"):
                entry["title"] = info["title"]
            if isinstance(info.get("updated"), int | float):
                stamp = datetime.fromtimestamp(info["updated"], UTC).isoformat()
                entry["updatedAt"] = stamp.replace("+00:00", "Z")
            sessions.append(entry)
        return sessions


def _error(code: int, message: str) -> Exception:
    from acp import RequestError

    return RequestError(code, message)


def _request_error(exc: SessionError) -> Exception:
    code = -32002 if exc.status == 404 else -32602
    return _error(code, exc.message)


class SocketTransport:
    """The SDK's `Transport` over a Starlette WebSocket. Everything sent (responses and the
    updates `post`ed between them) goes out in one order through one writer; a frame that is
    not a JSON object gets its JSON-RPC error (-32700 / -32600) and the connection goes on."""

    def __init__(self, websocket: WebSocket) -> None:
        self._ws = websocket
        self.closed = False
        self._out, self._queue = anyio.create_memory_object_stream[str](float("inf"))
        self.deferrals = Deferrals()

    def post(self, message: dict[str, Any]) -> None:
        if not self.closed:
            self._out.send_nowait(json.dumps(message, ensure_ascii=False, separators=(",", ":")))

    async def send(self, message: dict[str, Any]) -> None:
        self.post(message)
        self.deferrals.sent(message)

    async def write(self) -> None:
        """The writer: until the socket fails or the transport closes."""
        async for text in self._queue:
            try:
                await self._ws.send_text(text)
            except (WebSocketDisconnect, RuntimeError, OSError):
                self.closed = True
                return

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                text = await self._ws.receive_text()
            except (WebSocketDisconnect, RuntimeError, KeyError):
                return None
            message, error = inbound(text)
            if error is not None:
                self.post(error)
            if message is not None:
                return message

    async def close(self) -> None:
        self.closed = True
        self._out.close()


async def serve_acp_socket(
    websocket: WebSocket, registry: SessionRegistry, numbers: Any, settings: Any
) -> None:
    """One ACP connection (accepted already), for as long as the socket is open; its sessions' links are
    detached when it ends (the sessions themselves go on, as after any client)."""
    read_only = websocket.scope.get("state", {}).get("role") != "full"
    transport = SocketTransport(websocket)
    host = RegistryHost(registry, numbers, settings, read_only=read_only, user=user_of(websocket.scope))
    async with anyio.create_task_group() as group:
        group.start_soon(transport.write)

        def notify(session_id: str, update: dict[str, Any] | str) -> None:
            body = json.loads(update) if isinstance(update, str) else update
            params = {"sessionId": session_id, "update": body}
            transport.post({"jsonrpc": "2.0", "method": "session/update", "params": params})

        def extension(method: str, params: dict[str, Any]) -> None:
            """An extension notification (`_soulwire/…`), in order with the updates."""
            transport.post({"jsonrpc": "2.0", "method": method, "params": params})

        capabilities = model_capabilities(settings.raw_config, None)
        agent = RemoteAgent(host, notify, group, capabilities, transport.deferrals.defer, extension)
        connection = agent_connection(agent, transport)
        try:
            await connection.listen()
        finally:
            with anyio.CancelScope(shield=True):
                await agent.shutdown()
            await transport.close()
            group.cancel_scope.cancel()


__all__ = ["serve_acp_socket"]
