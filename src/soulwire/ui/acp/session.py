"""One ACP session: a runtime, the editor as its approval channel, and its modes and options.

Everything the agent does is the engine's; this class only carries requests into the
runtime (prompt, cancel, mode, model) and the runtime's requests out to the editor
(`session/request_permission` for an ApprovalRequest)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc
from acp import RequestError
from acp.schema import (
    PermissionOption,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    ToolCallUpdate,
)

from soulwire.engine.client import ClientRequestError
from soulwire.llm.errors import AuthenticationError, ChatProviderError, LLMNotSet, LLMNotSupported
from soulwire.llm.registry import resolve_model
from soulwire.runtime.builder import Runtime
from soulwire.tools.base import ApprovalOutcome
from soulwire.ui.acp.editor import EditorFiles, EditorTerminal
from soulwire.ui.acp.handshake import ClientCapabilities
from soulwire.ui.acp.prompts import PromptBlock, user_input
from soulwire.ui.acp.tooling import ToolContent, diff_content, text_content, tool_kind
from soulwire.ui.acp.updates import UpdateMapper, dump
from soulwire.wire.messages import ApprovalRequest, parse_envelope
from soulwire.wire.types import BriefDisplayBlock, DiffDisplayBlock, ShellDisplayBlock, WireModel

MODES = (
    SessionMode(id="default", name="Default", description="Ask before running commands and editing files"),
    SessionMode(id="plan", name="Plan", description="Explore and write a plan; no other changes"),
    SessionMode(id="yolo", name="YOLO", description="Run every tool action without asking"),
)
_PERMISSION_OPTIONS = [
    PermissionOption(option_id="approve", name="Allow once", kind="allow_once"),
    PermissionOption(
        option_id="approve_for_session", name="Allow always (this session)", kind="allow_always"
    ),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class PermissionAsker(Protocol):
    """The editor's side of `session/request_permission` (the SDK connection)."""

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> Any: ...


class _ApprovalWatch:
    """Stands in front of the approvals broker to see when a call may start running."""

    def __init__(self, broker: Any, started: Callable[[str], None]) -> None:
        self._broker = broker
        self._started = started

    @property
    def yolo(self) -> bool:  # `/yolo` toggles it through the soul's approver
        return bool(self._broker.yolo)

    @yolo.setter
    def yolo(self, value: bool) -> None:
        self._broker.yolo = value

    async def request(self, *, tool_call_id: str, **kwargs: Any) -> ApprovalOutcome:
        outcome: ApprovalOutcome = await self._broker.request(tool_call_id=tool_call_id, **kwargs)
        if outcome.approved:
            self._started(tool_call_id)
        return outcome


_COMMAND_HINTS = {"compact": "what to keep in focus (optional)", "plan": "on | off | view | clear"}


def _permission_content(display: Sequence[Any], work_dir: Path) -> list[ToolContent]:
    """What the user approves: the diff of the exact change, or the exact command."""
    content: list[ToolContent] = []
    for block in display:
        if isinstance(block, DiffDisplayBlock) and not block.is_summary:
            content.append(diff_content(block, work_dir))
        elif isinstance(block, ShellDisplayBlock):
            content.append(text_content(f"```{block.language}\n{block.command}\n```"))
        elif isinstance(block, BriefDisplayBlock):
            content.append(text_content(block.text))
    return content


def prewarm() -> None:
    """Build now what pydantic builds on first use along a turn's path (events, history
    records, tool results, ACP updates)."""
    from soulwire.runtime.warm import warm_turn_path
    from soulwire.wire.messages import ToolResult, envelope
    from soulwire.wire.types import TextPart, ToolReturnValue, user_input_adapter

    user_input_adapter().validate_python([{"type": "text", "text": "x"}])
    warm_turn_path(envelope, user_input=[TextPart(text="x")])
    value = ToolReturnValue(is_error=False, output="x")
    mapper = UpdateMapper(Path("/"), lambda _update: None)
    mapper.merged(ToolResult(tool_call_id="x", return_value=value))


def model_error(exc: Exception) -> RequestError:
    """A model failure as the JSON-RPC error of `session/prompt`."""
    if isinstance(exc, LLMNotSet):
        return RequestError(-32000, f"Authentication required: {exc}", {"reason": "llm_not_set"})
    if isinstance(exc, LLMNotSupported):
        return RequestError(-32602, str(exc), {"reason": "llm_not_supported"})
    if isinstance(exc, AuthenticationError):
        return RequestError(-32000, f"Authentication failed: {exc}", {"reason": "authentication"})
    return RequestError(-32603, f"Model provider error: {exc}", {"reason": "provider_error"})


class AcpSession:
    """A live session of this process."""

    def __init__(
        self,
        runtime: Runtime,
        client: PermissionAsker,
        notify: Callable[[str, dict[str, Any] | str], None],
        capabilities: ClientCapabilities,
    ) -> None:
        self.runtime = runtime
        self.id = runtime.session.id
        self._client = client
        self._notify = notify
        self._scope: anyio.CancelScope | None = None
        self._turn_done = anyio.Event()
        self._turn_done.set()
        self._closing = anyio.Event()
        self._ended = anyio.Event()
        self.mapper = UpdateMapper(runtime.options.work_dir, self._send, self._plan_mode_changed)
        self._mode = self.current_mode()
        runtime.attach_client(self)
        runtime.apply_client(supports_question=False, supports_plan_mode=False, hook_subscriptions=[])
        runtime.soul.approver = _ApprovalWatch(runtime.broker, self.mapper.started)
        if capabilities.read_text_file or capabilities.write_text_file:
            runtime.soul.files = EditorFiles(
                client, self.id, read=capabilities.read_text_file, write=capabilities.write_text_file
            )
        if capabilities.terminal:
            runtime.soul.terminal = EditorTerminal(client, self.id, self.mapper.terminal)
        runtime.bus.subscribe(self.mapper.raw)
        runtime.bus.subscribe(self.mapper.merged, merged=True)

    async def live(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The session's lifetime (MCP servers, background tasks, SessionStart/End hooks), as a
        task of the server: it lasts until `end` is called or the server stops."""
        try:
            async with self.runtime.running():
                task_status.started()
                await self._closing.wait()
        finally:
            self._ended.set()

    async def end(self, grace: float) -> None:
        """Cancel the turn, let the session's lifetime wind down (SessionEnd, servers closed,
        background commands killed), then close its files."""
        self.cancel()
        with anyio.move_on_after(grace):
            await self._turn_done.wait()
        self._closing.set()
        with anyio.move_on_after(grace * 2):
            await self._ended.wait()
        self.runtime.close()

    def _send(self, update: dict[str, Any] | str) -> None:
        self._notify(self.id, update)

    # -- the engine's requests ------------------------------------------------
    async def request(self, message: WireModel) -> Any:
        """The client channel of the runtime: approvals go to the editor; questions, hooks
        and client tools are not part of ACP."""
        if not isinstance(message, ApprovalRequest):
            raise ClientRequestError(f"{type(message).__name__} is not supported over ACP", unsupported=True)
        tool_call = ToolCallUpdate(
            tool_call_id=self.mapper.acp_id(message.tool_call_id),
            title=message.description,
            kind=tool_kind(message.sender),  # pyright: ignore[reportArgumentType]
            status="pending",
            content=_permission_content(message.display, self.runtime.options.work_dir) or None,
        )
        try:
            response = await self._client.request_permission(
                session_id=self.id, tool_call=tool_call, options=_PERMISSION_OPTIONS
            )
        except (RequestError, ConnectionError, ValueError) as exc:
            raise ClientRequestError(str(exc), closed=isinstance(exc, ConnectionError)) from None
        outcome = response.outcome
        chosen = getattr(outcome, "option_id", None) if outcome.outcome == "selected" else None
        answer = chosen if chosen in ("approve", "approve_for_session") else "reject"
        return {"request_id": message.id, "response": answer}

    # -- turns ----------------------------------------------------------------
    async def prompt(self, blocks: list[PromptBlock]) -> dict[str, Any]:
        """Run one turn; returns the `session/prompt` result."""
        if self._scope is not None:
            raise RequestError(-32602, f"A prompt is already running in session {self.id}")
        parts = user_input(blocks)
        scope = anyio.CancelScope()
        self._scope = scope
        self._turn_done = anyio.Event()
        self.mapper.usage = type(self.mapper.usage)()
        self.mapper.begin_turn()
        stop_reason = "cancelled"
        try:
            with scope:
                outcome = await self.runtime.soul.run(parts)
                stop_reason = {"max_steps_reached": "max_turn_requests", "cancelled": "cancelled"}.get(
                    outcome.status, "end_turn"
                )
        except (LLMNotSet, LLMNotSupported, ChatProviderError) as exc:
            raise model_error(exc) from None
        finally:
            self.mapper.close_open("Cancelled." if scope.cancel_called else "The turn ended.")
            self._scope = None
            self._turn_done.set()
            self._plan_mode_changed(self.runtime.plan.enabled)  # `/plan`, `/yolo` change the mode too
        result: dict[str, Any] = {"stopReason": stop_reason}
        usage = self.mapper.usage.as_acp()
        if usage is not None:
            result["usage"] = usage
        return result

    def cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    # -- history --------------------------------------------------------------
    def replay(self) -> None:
        """Send the whole recorded history as updates (for `session/load`)."""
        for message in self.runtime.session.store.wire_records():
            self.mapper.replay(parse_envelope(str(message.get("type", "")), message.get("payload")))
        self.mapper.close_open("The turn ended before this tool finished.")

    # -- modes and options ------------------------------------------------------
    def current_mode(self) -> str:
        if self.runtime.plan.enabled:
            return "plan"
        return "yolo" if self.runtime.broker.yolo else "default"

    def modes(self) -> SessionModeState:
        return SessionModeState(current_mode_id=self.current_mode(), available_modes=list(MODES))

    def set_mode(self, mode_id: str) -> None:
        if mode_id not in {m.id for m in MODES}:
            raise RequestError(-32602, f"Unknown mode {mode_id!r} (modes: default, plan, yolo)")
        self.runtime.broker.yolo = mode_id == "yolo"
        self.runtime.soul.state["yolo"] = mode_id == "yolo"
        if self.runtime.plan.enabled != (mode_id == "plan"):
            self.runtime.set_plan_mode(mode_id == "plan")
        self._mode = mode_id
        self.runtime.save_state()

    def _plan_mode_changed(self, _enabled: bool) -> None:
        mode = self.current_mode()
        if mode != self._mode:
            self._mode = mode
            self._send({"sessionUpdate": "current_mode_update", "currentModeId": mode})
            options = [dump(o) for o in self.config_options()]
            self._send({"sessionUpdate": "config_option_update", "configOptions": options})

    def config_options(self) -> list[SessionConfigOptionSelect]:
        model = self.runtime.soul.model
        current = model.alias if model is not None else ""
        aliases = list(self.runtime.config.models) or ([current] if current else [])
        if current and current not in aliases:
            aliases.append(current)
        choices = [SessionConfigSelectOption(value=a, name=a) for a in aliases]
        thinking = "on" if model is not None and model.thinking else "off"
        return [
            SessionConfigOptionSelect(
                type="select",
                id="mode",
                name="Mode",
                category="mode",
                current_value=self.current_mode(),
                options=[
                    SessionConfigSelectOption(value=m.id, name=m.name, description=m.description)
                    for m in MODES
                ],
            ),
            SessionConfigOptionSelect(
                type="select",
                id="model",
                name="Model",
                category="model",
                current_value=current,
                options=choices or [SessionConfigSelectOption(value="", name="(no model configured)")],
            ),
            SessionConfigOptionSelect(
                type="select",
                id="thinking",
                name="Thinking",
                category="thought_level",
                current_value=thinking,
                options=[
                    SessionConfigSelectOption(value="off", name="Off"),
                    SessionConfigSelectOption(value="on", name="On"),
                ],
            ),
        ]

    def set_config_option(self, config_id: str, value: str | bool) -> None:
        if config_id == "mode" and isinstance(value, str):
            self.set_mode(value)  # the same choice as session/set_mode, for clients that use options
            return
        soul = self.runtime.soul
        alias = soul.model.alias if soul.model is not None else self.runtime.options.model_alias
        thinking = soul.model.thinking if soul.model is not None else None
        if config_id == "model" and isinstance(value, str):
            if value not in self.runtime.config.models and value != alias:
                raise RequestError(-32602, f"Unknown model {value!r}")
            alias = value
        elif config_id == "thinking" and (value in ("on", "off") or isinstance(value, bool)):
            thinking = value is True or value == "on"
        else:
            raise RequestError(-32602, f"Unknown config option {config_id!r} or value {value!r}")
        if self._scope is not None:
            raise RequestError(-32602, "The model cannot change while a prompt is running")
        try:
            model = resolve_model(
                self.runtime.config,
                model_alias=alias
                if alias in self.runtime.config.models
                else self.runtime.options.model_alias,
                thinking=thinking,
            )
        except LLMNotSet as exc:
            raise RequestError(-32602, str(exc)) from None
        if thinking and (model is None or not model.thinking):
            raise RequestError(-32602, f"The model {alias!r} does not support thinking")
        soul.model = model

    def send_commands(self) -> None:
        commands: list[dict[str, Any]] = []
        for command in self.runtime.soul.slash_commands.describe():
            entry: dict[str, Any] = {"name": command["name"], "description": command["description"]}
            hint = _COMMAND_HINTS.get(command["name"])
            if str(command["name"]).startswith("skill:"):
                hint = "what you want done (optional)"
            if hint:
                entry["input"] = {"hint": hint}
            commands.append(entry)
        self._send({"sessionUpdate": "available_commands_update", "availableCommands": commands})
