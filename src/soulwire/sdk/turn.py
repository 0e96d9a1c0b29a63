"""Turns and steps (the seed's Turn/Step model).

A `Turn` is one prompt → answer exchange. Iterate it for every event as it arrives, or
`async for step in turn.iter_steps()` / `async for event in step` to see the events grouped
by model step; `await turn` waits for the end. Everything is also recorded, so the
`TurnResult` (status, steps, summed token usage, final text) is complete even for code that
never looked at the stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import anyio

from soulwire.sdk.errors import ProtocolError, SDKError, TurnNotFinishedError
from soulwire.sdk.jsonutil import as_object
from soulwire.sdk.stream import _END, EventStream
from soulwire.wire.fold import assemble, joined_text
from soulwire.wire.messages import (
    StatusUpdate,
    StepBegin,
    StepInterrupted,
    StepRetry,
    ToolResult,
    TurnBegin,
    TurnEnd,
)
from soulwire.wire.types import (
    TextPart,
    ThinkPart,
    TokenUsage,
    ToolCall,
    ToolCallPart,
    UserInput,
)

if TYPE_CHECKING:
    from soulwire.sdk.approvals import Approval, Question


class _TurnOwner(Protocol):
    """What a Turn needs from its session."""

    def _cancel_stream(self, stream: EventStream, *, wait_answer: bool) -> anyio.Event | None: ...
    async def steer(self, user_input: UserInput | Sequence[Any]) -> None: ...


class Step:
    """One model step: its events (after `StepBegin`), in order. Step 0 holds output that
    no model step produced (e.g. a slash command's text)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.events: list[Any] = []
        self.retries = 0
        """How many times the engine retried the model call (`StepRetry` events)."""
        self.interrupted = False
        """The step failed (`StepInterrupted`)."""
        self._kept_from = 0  # output streamed before the last StepRetry is void
        self._texts: list[str] = []  # chunks kept as strings only (Turn.record_chunks False)
        self._thoughts: list[str] = []
        self._usage: list[int] | None = None
        self._live: EventStream | None = None

    def __repr__(self) -> str:
        return f"<Step {self.n}: {len(self.events)} events>"

    # -- summaries ----------------------------------------------------------------
    @property
    def usage(self) -> TokenUsage | None:
        """Token usage the engine reported for this step, if any."""
        if self._usage is None:
            return None
        return TokenUsage(
            input_other=self._usage[0],
            output=self._usage[1],
            input_cache_read=self._usage[2],
            input_cache_creation=self._usage[3],
        )

    def _valid(self) -> list[Any]:
        return self.events[self._kept_from :]

    @property
    def text(self) -> str:
        """The step's text, joined (chunks of a retried attempt excluded)."""
        if self._texts:
            return "".join(self._texts)
        return joined_text(self._valid())

    @property
    def thinking(self) -> str:
        if self._thoughts:
            return "".join(self._thoughts)
        return "".join(e.think for e in self._valid() if type(e) is ThinkPart)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The step's tool calls with their streamed argument fragments assembled."""
        return assemble(self._valid())[1]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [e for e in self.events if type(e) is ToolResult]

    @property
    def approvals(self) -> list[Approval]:
        from soulwire.sdk.approvals import Approval

        return [e for e in self.events if isinstance(e, Approval)]

    # -- recording (reader side) --------------------------------------------------
    def _add_usage(self, usage: TokenUsage) -> None:
        if self._usage is None:
            self._usage = [0, 0, 0, 0]
        self._usage[0] += usage.input_other
        self._usage[1] += usage.output
        self._usage[2] += usage.input_cache_read
        self._usage[3] += usage.input_cache_creation

    # -- streaming ----------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[Any]:
        """While the step is current in `Turn.iter_steps()`, its events as they arrive;
        afterwards, its recorded events."""
        if self._live is not None:
            return _LiveStep(self, self._live)
        return _Recorded(list(self.events))


class _LiveStep:
    def __init__(self, step: Step, stream: EventStream) -> None:
        self._step = step
        self._stream = stream

    def __aiter__(self) -> _LiveStep:
        return self

    async def __anext__(self) -> Any:
        if self._step._live is not self._stream:
            raise StopAsyncIteration
        item = await self._stream._peek()
        if item is _END or type(item) is StepBegin:
            raise StopAsyncIteration
        self._stream._items.popleft()
        if type(item) is TurnEnd:
            raise StopAsyncIteration
        return item


class _Recorded:
    def __init__(self, items: list[Any]) -> None:
        self._items = iter(items)

    def __aiter__(self) -> _Recorded:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._items)
        except StopIteration:
            raise StopAsyncIteration from None


@dataclass(frozen=True)
class TurnResult:
    """How a turn ended."""

    status: str
    """`finished`, `cancelled` or `max_steps_reached` (a newer engine may add others)."""
    steps: list[Step] = field(default_factory=lambda: [])
    usage: TokenUsage = field(default_factory=TokenUsage)
    """Token usage summed over every step."""
    step_limit: int | None = None
    """The engine's step limit, reported with `max_steps_reached`."""
    context_usage: float | None = None
    """The last reported share of the context window in use (0 to 1)."""

    @property
    def text(self) -> str:
        """All the text of the turn."""
        return "".join(step.text for step in self.steps)

    @property
    def final_text(self) -> str:
        """The text of the last step that produced text: the agent's final answer."""
        for step in reversed(self.steps):
            text = step.text
            if text:
                return text
        return ""


ResultT = TypeVar("ResultT")


class _SessionStream(EventStream, Generic[ResultT]):
    """What a Turn and a Replay share: the session that started it, and the result it ends with."""

    _running: ClassVar[str]
    """The error message when `result` is read before the end."""

    def __init__(self, owner: _TurnOwner) -> None:
        super().__init__()
        self._owner = owner
        self._result: ResultT | None = None
        self.cancel_requested = False

    @property
    def result(self) -> ResultT:
        """The result once it ended; raises its error if it failed."""
        if not self._finished:
            raise TurnNotFinishedError(self._running)
        if self._failure is not None:
            raise self._failure
        assert self._result is not None
        return self._result

    async def wait(self) -> ResultT:
        """Wait for the end (events not read yet are skipped; they stay recorded)."""
        await self._drain()
        return self.result

    def __await__(self) -> Generator[Any, None, ResultT]:
        return self.wait().__await__()

    def _consumer_cancelled(self) -> None:
        if not self._finished:
            self._owner._cancel_stream(self, wait_answer=False)


class Turn(_SessionStream[TurnResult]):
    """A running prompt. Single consumer: iterate it, iterate `iter_steps()`, or await it."""

    _running = "the turn is still running: iterate it or `await turn` first"

    def __init__(self, owner: _TurnOwner, user_input: UserInput | Sequence[Any]) -> None:
        super().__init__(owner)
        self.user_input = user_input
        self.steps: list[Step] = []
        """Steps recorded so far (step 0 first, if there is one)."""
        self._current: Step | None = None
        self._step_by_begin: dict[int, Step] = {}
        self._usage = [0, 0, 0, 0]
        self.context_usage: float | None = None
        self.approvals: list[Approval | Question] = []
        """Approvals and questions the engine asked during this turn."""
        self.tool_tasks: set[anyio.CancelScope] = set()
        """Scopes of the external tool calls running for this turn."""
        self.request_params: Any = None
        """The `prompt` params, kept while the turn waits for a cancelled one to end."""
        self.record_chunks = True
        """Keep every text/thinking chunk in `steps[i].events`. `query()` turns it off: it
        keeps only their strings (the steps' `text`/`thinking` stay right), so a long stream
        leaves no heap of small objects for the garbage collector to rescan."""

    def __repr__(self) -> str:
        state = self._result.status if self._result else ("failed" if self._failure else "running")
        return f"<Turn {state}, {len(self.steps)} steps>"

    # -- recording (reader side) --------------------------------------------------
    def _on_event(self, event: Any) -> None:
        cls = type(event)
        if cls is TextPart or cls is ThinkPart or cls is ToolCallPart:
            step = self._current or self._open_step(0)
            if self.record_chunks or cls is ToolCallPart:
                step.events.append(event)
            elif cls is TextPart:
                step._texts.append(event.text)
            else:
                step._thoughts.append(event.think)
        elif cls is StepBegin:
            step = self._open_step(event.n)
            self._step_by_begin[id(event)] = step
        elif cls is TurnBegin or cls is TurnEnd:
            pass
        else:
            step = self._current or self._open_step(0)
            step.events.append(event)
            if cls is StatusUpdate:
                self._on_status(step, event)
            elif cls is StepRetry:
                step.retries += 1
                step._kept_from = len(step.events)
                step._texts.clear()
                step._thoughts.clear()
            elif cls is StepInterrupted:
                step.interrupted = True
        self._push(event)

    def _on_text(self, text: str) -> None:
        """A streamed text chunk as a plain string (`Session.prompt(text_as_str=True)`)."""
        (self._current or self._open_step(0))._texts.append(text)
        self._push(text)

    def _open_step(self, n: int) -> Step:
        step = Step(n)
        self.steps.append(step)
        self._current = step
        return step

    def _on_status(self, step: Step, status: StatusUpdate) -> None:
        usage = status.token_usage
        if usage is not None:
            step._add_usage(usage)
            totals = self._usage
            totals[0] += usage.input_other
            totals[1] += usage.output
            totals[2] += usage.input_cache_read
            totals[3] += usage.input_cache_creation
        if status.context_usage is not None:
            self.context_usage = status.context_usage

    def _complete(self, result: Any, error: SDKError | None) -> None:
        """The engine answered the prompt (or the connection died)."""
        if error is None:
            raw = as_object(result)
            if raw is None or not isinstance(raw.get("status"), str):
                error = ProtocolError(f"malformed prompt result: {result!r}")
            else:
                steps = raw.get("steps")
                self._result = TurnResult(
                    status=raw["status"],
                    steps=self.steps,
                    usage=self.usage,
                    step_limit=steps if isinstance(steps, int) else None,
                    context_usage=self.context_usage,
                )
        self._finish(error)

    # -- state ----------------------------------------------------------------------
    @property
    def usage(self) -> TokenUsage:
        """Token usage summed over the steps so far."""
        u = self._usage
        return TokenUsage(input_other=u[0], output=u[1], input_cache_read=u[2], input_cache_creation=u[3])

    @property
    def status(self) -> str | None:
        """The final status, or None while running (or when the turn failed)."""
        return self._result.status if self._result else None

    @property
    def error(self) -> BaseException | None:
        """Why the turn failed (an EngineError, EngineExitedError, …), once it did."""
        return self._failure

    # -- consumer API (also `result`, `wait()` and `await turn`) -----------------------
    async def iter_steps(self) -> AsyncIterator[Step]:
        """The turn's steps as they start; iterate each for its events. Moving on to the next
        step skips what was left unread of the previous one."""
        while True:
            item = await self._peek()
            if item is _END:
                if self._failure is not None:
                    raise self._failure
                return
            cls = type(item)
            self._items.popleft()
            if cls is TurnBegin or cls is TurnEnd:
                continue
            if cls is StepBegin:
                step = self._step_by_begin[id(item)]
            else:  # output before the first step: step 0, this item included
                step = self.steps[0]
                self._items.appendleft(item)
            step._live = self
            try:
                yield step
            finally:
                step._live = None
            while True:  # skip the rest of that step
                item = await self._peek()
                if item is _END or type(item) is StepBegin:
                    break
                self._items.popleft()

    async def cancel(self, *, wait: bool = True, timeout: float | None = 30.0) -> None:
        """Ask the engine to cancel; with `wait`, return once the turn has ended."""
        if self._finished:
            return
        answered = self._owner._cancel_stream(self, wait_answer=True)
        if answered is not None:
            await answered.wait()
        if wait:
            with anyio.fail_after(timeout):
                await self._ended.wait()

    async def steer(self, user_input: UserInput | Sequence[Any]) -> None:
        """Add input to this running turn (engines with `steer` only)."""
        await self._owner.steer(user_input)


@dataclass(frozen=True)
class ReplayResult:
    status: str
    """`finished` or `cancelled`."""
    events: int
    requests: int


class Replay(_SessionStream[ReplayResult]):
    """The session's recorded history re-streamed by the engine. Recorded requests come as
    plain wire models (ApprovalRequest, ToolCallRequest): they are history, not questions."""

    _running = "the replay is still running"

    def __init__(self, owner: _TurnOwner) -> None:
        super().__init__(owner)
        self.events: list[Any] = []

    def _on_event(self, event: Any) -> None:
        self.events.append(event)
        self._push(event)

    def _complete(self, result: Any, error: SDKError | None) -> None:
        if error is None:
            try:
                raw = as_object(result) or {}
                self._result = ReplayResult(str(raw["status"]), int(raw["events"]), int(raw["requests"]))
            except (TypeError, KeyError, ValueError):
                error = ProtocolError(f"malformed replay result: {result!r}")
        self._finish(error)

    async def cancel(self) -> None:
        if not self._finished:
            answered = self._owner._cancel_stream(self, wait_answer=True)
            if answered is not None:
                await answered.wait()
            await self._ended.wait()


__all__ = ["Replay", "ReplayResult", "Step", "Turn", "TurnResult"]
