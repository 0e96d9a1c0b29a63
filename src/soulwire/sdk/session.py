"""`Session`: one engine process driven over Wire.

    async with Session(work_dir=".", tools=[my_tool], on_approval=policy) as session:
        async for event in session.prompt("fix the failing test"):
            ...

Starting spawns the engine and sends `initialize` (declaring the protocol version and the
capabilities this SDK supports, and registering the external tools). A session runs one
prompt (or replay) at a time. It answers the engine's requests: external tool calls
automatically, approvals and questions through the callbacks, the stream, or the declared
default after a timeout. Closing ends the engine (stdin EOF, bounded wait, then kill) and
leaves no process behind."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream
from pydantic import ValidationError

from soulwire import __version__
from soulwire.sdk.approvals import Approval, to_decision
from soulwire.sdk.checkpoints import CheckpointCalls
from soulwire.sdk.engine import Engine, ignore_event
from soulwire.sdk.errors import (
    ConfigurationError,
    EngineExitedError,
    InvalidStateError,
    NotSupportedError,
    SDKError,
    SessionClosedError,
    StartupTimeoutError,
    ToolDefinitionError,
    ToolsRejectedError,
    TurnInProgressError,
)
from soulwire.sdk.hooks import HookDispatcher, as_hooks, tool_filter
from soulwire.sdk.jsonutil import as_object
from soulwire.sdk.messages import Message
from soulwire.sdk.options import CLIENT_NAME, SDK_PROTOCOL_VERSION, Options
from soulwire.sdk.process import EngineProcess
from soulwire.sdk.responder import Responder
from soulwire.sdk.stream import EventStream
from soulwire.sdk.tools import Tool, as_tools
from soulwire.sdk.turn import Replay, Turn
from soulwire.wire.messages import ApprovalResponse
from soulwire.wire.methods import ServerInfo, SlashCommandInfo
from soulwire.wire.types import UserInput, WireModel

if TYPE_CHECKING:
    from soulwire.sdk.link import ReconnectingStream
    from soulwire.wire.budget import BudgetReport

log = logging.getLogger("soulwire.sdk")


@dataclass(frozen=True)
class _Remote:
    """Where `Session.attach` connects, and what it negotiates."""

    url: str
    token: str
    mode: Literal["controller", "observer"]
    take: bool
    deadline_ms: int | None
    on_timeout: Literal["reject", "cancel", "approve"] | None
    reconnect_timeout_s: float


@dataclass(frozen=True)
class SessionInfo:
    """The engine's session: its id, whether it resumed earlier history, and its work dir.
    `resumed`/`work_dir` are None when the engine does not report them (kimi)."""

    id: str | None
    resumed: bool | None
    work_dir: str | None


@dataclass(frozen=True)
class EngineInfo:
    """`Session.get_server_info()`: the engine's name, version and protocol version, the model
    asked for (None: the engine's default), slash commands, declared capabilities, the hook
    events it supports, the external tools it accepted or rejected, and the session."""

    name: str | None
    version: str | None
    protocol_version: str | None
    model: str | None
    slash_commands: list[SlashCommandInfo]
    capabilities: dict[str, Any]
    hook_events: list[str]
    accepted_tools: list[str]
    rejected_tools: dict[str, str]
    session: SessionInfo


def _encode_input(user_input: UserInput | Sequence[Any]) -> Any:
    if isinstance(user_input, str):
        return user_input
    parts: list[Any] = []
    for part in user_input:
        parts.append(part.model_dump(mode="json") if isinstance(part, WireModel) else part)
    return parts


class Session(CheckpointCalls):
    """A Wire engine process and the conversation it holds. Use `async with`, or
    `await session.start()` … `await session.close()`.

    Settings come as one `Options` object, as keyword arguments (the same names), or both
    (keywords override the object): `Session(Options(model="m", yolo=True))` or
    `Session(model="m", yolo=True)`. See `Options` for every setting.

    `start()` and `close()` must run in the same task (`async with` does that): the session's
    background work lives in a task group entered by one and left by the other."""

    def __init__(self, options: Options | None = None, /, **settings: Any) -> None:
        unknown = sorted(set(settings) - Options.field_names())
        if unknown:
            raise TypeError(f"Session got unknown option(s): {', '.join(unknown)}")
        opts = replace(options, **settings) if options is not None else Options(**settings)
        self.options = opts
        """Every setting of this session."""
        self.launch = opts.launch()
        self.tools: dict[str, Tool] = as_tools(opts.tools)
        self._strict_tools = opts.strict_tools
        default = to_decision(opts.approval_default)
        if default is None:
            raise ConfigurationError("approval_default must be a decision")
        hooks = as_hooks(opts.hooks)
        enforce = tool_filter(opts.allowed_tools, opts.disallowed_tools)
        if enforce is not None:
            hooks = as_hooks([*hooks, enforce])
        if hooks and not opts.handshake:
            raise ConfigurationError("hooks are registered in `initialize`: they need handshake=True")
        self._hooks = HookDispatcher(hooks) if hooks else None
        self._responder = Responder(
            hooks=self._hooks,
            tools=self.tools,
            on_approval=opts.on_approval,
            on_question=opts.on_question,
            timeout=opts.approval_timeout,
            default=default,
        )
        declared = opts.supports_question
        self._supports_question = opts.on_question is not None if declared is None else declared
        self._supports_plan_mode = opts.supports_plan_mode
        self._startup_timeout = opts.startup_timeout
        self._close_timeout = opts.close_timeout
        self._on_stderr = opts.on_stderr
        self._client_name = opts.client_name
        self._protocol_version = opts.protocol_version
        self._handshake = opts.handshake

        self._conn: Engine | None = None
        self._stack = contextlib.AsyncExitStack()
        """In-process MCP servers (outlive engine restarts)."""
        self._group: anyio.abc.TaskGroup | None = None
        """Runs the task that holds the engine link (see `_hold_engine`)."""
        self._release = anyio.Event()
        self._held = anyio.Event()
        self._held.set()  # nothing held yet
        self._closed = False
        self._active: Turn | Replay | None = None
        self._queued: Turn | None = None
        self._cancels: dict[int, anyio.Event] = {}

        self.initialize_result: dict[str, Any] | None = None
        """The raw `initialize` result (None without a handshake, or for a pre-1.1 engine)."""
        self.server: ServerInfo | None = None
        self.protocol_version: str | None = None
        """The engine's protocol version, as it reported it."""
        self.slash_commands: list[SlashCommandInfo] = []
        self.accepted_tools: list[str] = []
        self.rejected_tools: dict[str, str] = {}
        """External tools the engine refused, with its reason."""
        self.info = SessionInfo(self.launch.requested_session_id, None, None)
        self._remote: _Remote | None = None
        self.link: ReconnectingStream | None = None
        """For an attached session: the connection (`last_seq`, `epoch`, `complete`,
        `reconnects`, `attached`)."""
        self._watchers: list[MemoryObjectSendStream[WireModel]] = []

    @classmethod
    def attach(
        cls,
        url: str,
        token: str,
        *,
        mode: Literal["controller", "observer"] = "controller",
        take: bool = False,
        deadline_ms: int | None = None,
        on_timeout: Literal["reject", "cancel", "approve"] | None = None,
        reconnect_timeout: float = 30.0,
        options: Options | None = None,
        **settings: Any,
    ) -> Session:
        """A session on a `soulwire serve` instead of a spawned engine: `url` is the session's
        WebSocket address (`ws://127.0.0.1:PORT/ws/sessions/ID`), `token` the server's (or an
        observer token). The same Session API, plus: a dropped connection is re-opened from the
        last `seq` (nothing lost or repeated) for up to `reconnect_timeout` s; `mode="observer"`
        watches (`watch()`) without controlling, `take=True` takes the controller role;
        `deadline_ms`/`on_timeout` declare what a request nobody answers in time counts as;
        `rules()`, `add_rule()` and `remove_rule()` manage the session's approval rules."""
        session = cls(options, **settings)
        session._remote = _Remote(url, token, mode, take, deadline_ms, on_timeout, reconnect_timeout)
        return session

    # -- lifecycle ----------------------------------------------------------------
    async def __aenter__(self) -> Session:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> Session:
        """Spawn the engine and shake hands; raises EngineNotFoundError, EngineExitedError
        (with the engine's stderr), StartupTimeoutError or ToolsRejectedError (strict_tools)."""
        if self._conn is not None or self._closed:
            raise SDKError("a Session can be started once")
        try:
            if self._remote is None:  # a missing work dir fails before anything starts
                self.launch.resolved_work_dir()
            if self.options.mcp_servers:
                await self._open_mcp_servers()
            self._group = await self._stack.enter_async_context(anyio.create_task_group())
            await self._launch_engine()
        except BaseException:
            await self.close()
            raise
        return self

    async def _launch_engine(self) -> None:
        conn = Engine(await self._attach_link() if self._remote else await self._spawn())
        conn.on_event = self._on_event
        conn.on_request = self._on_request
        self._conn = conn
        assert self._group is not None
        await self._group.start(self._hold_engine, conn)
        self._responder.spawn = conn.start_soon
        if self._handshake:
            await self._initialize(conn)

    async def _hold_engine(self, conn: Engine, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Keep the engine link (its task group) open until `_stop_engine`: in a task of its
        own, so a restart (`set_model`) may come from any task, the sync mirror's included."""
        release = self._release = anyio.Event()
        done = self._held = anyio.Event()
        try:
            async with conn:
                task_status.started()
                await release.wait()
        finally:
            done.set()

    async def _open_mcp_servers(self) -> None:
        from soulwire.sdk.mcp import open_servers

        for bridged_tool in await open_servers(self.options.mcp_servers or {}, self._stack):
            if bridged_tool.name in self.tools:
                raise ToolDefinitionError(
                    f"two external tools are named {bridged_tool.name!r} (MCP server {bridged_tool.server!r})"
                )
            self.tools[bridged_tool.name] = bridged_tool

    async def _spawn(self) -> EngineProcess:
        return await EngineProcess.spawn(
            self.launch.argv(),
            env=self.launch.environment(),
            cwd=self.launch.resolved_work_dir(),
            on_stderr=self._on_stderr,
        )

    async def _attach_link(self) -> Any:
        from soulwire.sdk.link import ReconnectingStream, RemoteLink

        remote = self._remote
        assert remote is not None
        stream = ReconnectingStream(
            remote.url,
            remote.token,
            mode=remote.mode,
            take=remote.take,
            reconnect_timeout_s=remote.reconnect_timeout_s,
        )
        try:
            await stream.connect()
        except OSError as exc:
            raise EngineExitedError(
                None, f"cannot connect to {remote.url}: {exc}", during="startup"
            ) from None
        except Exception as exc:  # the handshake was refused (HTTP 401/404/409 …)
            raise EngineExitedError(None, f"{remote.url} refused: {exc}", during="startup") from None
        self.link = stream
        return RemoteLink(stream)

    def _serve_options(self) -> dict[str, Any]:
        remote = self._remote
        assert remote is not None
        options: dict[str, Any] = {"seq": True, "batch": True}
        if remote.deadline_ms is not None:
            options["deadline_ms"] = remote.deadline_ms
        if remote.on_timeout is not None:
            options["on_timeout"] = remote.on_timeout
        return options

    async def _initialize(self, conn: Engine) -> None:
        params: dict[str, Any] = {
            "protocol_version": self._protocol_version,
            "client": {"name": self._client_name, "version": __version__},
            "capabilities": {
                "supports_question": self._supports_question,
                "supports_plan_mode": self._supports_plan_mode,
                "supports_checkpoints": True,  # sdk/checkpoints.py
                "supports_budget": True,
                "supports_model_switch": True,  # set_model
            },
        }
        budget, prices = self.options.engine_budget(), self.options.engine_prices()
        if prices is not None:
            params["prices"] = prices
        if budget is not None:
            params["budget"] = budget
        if self.tools:
            params["external_tools"] = [t.spec() for t in self.tools.values()]
        if self._hooks is not None:
            params["hooks"] = self._hooks.subscriptions()
        if self._remote is not None:
            params["serve"] = self._serve_options()
        try:
            result = await conn.call("initialize", params, timeout=self._startup_timeout)
        except TimeoutError:
            raise StartupTimeoutError(
                f"the engine did not answer `initialize` within {self._startup_timeout} s; "
                f"stderr: {conn.process.stderr_tail()[-2000:]}"
            ) from None
        except EngineExitedError as exc:
            raise EngineExitedError(exc.returncode, exc.stderr_tail, during="startup") from None
        except NotSupportedError:
            log.info("the engine does not know `initialize`: continuing without a handshake")
            self.rejected_tools = {name: "the engine does not support external tools" for name in self.tools}
            result = None
        if result is not None:
            self._apply_initialize(result)
        if self.rejected_tools:
            for name, reason in self.rejected_tools.items():
                log.warning("the engine rejected external tool %s: %s", name, reason)
            if self._strict_tools:
                raise ToolsRejectedError(self.rejected_tools)

    def _apply_initialize(self, result: Any) -> None:
        raw = as_object(result)
        if raw is None:
            log.warning("ignoring a malformed initialize result: %r", result)
            return
        self.initialize_result = raw
        version = raw.get("protocol_version")
        self.protocol_version = version if isinstance(version, str) else None
        try:
            self.server = ServerInfo.model_validate(raw.get("server"))
        except ValidationError:
            self.server = None
        commands: list[SlashCommandInfo] = []
        for entry in raw.get("slash_commands") or []:
            try:
                commands.append(SlashCommandInfo.model_validate(entry))
            except ValidationError:
                continue
        self.slash_commands = commands
        ext = as_object(raw.get("external_tools"))
        if ext is not None:
            self.accepted_tools = [str(n) for n in ext.get("accepted") or []]
            self.rejected_tools = {
                str(r.get("name")): str(r.get("reason", ""))
                for r in ext.get("rejected") or []
                if isinstance(r, dict)
            }
        else:
            self.accepted_tools = list(self.tools)
        hooks = as_object(raw.get("hooks"))
        amendable = hooks.get("updated_input") if hooks is not None else None
        if self._hooks is not None and hooks is None:
            log.warning("the engine reports no hook support in `initialize`: hooks will not be called")
        if self._hooks is not None and isinstance(amendable, list):
            self._hooks.amendable = frozenset(str(e) for e in amendable)
        info = as_object(raw.get("session"))
        if info is not None:
            sid = info.get("id")
            self.info = SessionInfo(
                id=sid if isinstance(sid, str) else self.info.id,
                resumed=info.get("resumed") if isinstance(info.get("resumed"), bool) else None,
                work_dir=info.get("work_dir") if isinstance(info.get("work_dir"), str) else None,
            )

    async def close(self) -> None:
        """End the engine: stdin EOF, wait up to `close_timeout`, then terminate and kill its
        process group. Idempotent; a running turn ends with SessionClosedError if the engine
        does not finish it first."""
        if self._closed:
            return
        self._closed = True
        self._responder.close()
        for watcher in self._watchers:
            watcher.close()  # ends every watch()
        try:
            await self._stop_engine(SessionClosedError("the session was closed"))
        finally:
            await self._stack.aclose()  # in-process MCP servers

    async def _stop_engine(self, error: SDKError) -> None:
        conn = self._conn
        try:
            if conn is not None:
                conn.closing_error = error
                # Shielded (and bounded by the timeouts): a cancelled owner still ends the engine.
                with anyio.CancelScope(shield=True):
                    await conn.process.close(self._close_timeout)
                    with anyio.move_on_after(3.0):
                        await conn.closed.wait()
        finally:
            if conn is not None:
                conn.fail(conn.closing_error or error)
            for stream in (self._active, self._queued):
                if stream is not None and not stream.finished:
                    stream._finish(error)
            self._active = self._queued = None
            self._release.set()  # the holding task leaves the engine link's task group
            with anyio.CancelScope(shield=True):
                await self._held.wait()

    # -- mid-session controls --------------------------------------------------------
    async def interrupt(self) -> None:
        """Stop the running turn (the Claude Agent SDK's name for `cancel`)."""
        await self.cancel()

    async def set_model(self, model: str | None = None, *, thinking: bool | None = None) -> None:
        """Switch the model and/or thinking between turns (only what is given changes); raises
        TurnInProgressError during a turn. An engine that negotiated `supports_model_switch`
        (Soulwire, also through `serve`) switches at once (Wire `set_model`): an unknown model or
        thinking the model lacks raises InvalidParamsError, and every other client of the
        session is told. Any other engine (the Kimi CLI) is restarted on the same session with
        `--model` / `--thinking` (history, plan mode and approvals for the session are kept;
        one engine start; an unknown model is reported by the next prompt). Call it from the
        task that started the session."""
        conn = self._connection()
        if self.busy:
            raise TurnInProgressError("cannot switch the model while a turn is running")
        if model == "" or (model is None and thinking is None):
            raise ConfigurationError("set_model needs a model name and/or thinking")
        if self._live_model_switch:
            params = {k: v for k, v in (("model", model), ("thinking", thinking)) if v is not None}
            answer = as_object(await conn.call("set_model", params)) or {}
            switched = answer.get("model")
            self.options = replace(
                self.options,
                model=switched if isinstance(switched, str) else model or self.options.model,
                thinking=answer.get("thinking") if isinstance(answer.get("thinking"), bool) else thinking,
            )
            return
        session_id = self.info.id
        if session_id is None:
            raise SDKError("the engine did not report its session id: it cannot be restarted on it")
        self.options = replace(
            self.options,
            model=model or self.options.model,
            thinking=self.options.thinking if thinking is None else thinking,
            session_id=session_id,
            continue_session=False,
        )
        self.launch = self.options.launch()
        target = model or ("thinking" if thinking else "no thinking")
        await self._stop_engine(SessionClosedError(f"the engine was restarted to switch to {target}"))
        self._conn = None
        try:
            await self._launch_engine()
        except BaseException:
            await self.close()
            raise

    @property
    def _live_model_switch(self) -> bool:
        """The engine switches models in place (it negotiated `supports_model_switch`)."""
        capabilities = as_object((self.initialize_result or {}).get("capabilities")) or {}
        return capabilities.get("supports_model_switch") is True

    def get_server_info(self) -> EngineInfo:
        """What the engine reported when the session started (its `initialize` result)."""
        raw = self.initialize_result or {}
        capabilities = as_object(raw.get("capabilities")) or {}
        hooks = as_object(raw.get("hooks")) or {}
        return EngineInfo(
            name=self.server.name if self.server else None,
            version=self.server.version if self.server else None,
            protocol_version=self.protocol_version,
            model=self.options.model,
            slash_commands=list(self.slash_commands),
            capabilities=dict(capabilities),
            hook_events=[str(e) for e in hooks.get("supported_events") or []],
            accepted_tools=list(self.accepted_tools),
            rejected_tools=dict(self.rejected_tools),
            session=self.info,
        )

    # -- state ----------------------------------------------------------------------
    @property
    def id(self) -> str | None:
        """The engine's session id (pass it as `session_id` later to resume)."""
        return self.info.id

    @property
    def resumed(self) -> bool | None:
        return self.info.resumed

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pid(self) -> int | None:
        return self._conn.process.pid if self._conn else None

    @property
    def returncode(self) -> int | None:
        return self._conn.process.returncode if self._conn else None

    @property
    def stderr_tail(self) -> str:
        return self._conn.process.stderr_tail() if self._conn else ""

    @property
    def busy(self) -> bool:
        """A turn or replay is running (or queued behind a cancelled one)."""
        return (self._active is not None and not self._active.finished) or self._queued is not None

    @property
    def pending_approvals(self) -> list[Approval]:
        """Approval requests nobody has answered yet (in or outside a turn)."""
        return [a for a in self._responder.pending.values() if isinstance(a, Approval) and not a.answered]

    def _connection(self) -> Engine:
        if self._closed:
            raise SessionClosedError("the session is closed")
        if self._conn is None:
            raise SessionClosedError("the session is not started: use `async with Session(...)`")
        if self._conn.failure is not None:
            raise self._conn.failure
        return self._conn

    # -- prompts and replays ------------------------------------------------------
    def prompt(self, user_input: UserInput | Sequence[Any], *, text_as_str: bool = False) -> Turn:
        """Start a turn with text or content parts; returns at once. Iterate the Turn for its
        events, or `await` it for the result. Prompts are sequential: this raises
        TurnInProgressError while another turn runs, unless that turn is being cancelled
        (then this one starts as soon as it has ended).

        `text_as_str=True` (what `query()` uses): streamed text chunks arrive as plain `str`
        items instead of `TextPart`s and the steps keep only their strings — the cheapest
        path for consumers that fold the text themselves."""
        conn = self._connection()
        self._check_idle("prompt")
        turn = Turn(self, user_input)
        turn.record_chunks = not text_as_str
        params = {"user_input": _encode_input(user_input)}
        if self._active is not None and not self._active.finished:
            self._queued = turn
            turn.request_params = params
        else:
            self._send_stream(conn, turn, "prompt", params)
        return turn

    def query(self, user_input: UserInput | Sequence[Any]) -> AsyncGenerator[Message, None]:
        """One turn as the typed messages `query()` yields (merged text, thinking, tool use
        and results, status, then a ResultMessage), with this session's limits applied:
        `ClaudeSDKClient.query()` + `receive_response()` in one call."""
        from soulwire.sdk.query import run_turn

        return run_turn(self, user_input, self.options)

    def replay(self) -> Replay:
        """Re-stream the session's recorded history (`replay`, Wire 1.3+)."""
        conn = self._connection()
        self._check_idle("replay")
        if self._active is not None and not self._active.finished:
            raise TurnInProgressError("wait until the cancelled turn has ended before replaying")
        replay = Replay(self)
        self._send_stream(conn, replay, "replay", None)
        return replay

    def _check_idle(self, what: str) -> None:
        active = self._active
        if self._queued is not None:
            raise TurnInProgressError(
                f"cannot {what}: a prompt is already waiting for the cancelled turn to end"
            )
        if active is not None and not active.finished and not active.cancel_requested:
            kind = "replay" if isinstance(active, Replay) else "turn"
            raise TurnInProgressError(
                f"cannot {what}: a {kind} is still running. Prompts are sequential: consume the "
                f"{kind} (`async for` / `await`) or cancel it first."
            )

    def _send_stream(self, conn: Engine, stream: Turn | Replay, method: str, params: Any) -> None:
        self._active = stream
        conn.on_part = stream._on_event
        conn.on_text = stream._on_text if isinstance(stream, Turn) and not stream.record_chunks else None
        conn.send_request(method, params, lambda result, error: self._stream_done(stream, result, error))

    def _stream_done(self, stream: Turn | Replay, result: Any, error: SDKError | None) -> None:
        if self._active is stream:
            self._active = None
            if self._conn is not None:
                self._conn.on_part = ignore_event
                self._conn.on_text = None
        if isinstance(stream, Turn):
            self._responder.turn_ended(stream)
        stream._complete(result, error)
        queued = self._queued
        if queued is not None and self._active is None:
            self._queued = None
            if queued.finished:
                return
            if self._conn is None or self._conn.failure is not None:
                queued._finish(self._conn.failure if self._conn else SessionClosedError("closed"))
                return
            self._send_stream(self._conn, queued, "prompt", queued.request_params)

    def _cancel_stream(self, stream: EventStream, *, wait_answer: bool) -> anyio.Event | None:
        """Ask the engine to cancel `stream` (once); the future settles when it answered."""
        if stream.finished:
            return None
        queued = self._queued
        if queued is not None and stream is queued:  # never sent: it simply does not happen
            self._queued = None
            queued._complete({"status": "cancelled"}, None)
            return None
        key = id(stream)
        existing = self._cancels.get(key)
        if existing is not None:
            return existing
        assert isinstance(stream, (Turn, Replay))
        stream.cancel_requested = True
        answered = anyio.Event()
        self._cancels[key] = answered

        def on_answer(_result: Any, error: SDKError | None) -> None:
            self._cancels.pop(key, None)
            if error is not None and not isinstance(error, InvalidStateError):
                log.warning("cancel failed: %s", error)  # the turn ends on its own anyway
            answered.set()

        if self._conn is None:
            answered.set()
            return answered
        self._conn.send_request("cancel", None, on_answer)
        return answered

    async def cancel(self) -> None:
        """Cancel the running turn or replay, if any, and wait until it has ended."""
        active = self._queued or self._active
        if isinstance(active, (Turn, Replay)):
            await active.cancel()

    async def steer(self, user_input: UserInput | Sequence[Any]) -> None:
        """Add input to the running turn (Wire `steer`); NotSupportedError on engines without it."""
        await self._connection().call("steer", {"user_input": _encode_input(user_input)})

    async def set_plan_mode(self, enabled: bool) -> bool:
        """Switch plan mode (Wire `set_plan_mode`); returns the engine's new state."""
        result = await self._connection().call("set_plan_mode", {"enabled": enabled})
        answer = as_object(result) or {}
        return bool(answer.get("plan_mode", enabled))

    async def set_budget(self, budget: Any = None, /, **fields: Any) -> BudgetReport:
        """Set or raise the session's budget (Wire `set_budget`): a `Budget`, a dict of its
        shape, or its fields as keywords (`set_budget(tree={"usd": 10})`); only what is given
        changes. Returns the budget with what each scope has spent and has left. A turn that
        stopped with `budget_exceeded` continues with the next prompt."""
        from soulwire.wire.budget import Budget, BudgetReport

        if isinstance(budget, Budget):
            budget = budget.model_dump(mode="json", exclude_unset=True)
        params = {**(budget or {}), **fields}
        try:
            Budget.model_validate(params)
        except ValidationError as exc:
            raise ConfigurationError(f"budget: {exc.errors()[0]['msg']}") from None
        result = await self._connection().call("set_budget", params)
        return BudgetReport.model_validate(as_object(result) or {})

    # -- watching and rules ------------------------------------------------------------
    async def watch(self) -> AsyncIterator[WireModel]:
        """Every event of the session as it comes (an observer's view, also of turns other
        clients run), until the session closes or the loop is left."""
        import math

        send, receive = anyio.create_memory_object_stream[WireModel](math.inf)
        self._watchers.append(send)
        try:
            if self._closed:
                return
            async with receive:
                async for event in receive:
                    yield event
        finally:
            if send in self._watchers:
                self._watchers.remove(send)
            send.close()
            receive.close()

    async def rules(self) -> list[str]:
        """The session's approval rules (`approvals/rules/list`; on a server, or an engine
        started with the extensions)."""
        result = as_object(await self._connection().call("approvals/rules/list")) or {}
        return [str(r) for r in result.get("rules") or []]

    async def add_rule(self, rule: str) -> list[str]:
        """Add an approval rule: exact (`run command: make test`) or a pattern
        (`Shell(git status*)`); returns the rules now in force."""
        result = as_object(await self._connection().call("approvals/rules/add", {"rule": rule})) or {}
        return [str(r) for r in result.get("rules") or []]

    async def remove_rule(self, rule: str) -> list[str]:
        """Revoke an approval rule (e.g. one "approve for session" granted)."""
        result = as_object(await self._connection().call("approvals/rules/remove", {"rule": rule})) or {}
        return [str(r) for r in result.get("rules") or []]

    # -- engine → client ------------------------------------------------------------
    def _on_event(self, event: WireModel) -> None:
        if type(event) is ApprovalResponse:
            self._responder.approval_resolved(event)
        for watcher in self._watchers:
            watcher.send_nowait(event)
        active = self._active
        if active is not None:
            active._on_event(event)
        else:
            log.debug("event outside any turn: %r", event)

    def _on_request(self, request_id: str, type_: str, payload: dict[str, Any]) -> None:
        if self._conn is not None:
            self._responder.handle(self._conn, request_id, type_, payload, self._active)


__all__ = ["CLIENT_NAME", "SDK_PROTOCOL_VERSION", "EngineInfo", "Session", "SessionInfo"]
