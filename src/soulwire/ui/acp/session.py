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
    SessionMode,
    SessionModeState,
    ToolCallUpdate,
)

from soulwire.engine.client import ClientRequestError
from soulwire.llm.errors import AuthenticationError, LLMNotSet, LLMNotSupported, ProviderError
from soulwire.runtime.builder import Runtime
from soulwire.runtime.model_switch import ModelSwitchError, model_info, switch_model
from soulwire.tools.base import ActionRequest, ApprovalOutcome
from soulwire.ui.acp.editor import EditorFiles, EditorTerminal
from soulwire.ui.acp.handshake import ClientCapabilities
from soulwire.ui.acp.options import mode_option, model_change, model_options, sandbox_option
from soulwire.ui.acp.prompts import PromptBlock, user_input
from soulwire.ui.acp.tooling import ToolContent, diff_content, text_content, tool_kind
from soulwire.ui.acp.updates import UpdateMapper, dump
from soulwire.wire.messages import ApprovalRequest, parse_envelope
from soulwire.wire.model_switch import ModelChanged
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

    async def request(self, request: ActionRequest) -> ApprovalOutcome:
        outcome: ApprovalOutcome = await self._broker.request(request)
        if outcome.approved:
            self._started(request.tool_call_id)
        return outcome


STOP_REASONS = {
    # a prompt's Wire status → its ACP stop reason (also for sessions reached through `serve`)
    "max_steps_reached": "max_turn_requests",
    "budget_exceeded": "max_turn_requests",  # a token limit: max_tokens (ACP has no budget reason)
    "cancelled": "cancelled",
}
REDRAW = "_soulwire/redraw"
"""The extension notification that tells an editor to clear a session's view: the replay of
its conversation as it now is follows (ClientCapabilities.redraw)."""
_COMMAND_HINTS = {
    "compact": "what to keep in focus (optional)",
    "plan": "on | off | view | clear",
    "model": "a model, and/or thinking | no-thinking",
}


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


async def ask_permission(
    client: PermissionAsker, session_id: str, mapper: UpdateMapper, message: ApprovalRequest, work_dir: Path
) -> str:
    """Ask the editor about one approval (`session/request_permission`); the Wire answer
    (`approve`, `approve_for_session` or `reject`: a cancelled request rejects)."""
    tool_call = ToolCallUpdate(
        tool_call_id=mapper.acp_id(message.tool_call_id),
        title=message.description,
        kind=tool_kind(message.sender),
        status="pending",
        content=_permission_content(message.display, work_dir) or None,
    )
    response = await client.request_permission(
        session_id=session_id, tool_call=tool_call, options=_PERMISSION_OPTIONS
    )
    outcome = response.outcome
    chosen = getattr(outcome, "option_id", None) if outcome.outcome == "selected" else None
    return chosen if chosen in ("approve", "approve_for_session") else "reject"


def session_not_found(session_id: str, hint: str = "") -> RequestError:
    """ACP's -32002 for a session this agent cannot find (`hint`: where it looked, or how to
    open one), the one spelling of it for every path that reports it."""
    where = f" ({hint})" if hint else ""
    return RequestError(-32002, f"Session not found: {session_id}{where}", {"sessionId": session_id})


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
        extension: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.id = runtime.session.id
        self._client = client
        self._notify = notify
        self._redraw = extension if capabilities.redraw else None
        """Sends `_soulwire/redraw` to an editor that asked for it (ClientCapabilities.redraw)."""
        self._scope: anyio.CancelScope | None = None
        self._turn_done = anyio.Event()
        self._turn_done.set()
        self._closing = anyio.Event()
        self._ended = anyio.Event()
        self.v2 = capabilities.v2
        self.mapper = UpdateMapper(runtime.options.work_dir, self._send, self._plan_mode_changed, v2=self.v2)
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
        self._switching = False
        runtime.bus.subscribe(self._model_changed)

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
        try:
            answer = await ask_permission(
                self._client, self.id, self.mapper, message, self.runtime.options.work_dir
            )
        except (RequestError, ConnectionError, ValueError) as exc:
            raise ClientRequestError(str(exc), closed=isinstance(exc, ConnectionError)) from None
        return {"request_id": message.id, "response": answer}

    # -- turns ----------------------------------------------------------------
    async def prompt(self, blocks: list[PromptBlock]) -> dict[str, Any]:
        """Run one turn; returns the `session/prompt` result."""
        if self._scope is not None:
            raise RequestError(-32602, f"A prompt is already running in session {self.id}")
        from soulwire.ui.acp import checkpoints

        access = checkpoints.RuntimeCheckpoints(self.runtime)
        command = checkpoints.command_of(access, blocks)
        if command is not None:
            text = await checkpoints.answer_text(access, command, self._redraw_view if self._redraw else None)
            self._send({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
            return {"stopReason": "end_turn"}
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
                stop_reason = STOP_REASONS.get(outcome.status, "end_turn")
                ledger = self.runtime.ledger
                if outcome.status == "budget_exceeded" and ledger is not None and ledger.hit is not None:
                    stop_reason = "max_tokens" if ledger.hit[2] == "tokens" else stop_reason
        except (LLMNotSet, LLMNotSupported, ProviderError) as exc:
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

    @property
    def busy(self) -> bool:
        """A prompt is running."""
        return self._scope is not None

    def sandbox_mode(self) -> str:
        sandbox = self.runtime.soul.sandbox
        return sandbox.mode if sandbox is not None else "off"

    # -- history --------------------------------------------------------------
    async def _redraw_view(self) -> None:
        """The editor clears its view of the session; the history as it now is is drawn again."""
        assert self._redraw is not None
        self._redraw(REDRAW, {"sessionId": self.id})
        self.replay()

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

    def modes(self) -> SessionModeState | None:
        """The modes of a session answer (v2 has the `mode` config option only)."""
        if self.v2:
            return None
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
            if not self.v2:  # v2 has the mode as a config option only
                self._send({"sessionUpdate": "current_mode_update", "currentModeId": mode})
            self._send({"sessionUpdate": "config_option_update", "configOptions": self._dumped_options()})

    def config_options(self) -> list[SessionConfigOptionSelect]:
        model, thinking = model_options(model_info(self.runtime))
        return [mode_option(self.current_mode(), MODES), model, sandbox_option(self.sandbox_mode()), thinking]

    def set_config_option(self, config_id: str, value: str | bool) -> None:
        if config_id == "mode" and isinstance(value, str):
            self.set_mode(value)  # the same choice as session/set_mode, for clients that use options
            return
        change = model_change(config_id, value)
        if self._scope is not None:
            raise RequestError(-32602, "The model cannot change while a prompt is running")
        self._switching = True  # the editor gets the options in the answer, not as an update too
        try:
            switch_model(self.runtime, **change)
        except ModelSwitchError as exc:
            raise RequestError(-32602, str(exc)) from None
        finally:
            self._switching = False

    def _model_changed(self, message: WireModel) -> None:
        """The model or thinking changed (`set_model` from another face): the editor's pickers follow."""
        if isinstance(message, ModelChanged) and not self._switching:
            self._send({"sessionUpdate": "config_option_update", "configOptions": self._dumped_options()})

    def _dumped_options(self) -> list[dict[str, Any]]:
        return [dump(o) for o in self.config_options()]

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
        if self.runtime.soul.workspace is not None:
            from soulwire.ui.acp.checkpoints import RuntimeCheckpoints, available

            commands += available(RuntimeCheckpoints(self.runtime))
        self._send({"sessionUpdate": "available_commands_update", "availableCommands": commands})
