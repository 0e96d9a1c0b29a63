"""ACP in front of Wire sessions: an ACP agent whose sessions are reached as a Wire client
(a `WireLink`), not built in this process. `soulwire serve` offers its sessions this way
(`/acp` on its WebSocket): an editor drives a session the web UI also shows, and the other
way round, through the same hub, roles and approvals as every Wire client.

The translation is the local agent's: the Wire events are folded (the one fold) and mapped
to `session/update`s by the same `UpdateMapper`; an `ApprovalRequest` becomes
`session/request_permission` and its answer goes back as the Wire answer."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc
from acp import RequestError
from acp.schema import SessionMode, SessionModeState
from anyio.streams.memory import MemoryObjectSendStream

from soulwire.ui.acp import checkpoints, v2
from soulwire.ui.acp.handshake import ClientCapabilities, initialize_result
from soulwire.ui.acp.options import (
    MODEL_OPTIONS,
    mode_option,
    model_change,
    model_options,
    sandbox_change,
    sandbox_option,
)
from soulwire.ui.acp.prompts import PromptBlock, user_input
from soulwire.ui.acp.session import REDRAW, STOP_REASONS, PermissionAsker, ask_permission, session_not_found
from soulwire.ui.acp.updates import UpdateMapper, dump
from soulwire.wire import PROTOCOL_VERSION
from soulwire.wire.fold import Merger
from soulwire.wire.messages import ApprovalRequest, parse_envelope
from soulwire.wire.model_switch import ModelChanged, SessionModel

REMOTE_MODES = (
    SessionMode(id="default", name="Default", description="Ask before running commands and editing files"),
    SessionMode(id="plan", name="Plan", description="Explore and write a plan; no other changes"),
)


class WireLink(Protocol):
    """One Wire connection to one session: lines out, messages in (None: it ended)."""

    session_id: str
    work_dir: Path
    plan_mode: bool
    """The session's plan mode when the link opened (later changes arrive as events)."""
    model: SessionModel
    """The session's model and thinking when the link opened (later: `ModelChanged` events)."""
    sandbox: str
    """The session's sandbox mode (it changes only by reopening the session: a new link)."""

    def send(self, message: dict[str, Any]) -> None: ...

    async def receive(self) -> dict[str, Any] | None: ...

    async def close(self) -> None: ...


class SessionHost(Protocol):
    """Where the Wire sessions live (the server's registry)."""

    async def create(self, cwd: str) -> WireLink: ...

    async def open(self, session_id: str) -> WireLink: ...

    def list(self, cwd: str | None) -> list[dict[str, Any]]: ...

    async def set_sandbox(self, link: WireLink, mode: str) -> None:
        """Reopen the session of `link` (its controller's) under another sandbox mode; the
        link ends, as every other client's of that session."""
        ...


Notify = Callable[[str, dict[str, Any] | str], None]
Extension = Callable[[str, dict[str, Any]], None]
"""Sends an extension notification (`_soulwire/…`) to the editor."""


class WireCheckpoints:
    """The checkpoint commands' access to a session reached over Wire: its negotiated
    `checkpoints`, `changes` and `rewind` methods (checkpoints.CheckpointAccess)."""

    def __init__(self, session: HubAcpSession) -> None:
        self.session = session
        self.on = False
        """The session takes checkpoints (asked once it is attached: `look`)."""

    async def look(self) -> None:
        try:
            listed = await self.session.call("checkpoints")
        except RequestError:
            listed = None  # not negotiated (a turn was running): no commands
        self.on = isinstance(listed, dict) and listed.get("enabled") is True

    def enabled(self) -> bool:
        return self.on

    async def _call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The Wire call; its errors as the book's (the conflict's paths from its data)."""
        from soulwire.sessions.checkpoints.book import CheckpointError, RewindConflict

        try:
            return await self.session.call(method, params)
        except RequestError as exc:
            data = exc.data if isinstance(exc.data, dict) else {}
            conflicts = data.get("conflicts")
            if isinstance(conflicts, list):
                raise RewindConflict([str(p) for p in conflicts]) from None
            raise CheckpointError(str(exc)) from None

    async def turns(self) -> list[int]:
        from soulwire.sessions.checkpoints.book import turns_of

        listed = await self._call("checkpoints")
        return turns_of(listed.get("checkpoints", []) if isinstance(listed, dict) else [])

    async def prompts(self) -> list[str]:
        from soulwire.runtime.checkpoints import prompts_of

        return prompts_of(await self.session.replayed())

    async def changes(self, turn: int, *, diffs: bool = True) -> dict[str, Any]:
        return await self._call("changes", {"turn": turn, "diffs": diffs})

    async def rewind(self, turn: int, *, files: bool, context: bool, force: bool) -> dict[str, Any]:
        params = {"turn": turn, "files": files, "context": context, "force": force}
        return await self._call("rewind", params)


class HubAcpSession:
    """One ACP session over one Wire link."""

    def __init__(
        self,
        link: WireLink,
        client: PermissionAsker,
        notify: Notify,
        *,
        v2: bool = False,
        redraw: Extension | None = None,
    ) -> None:
        self.link = link
        self.id = link.session_id
        self._client = client
        self._notify = notify
        self._redraw = redraw
        """Sends `_soulwire/redraw` to an editor that asked for it (ClientCapabilities.redraw)."""
        self.checkpoints = WireCheckpoints(self)
        self._collected: list[dict[str, Any]] | None = None
        self.v2 = v2
        self.mapper = UpdateMapper(link.work_dir, self._send, v2=v2)
        self._merger = Merger(self.mapper.merged)
        self._ids = itertools.count(1)
        self._waiting: dict[str, MemoryObjectSendStream[dict[str, Any]]] = {}
        self._replaying = False
        self.plan_mode = link.plan_mode
        self.model = link.model
        self.closed = anyio.Event()

    def _send(self, update: dict[str, Any] | str) -> None:
        self._notify(self.id, update)

    async def pump(self, group: anyio.abc.TaskGroup) -> None:
        """Read the link until it ends; requests from the session are answered in `group`."""
        try:
            while (message := await self.link.receive()) is not None:
                self._on_message(message, group)
        finally:
            self.closed.set()
            for stream in self._waiting.values():
                stream.close()

    def _on_message(self, message: dict[str, Any], group: anyio.abc.TaskGroup) -> None:
        method = message.get("method")
        if method is None:
            stream = self._waiting.pop(str(message.get("id")), None)
            if stream is not None:
                stream.send_nowait(message)
            return
        params = message.get("params")
        if not isinstance(params, dict):
            return
        event = parse_envelope(str(params.get("type", "")), params.get("payload"))
        if method == "event":
            if self._collected is not None:
                self._collected.append(params)
                return
            if self._replaying:
                self.mapper.replay(event)
                return
            self.mapper.raw(event)
            self._merger.push(event)
            plan = getattr(event, "plan_mode", None)
            if isinstance(plan, bool) and plan != self.plan_mode:
                self.plan_mode = plan
                if not self.v2:  # v2 has the mode as a config option only
                    self._send({"sessionUpdate": "current_mode_update", "currentModeId": self.current_mode()})
                self._options_changed()
            elif isinstance(event, ModelChanged):
                self._model_is(SessionModel.model_validate(event.model_dump()))
        elif method == "request" and "id" in message:
            group.start_soon(self._answer, message["id"], event)

    def _options_changed(self) -> None:
        options = [dump(o) for o in self.config_options()]
        self._send({"sessionUpdate": "config_option_update", "configOptions": options})

    def _model_is(self, info: SessionModel) -> None:
        """The session's model as the engine reports it; the editor hears of a change once
        (whether the event or the answer to its own `set_model` comes first)."""
        if info != self.model:
            self.model = info
            self._options_changed()

    async def negotiate(self) -> None:
        """Declare the Wire extensions this face follows (the model's switch and its event;
        plan mode; checkpoints' and budgets' events, which it passes over, so that observers
        that negotiated them keep them). As an observer, the hub answers for the engine."""
        capabilities = {
            "supports_plan_mode": True,
            "supports_model_switch": True,
            "supports_checkpoints": True,
            "supports_budget": True,
        }
        client = {"name": "soulwire-acp", "version": None}
        params = {"protocol_version": PROTOCOL_VERSION, "client": client, "capabilities": capabilities}
        try:
            await self.call("initialize", params)
        except RequestError:
            pass  # a turn runs (the engine keeps its client's terms); the options work without events

    async def _answer(self, request_id: Any, event: Any) -> None:
        if isinstance(event, ApprovalRequest):
            try:
                answer = await ask_permission(self._client, self.id, self.mapper, event, self.link.work_dir)
            except (RequestError, ConnectionError, ValueError):
                answer = "reject"
            result = {"request_id": event.id, "response": answer}
            self.link.send({"jsonrpc": "2.0", "id": request_id, "result": result})
            return
        error = {"code": -32601, "message": f"{type(event).__name__} is not supported over ACP"}
        self.link.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """A Wire request; its result, or its error as an ACP RequestError."""
        if self.closed.is_set():  # the session was closed or reopened (e.g. another sandbox)
            raise RequestError(-32603, f"The session {self.id} was closed: open it again (session/resume)")
        request_id = f"acp-{next(self._ids)}"
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](1)
        self._waiting[request_id] = send
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        self.link.send(body)
        try:
            answer = await receive.receive()
        except anyio.EndOfStream:
            raise RequestError(-32603, f"The session {self.id} was closed") from None
        finally:
            self._waiting.pop(request_id, None)
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise RequestError(
                int(error.get("code", -32603)), str(error.get("message", "error")), error.get("data")
            )
        return answer.get("result")

    async def replayed(self) -> list[dict[str, Any]]:
        """The recorded history's messages (`type`, `payload`), replayed to this link only."""
        self._collected = collected = []
        try:
            await self.call("replay")
        finally:
            self._collected = None
        return collected

    # -- ACP ------------------------------------------------------------------------
    def send_commands(self) -> None:
        """The checkpoint commands, when the session takes checkpoints."""
        commands = checkpoints.available(self.checkpoints)
        if commands:
            self._send({"sessionUpdate": "available_commands_update", "availableCommands": commands})

    async def _redraw_view(self) -> None:
        assert self._redraw is not None
        self._redraw(REDRAW, {"sessionId": self.id})
        await self.replay()

    async def prompt(self, blocks: list[PromptBlock]) -> dict[str, Any]:
        command = checkpoints.command_of(self.checkpoints, blocks)
        if command is not None:
            redraw = self._redraw_view if self._redraw is not None else None
            text = await checkpoints.answer_text(self.checkpoints, command, redraw)
            self._send({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
            return {"stopReason": "end_turn"}
        parts = [p.model_dump(mode="json", exclude_none=True) for p in user_input(blocks)]
        self.mapper.usage = type(self.mapper.usage)()
        self.mapper.begin_turn()
        try:
            result = await self.call("prompt", {"user_input": parts})
        finally:
            self._merger.flush()
            self.mapper.close_open("The turn ended.")
        status = result.get("status") if isinstance(result, dict) else None
        reply: dict[str, Any] = {"stopReason": STOP_REASONS.get(str(status), "end_turn")}
        usage = self.mapper.usage.as_acp()
        if usage is not None:
            reply["usage"] = usage
        return reply

    async def replay(self) -> None:
        """The recorded history as updates (`session/load`)."""
        self._replaying = True
        try:
            await self.call("replay")
        finally:
            self._replaying = False
            self.mapper.close_open("The turn ended before this tool finished.")

    async def cancel(self) -> None:
        try:
            await self.call("cancel")
        except RequestError:
            pass  # no turn was running

    def current_mode(self) -> str:
        return "plan" if self.plan_mode else "default"

    def modes(self) -> SessionModeState:
        return SessionModeState(current_mode_id=self.current_mode(), available_modes=list(REMOTE_MODES))

    def config_options(self) -> list[Any]:
        """The mode, the model, the sandbox and thinking, as the local agent offers them."""
        model, thinking = model_options(self.model)
        return [
            mode_option(self.current_mode(), REMOTE_MODES),
            model,
            sandbox_option(self.link.sandbox),
            thinking,
        ]

    def opened(self) -> dict[str, Any]:
        """What `session/new`, `load` and `resume` answer about the session's state."""
        options = {"configOptions": [dump(o) for o in self.config_options()]}
        return options if self.v2 else {"modes": dump(self.modes()), **options}

    async def set_mode(self, mode_id: str) -> None:
        if mode_id not in ("default", "plan"):
            raise RequestError(-32602, f"Unknown mode {mode_id!r} (modes: default, plan)")
        result = await self.call("set_plan_mode", {"enabled": mode_id == "plan"})
        if isinstance(result, dict) and isinstance(result.get("plan_mode"), bool):
            self.plan_mode = bool(result["plan_mode"])

    async def set_model(self, config_id: str, value: str | bool) -> None:
        """The model or thinking option: the engine's `set_model`; every attached editor hears it."""
        result = await self.call("set_model", model_change(config_id, value))
        self._model_is(SessionModel.model_validate(result))


class RemoteAgent:
    """The ACP agent of a session host (implements the SDK's `Agent` protocol)."""

    def __init__(
        self,
        host: SessionHost,
        notify: Notify,
        group: anyio.abc.TaskGroup,
        model_capabilities: set[str],
        defer: Callable[[str, Callable[[], None]], None],
        extension: Extension | None = None,
    ) -> None:
        self._host = host
        self._defer = defer  # sends updates right after the response that names the session
        self._extension = extension
        self._model_capabilities = model_capabilities  # what prompts may carry (images, audio)
        self._notify = notify
        self._group = group
        self._client: PermissionAsker | None = None
        self.client_capabilities = ClientCapabilities()
        self.sessions: dict[str, HubAcpSession] = {}

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, **kwargs: Any) -> Any:
        caps = dump(client_capabilities) if client_capabilities is not None else {}
        self.client_capabilities = ClientCapabilities.parse(
            {"protocolVersion": protocol_version, "clientCapabilities": caps}
        )
        result = initialize_result(self._model_capabilities, self.client_capabilities)
        result["agentCapabilities"]["sessionCapabilities"] = {"list": {}, "resume": {}, "close": {}}
        result["agentCapabilities"]["auth"] = {}
        result["authMethods"] = []  # the server's token is the login
        return result

    async def _attach(self, opening: Awaitable[WireLink]) -> HubAcpSession:
        link = await opening
        assert self._client is not None
        capabilities = self.client_capabilities
        redraw = self._extension if capabilities.redraw else None
        session = HubAcpSession(link, self._client, self._notify, v2=capabilities.v2, redraw=redraw)
        old = self.sessions.pop(session.id, None)
        if old is not None:
            await old.link.close()
        self.sessions[session.id] = session
        self._group.start_soon(session.pump, self._group)
        await session.negotiate()
        await session.checkpoints.look()
        return session

    async def new_session(self, cwd: str, **kwargs: Any) -> dict[str, Any]:
        session = await self._attach(self._host.create(cwd))
        self._defer(session.id, session.send_commands)
        return {"sessionId": session.id, **session.opened()}

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> dict[str, Any]:
        self._not_in_v2("session/load")
        session = await self._attach(self._host.open(session_id))
        await session.replay()
        self._defer(session.id, session.send_commands)
        return session.opened()

    async def resume_session(self, session_id: str, cwd: str, **kwargs: Any) -> dict[str, Any]:
        session = await self._attach(self._host.open(session_id))
        if session.v2 and v2.replay_asked(kwargs):
            await session.replay()  # v2's `session/load`
        self._defer(session.id, session.send_commands)
        return session.opened()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return {"sessions": self._host.list(cwd)}

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        session = self._session(session_id)
        self.sessions.pop(session_id, None)
        await session.link.close()

    def _not_in_v2(self, method: str) -> None:
        if self.client_capabilities.v2:
            raise v2.gone(method)

    def _session(self, session_id: str) -> HubAcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise session_not_found(session_id, "open it with session/new, load or resume")
        return session

    async def prompt(self, session_id: str, prompt: list[PromptBlock], **kwargs: Any) -> dict[str, Any]:
        return await self._session(session_id).prompt(prompt)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            await session.cancel()

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        self._not_in_v2("session/set_mode")
        await self._session(session_id).set_mode(mode_id)

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> dict[str, Any]:
        session = self._session(session_id)
        if config_id in MODEL_OPTIONS:
            await session.set_model(config_id, value)
        elif config_id == "mode" and isinstance(value, str):
            await session.set_mode(value)
        elif config_id == "sandbox":
            mode = sandbox_change(value)
            if mode != session.link.sandbox:  # the session is reopened with it: a new link
                await self._host.set_sandbox(session.link, mode)
                session = await self._attach(self._host.open(session_id))
                session.send_commands()  # the editor knows this session already
        else:
            raise RequestError(
                -32602, f"Unknown config option {config_id!r} (mode, model, sandbox, thinking)"
            )
        return {"configOptions": [dump(o) for o in session.config_options()]}

    async def shutdown(self) -> None:
        for session in list(self.sessions.values()):
            with anyio.move_on_after(2, shield=True):
                await session.link.close()
        self.sessions.clear()
