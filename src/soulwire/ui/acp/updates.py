"""Engine events → ACP `session/update`s, for live turns and for replaying a session.

Live, the raw stream gives text and thinking chunk by chunk as the model produces them (and
the start of each tool call), the merged stream the complete tool calls, results and status.
A tool call goes pending (the model is writing it) → in_progress (approved, or started) →
completed / failed (its result, or the end of the turn for one that never got a result)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring  # the C encoder of a JSON string
from pathlib import Path
from typing import Any

from acp.schema import (
    AgentPlanContentUpdate,
    AgentPlanUpdate,
    PlanEntry,
    PlanUpdateItems,
    TerminalToolCallContent,
    ToolCallProgress,
    ToolCallStart,
)
from pydantic import BaseModel

from soulwire.ids import uuid4_hex
from soulwire.ui.acp.tooling import NEVER_ASK, describe_call, plan_entries, result_content, text_content
from soulwire.ui.acp.v2 import PLAN_ID
from soulwire.wire.budget import BudgetUpdate
from soulwire.wire.messages import StatusUpdate, SteerInput, StepRetry, ToolResult, TurnBegin
from soulwire.wire.types import (
    AudioURLPart,
    ImageURLPart,
    TextPart,
    ThinkPart,
    ToolCall,
    UserInput,
    WireModel,
)

Send = Callable[[dict[str, Any] | str], None]
"""Delivers one `update` object (the value of `params.update`), or its JSON text."""


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _chunk(kind: str, text: str) -> str:
    """A text chunk update as JSON text, built directly: there is one per streamed chunk."""
    return f'{{"sessionUpdate":"{kind}","content":{{"type":"text","text":{_json_string(text)}}}}}'


_json_string: Callable[[str], str] = encode_basestring


def _media_block(url: str, kind: str) -> dict[str, Any] | None:
    """A data URL as an ACP image/audio block (other URLs are not shown)."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    mime, _, data = url[5:].partition(";base64,")
    return {"type": kind, "mimeType": mime, "data": data}


def user_chunks(user_input: UserInput) -> list[dict[str, Any] | str]:
    """A user input as `user_message_chunk`s (for replay)."""
    if isinstance(user_input, str):
        return [_chunk("user_message_chunk", user_input)] if user_input else []
    chunks: list[dict[str, Any] | str] = []
    for part in user_input:
        block: dict[str, Any] | None = None
        if isinstance(part, TextPart):
            block = {"type": "text", "text": part.text}
        elif isinstance(part, ImageURLPart):
            block = _media_block(part.image_url.url, "image")
        elif isinstance(part, AudioURLPart):
            block = _media_block(part.audio_url.url, "audio")
        if block is not None:
            chunks.append({"sessionUpdate": "user_message_chunk", "content": block})
    return chunks


@dataclass
class TurnUsage:
    """Token counts of a turn, summed over its steps."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    seen: bool = False

    def as_acp(self) -> dict[str, int] | None:
        if not self.seen:
            return None
        return {
            "totalTokens": self.input + self.output,
            "inputTokens": self.input,
            "outputTokens": self.output,
            "cachedReadTokens": self.cache_read,
            "cachedWriteTokens": self.cache_write,
        }


def _usage_update(update: BudgetUpdate, context: tuple[int, int]) -> dict[str, Any]:
    """ACP's `usage_update` while a budget is set: the context's use, what the session tree
    has cost, and (in `_meta`) the budget with what each scope spent and has left."""
    body: dict[str, Any] = {"sessionUpdate": "usage_update", "used": context[0], "size": context[1]}
    spent = update.spent.get("tree")
    if spent is not None and spent.usd is not None:
        body["cost"] = {"amount": spent.usd, "currency": "USD"}
    body["_meta"] = {"soulwire/budget": update.model_dump(mode="json")}
    return body


@dataclass
class _Call:
    name: str
    status: str = "pending"
    terminal: str | None = None  # the editor terminal the command runs in


@dataclass
class UpdateMapper:
    """Turns one session's events into updates and keeps its open tool calls."""

    work_dir: Path
    send: Send
    on_plan_mode: Callable[[bool], None] = lambda _enabled: None
    v2: bool = False
    """ACP v2 alpha (ui/acp/v2.py): a call starts with `tool_call_update`, the plan is `plan_update`."""
    usage: TurnUsage = field(default_factory=TurnUsage)
    _calls: dict[str, _Call] = field(default_factory=dict[str, _Call])
    _turn: str = field(default_factory=lambda: uuid4_hex()[:8])
    _context: tuple[int, int] = (0, 0)
    """The context's tokens and size, from the last StatusUpdate that said them."""

    def begin_turn(self) -> None:
        """A new turn: its tool call ids get a new prefix."""
        self._turn = uuid4_hex()[:8]

    def acp_id(self, call_id: str) -> str:
        """The tool call's id for the editor. Models reuse ids across turns (kimi numbers them
        per message), editors key calls by id for the whole session: the turn makes it unique."""
        return f"{self._turn}/{call_id}"

    # -- live ---------------------------------------------------------------
    def raw(self, message: WireModel) -> None:
        kind = type(message)
        if kind is TextPart:
            self.send(_chunk("agent_message_chunk", message.text))  # pyright: ignore[reportAttributeAccessIssue]
        elif kind is ThinkPart:
            if message.think:  # pyright: ignore[reportAttributeAccessIssue]
                self.send(_chunk("agent_thought_chunk", message.think))  # pyright: ignore[reportAttributeAccessIssue]
        elif kind is ToolCall:
            assert isinstance(message, ToolCall)
            self._start(message.id, message.function.name, None)

    def merged(self, message: WireModel) -> None:
        if isinstance(message, ToolCall):
            self._describe(message)
        elif isinstance(message, ToolResult):
            self._finish(message)
        elif isinstance(message, StatusUpdate):
            self._status(message)
        elif isinstance(message, StepRetry):
            self.close_open("The model call was retried.")
        elif isinstance(message, BudgetUpdate):
            self.send(_usage_update(message, self._context))

    # -- replay -------------------------------------------------------------
    def replay(self, message: WireModel) -> None:
        """One recorded event (merged form) of a session's history."""
        if isinstance(message, TurnBegin):
            self.begin_turn()
        if isinstance(message, TurnBegin | SteerInput):
            for chunk in user_chunks(message.user_input):
                self.send(chunk)
        elif isinstance(message, TextPart):
            if message.text:
                self.send(_chunk("agent_message_chunk", message.text))
        elif isinstance(message, ThinkPart):
            if message.think:
                self.send(_chunk("agent_thought_chunk", message.think))
        elif isinstance(message, ToolCall):
            self._start(message.id, message.function.name, message.function.arguments)
        elif isinstance(message, ToolResult):
            self._finish(message)
        elif type(message).__name__ == "TurnEnd":
            self.close_open("The turn ended before this tool finished.")

    # -- tool calls ---------------------------------------------------------
    def _start(self, call_id: str, name: str, arguments: str | None) -> None:
        view = describe_call(name, arguments, self.work_dir)
        self._calls[call_id] = _Call(name)
        start = ToolCallStart(
            session_update="tool_call",
            tool_call_id=self.acp_id(call_id),
            title=view.title,
            kind=view.kind,  # pyright: ignore[reportArgumentType]
            status="pending",
            locations=view.locations or None,
            raw_input=view.raw_input,
        )
        body = dump(start)
        if self.v2:  # v2 has one upsert, keyed by the call's id, with the same fields
            body["sessionUpdate"] = "tool_call_update"
        self.send(body)

    def _describe(self, call: ToolCall) -> None:
        if call.id not in self._calls:
            self._calls[call.id] = _Call(call.function.name)
        view = describe_call(call.function.name, call.function.arguments, self.work_dir)
        update = ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=self.acp_id(call.id),
            title=view.title,
            kind=view.kind,  # pyright: ignore[reportArgumentType]
            locations=view.locations or None,
            raw_input=view.raw_input,
        )
        self.send(dump(update))

    def started(self, call_id: str) -> None:
        """The call was approved (or needed no approval) and runs now."""
        call = self._calls.get(call_id)
        if call is not None and call.status == "pending":
            call.status = "in_progress"
            update = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": self.acp_id(call_id),
                "status": "in_progress",
            }
            self.send(update)

    def terminal(self, call_id: str, terminal_id: str) -> None:
        """The call's command runs in an editor terminal: show it in the call."""
        call = self._calls.get(call_id)
        if call is not None:
            call.terminal = terminal_id
        self.send(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": self.acp_id(call_id),
                "content": [{"type": "terminal", "terminalId": terminal_id}],
            }
        )

    def _finish(self, result: ToolResult) -> None:
        call = self._calls.pop(result.tool_call_id, None)
        value = result.return_value
        if call is not None and call.status == "pending" and not value.is_error:
            self._calls[result.tool_call_id] = call
            self.started(result.tool_call_id)
            self._calls.pop(result.tool_call_id, None)
        content: list[Any] = result_content(value, work_dir=self.work_dir)
        if call is not None and call.terminal is not None:  # the terminal shows the output
            content = [TerminalToolCallContent(type="terminal", terminal_id=call.terminal)]
            if value.is_error and value.message:
                content.append(text_content(value.message))
        update = ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=self.acp_id(result.tool_call_id),
            status="failed" if value.is_error else "completed",
            content=content or None,
            raw_output=value.output if isinstance(value.output, str) else None,
        )
        self.send(dump(update))
        entries = plan_entries(value)
        if entries is not None:
            self.send(dump(self._plan(entries)))

    def _plan(self, entries: list[PlanEntry]) -> BaseModel:
        if not self.v2:
            return AgentPlanUpdate(session_update="plan", entries=entries)
        items = PlanUpdateItems(type="items", plan_id=PLAN_ID, entries=entries)
        return AgentPlanContentUpdate(session_update="plan_update", plan=items)

    def close_open(self, why: str) -> None:
        """Give every call still open a final status (cancel, retry, end of turn)."""
        calls, self._calls = self._calls, {}
        for call_id in calls:
            self.send(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": self.acp_id(call_id),
                    "status": "failed",
                    "content": [{"type": "content", "content": {"type": "text", "text": why}}],
                }
            )

    def _status(self, status: StatusUpdate) -> None:
        """End of a model call: its tools start now; usage and plan mode are noted."""
        for call_id, call in list(self._calls.items()):
            if call.name in NEVER_ASK:
                self.started(call_id)
        if status.context_tokens is not None and status.max_context_tokens is not None:
            self._context = (status.context_tokens, status.max_context_tokens)
        usage = status.token_usage
        if usage is not None:
            self.usage.seen = True
            self.usage.input += usage.input
            self.usage.output += usage.output
            self.usage.cache_read += usage.input_cache_read
            self.usage.cache_write += usage.input_cache_creation
        if status.plan_mode is not None:
            self.on_plan_mode(status.plan_mode)
        if status.context_tokens is not None and status.max_context_tokens:
            self.send(
                {
                    "sessionUpdate": "usage_update",
                    "used": max(status.context_tokens, 0),
                    "size": status.max_context_tokens,
                }
            )
