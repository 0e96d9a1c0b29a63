"""The typed messages `query()` yields: whole assistant text, thinking, tool use, tool result,
status, and one final `ResultMessage`.

Streamed parts are merged with the shared fold (`soulwire.wire.fold.Merger`), so a message
arrives once it is complete (the next event does not continue it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from soulwire.wire.fold import Merger
from soulwire.wire.messages import StatusUpdate, StepBegin, ToolResult
from soulwire.wire.types import ContentPart, TextPart, ThinkPart, TokenUsage, ToolCall, WireModel


@dataclass(frozen=True, slots=True)
class AssistantText:
    """Text the model wrote (one merged run of chunks)."""

    text: str
    step: int


@dataclass(frozen=True, slots=True)
class Thinking:
    """The model's reasoning (one merged run of thinking chunks)."""

    thinking: str
    step: int


@dataclass(frozen=True, slots=True)
class ToolUse:
    """The model called a tool. `input` is the parsed arguments (None when they are absent or
    not a JSON object: `arguments` keeps the raw string)."""

    id: str
    name: str
    input: dict[str, Any] | None
    arguments: str | None
    step: int


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    """What a tool returned (`output` for the model, `message` a note to it)."""

    tool_use_id: str
    is_error: bool
    output: str | list[ContentPart]
    message: str
    step: int


@dataclass(frozen=True, slots=True)
class Status:
    """A status update from the engine (null fields: unchanged or unknown)."""

    token_usage: TokenUsage | None
    context_usage: float | None
    plan_mode: bool | None
    step: int


StopReason = Literal["finished", "cancelled", "max_steps_reached", "budget_exceeded", "error"]
Limit = Literal["max_steps", "turn_timeout", "max_budget_usd", "budget"]


@dataclass(frozen=True, slots=True)
class ResultMessage:
    """The end of a `query()`: always the last message, also when the run failed.

    `stop_reason` is the engine's turn status (`finished`, `cancelled`, `max_steps_reached`,
    `budget_exceeded`; a newer engine may add others) or `error` (then `error` says why).
    `limit` names the limit that ended the run, if one did: `max_steps` (the engine's step
    limit), `max_budget_usd` or `budget` (a limit of `Options.budget`; the engine stopped the
    turn), `turn_timeout` (the SDK cancelled the turn)."""

    session_id: str | None
    stop_reason: str
    text: str
    """The final answer: the text of the last step that wrote any."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float | None = None
    """From `usage` and the price table; None when the model has no price."""
    duration_s: float = 0.0
    num_steps: int = 0
    num_turns: int = 0
    limit: Limit | None = None
    error: BaseException | None = None
    structured_output: Any = None

    @property
    def is_error(self) -> bool:
        return self.stop_reason == "error"


Message: TypeAlias = AssistantText | Thinking | ToolUse | ToolResultMessage | Status | ResultMessage


def parse_tool_input(arguments: str | None) -> dict[str, Any] | None:
    if not arguments:
        return None
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class MessageFolder:
    """Turns a turn's wire events into `Message`s: `feed` each event, then `flush` at the end."""

    __slots__ = ("_merger", "_out", "step")

    def __init__(self) -> None:
        self._out: list[Message] = []
        self._merger = Merger(self._convert)
        self.step = 0

    def feed(self, event: Any) -> list[Message]:
        """The messages completed by `event` (often none: a chunk extends the open run)."""
        if isinstance(event, WireModel):
            if type(event) is StepBegin:
                self._merger.flush()
                self.step = event.n
            else:
                self._merger.push(event)
        return self._take()

    def feed_many(self, events: list[Any], watch: Callable[[Any], None] | None = None) -> list[Message]:
        """`feed` for a batch (the hot path): a text or thinking chunk that continues the
        open run goes straight into the fold's run, skipping the per-event dispatch; a text
        chunk may also be a plain `str` (`Session.prompt(text_as_str=True)`). Every other
        event goes through `feed` and, first, to `watch`."""
        merger = self._merger
        append = self._run_appender()
        for item in events:
            event: Any = item
            cls = type(event)
            if cls is str:  # a text chunk delivered as a plain string
                if append is not None and append[0] is TextPart:
                    append[1](event)
                    continue
                event, cls = TextPart(text=event), TextPart
            if append is not None and cls is append[0]:
                if cls is TextPart:
                    append[1](event.text)
                    continue
                if event.encrypted is None:
                    append[1](event.think)
                    continue
            if watch is not None:
                watch(event)
            if isinstance(event, WireModel):
                if cls is StepBegin:
                    merger.flush()
                    begin: Any = event
                    self.step = begin.n
                else:
                    merger.push(event)
            append = self._run_appender()
        return self._take()

    def _run_appender(self) -> tuple[type, Callable[[str], None]] | None:
        """(the chunk type that continues the open run, where its text goes), if the open
        run is plain text or thinking that may still grow."""
        run = self._merger.open_run
        if run is None:
            return None
        head = type(run.head)
        if head is TextPart or (head is ThinkPart and run.encrypted is None):
            return head, run.chunks.append
        return None

    def flush(self) -> list[Message]:
        self._merger.flush()
        return self._take()

    def _take(self) -> list[Message]:
        out = self._out
        if not out:
            return out
        self._out = []
        return out

    def _convert(self, merged: WireModel) -> None:
        cls = type(merged)
        step = self.step
        if cls is TextPart:
            text: Any = merged
            if text.text:
                self._out.append(AssistantText(text.text, step))
        elif cls is ThinkPart:
            think: Any = merged
            if think.think:
                self._out.append(Thinking(think.think, step))
        elif cls is ToolCall:
            call: Any = merged
            args: str | None = call.function.arguments
            self._out.append(ToolUse(call.id, call.function.name, parse_tool_input(args), args, step))
        elif cls is ToolResult:
            result: Any = merged
            value = result.return_value
            self._out.append(
                ToolResultMessage(result.tool_call_id, value.is_error, value.output, value.message, step)
            )
        elif cls is StatusUpdate:
            status: Any = merged
            self._out.append(Status(status.token_usage, status.context_usage, status.plan_mode, step))
        # Everything else (media parts, sub-agent events, hooks, …) is left to `Session`.


__all__ = [
    "AssistantText",
    "Limit",
    "Message",
    "MessageFolder",
    "ResultMessage",
    "Status",
    "StopReason",
    "Thinking",
    "ToolResultMessage",
    "ToolUse",
    "parse_tool_input",
]
