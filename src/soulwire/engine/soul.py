"""The soul: one turn is a loop of steps; a step is one model call plus the tools it asked
for (spec §4.1). Every started turn ends with TurnEnd, whatever ends it."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import anyio

from soulwire.config.model import LoopControl
from soulwire.engine import hook_points
from soulwire.engine.audio import for_hearing
from soulwire.engine.budget import BudgetStop
from soulwire.engine.bus import EventBus
from soulwire.engine.compaction import compact, compact_if_due, compaction_due, split_history
from soulwire.engine.context import Context, tool_message
from soulwire.engine.hooks import HookEngine
from soulwire.engine.plan import PlanMode
from soulwire.engine.slash import SlashCommands, parse_slash
from soulwire.llm.errors import (
    APIEmptyResponseError,
    ContextLengthExceededError,
    LLMNotSet,
    LLMNotSupported,
    ProviderError,
)
from soulwire.llm.message import Message
from soulwire.llm.provider import ChatRequest, StreamResult, ToolSpec
from soulwire.llm.registry import ResolvedModel
from soulwire.sessions.interrupted import (
    CANCELLED,
    ENGINE_STOPPED,
    STEP_FAILED,
    interrupted_result,
    resumed_notice,
)
from soulwire.tools.base import (
    Approver,
    ClientTools,
    CommandRunner,
    FileAccess,
    NoticeSource,
    ToolContext,
    Toolset,
)
from soulwire.tools.lifetime import collect_groups
from soulwire.wire.fold import Merger, assemble
from soulwire.wire.messages import (
    StatusUpdate,
    SteerInput,
    StepBegin,
    StepInterrupted,
    StepRetry,
    ToolResult,
    TurnBegin,
    TurnEnd,
)
from soulwire.wire.types import (
    ImageURLPart,
    SandboxStatus,
    TextPart,
    ThinkPart,
    TokenUsage,
    ToolCall,
    ToolCallPart,
    ToolReturnValue,
    UserInput,
    VideoURLPart,
    WireModel,
    user_input_text,
)

if TYPE_CHECKING:
    from soulwire.engine.budget import Meter
    from soulwire.engine.dmail import DMailBox
    from soulwire.engine.flows import Flow
    from soulwire.engine.overlay import OverlayTurns
    from soulwire.engine.recovery import Continuation
    from soulwire.engine.workspace import Workspace
    from soulwire.tools.mcp_client import MCPManager
    from soulwire.tools.sandbox import SandboxPolicy

TurnStatus = Literal["finished", "cancelled", "max_steps_reached", "budget_exceeded"]

"""Why a turn or a tool call was cut short (the engine stopping: sessions.interrupted)."""

RETRY_INITIAL_S = 0.3
RETRY_MAX_S = 5.0
RETRY_JITTER_S = 0.5
RETRY_AFTER_CAP_S = 60.0


class TurnOutcome(NamedTuple):
    status: TurnStatus
    steps: int | None = None


class _Reply:
    """The assistant message of one step, folded as it streams (only merged parts are kept)."""

    __slots__ = ("_merger", "add", "merged")

    def __init__(self) -> None:
        self.merged: list[WireModel] = []
        self._merger = Merger(self.merged.append)
        self.add = self._merger.push

    def finish(self) -> tuple[list[Any], list[ToolCall]]:
        self._merger.flush()
        return assemble(self.merged)

    def is_empty(self) -> bool:
        """No text, no media and no tool call: thinking alone counts as empty."""
        self._merger.flush()
        for part in self.merged:
            cls = type(part)
            if cls is ToolCall or (cls is TextPart and part.text):  # type: ignore[attr-defined]
                return False
            if cls is not ThinkPart and cls is not TextPart and cls is not ToolCallPart:
                return False
        return True


def required_capabilities(user_input: UserInput) -> list[str]:
    if isinstance(user_input, str):
        return []
    needed: list[str] = []
    for part in user_input:
        need = {
            ImageURLPart: "image_in",
            VideoURLPart: "video_in",
            ThinkPart: "thinking",
        }.get(
            type(part)  # pyright: ignore[reportArgumentType]
        )
        if need and need not in needed:
            needed.append(need)
    return needed


class RunningCall(NamedTuple):
    """A tool call in progress: its tool's name and the process groups it has started."""

    name: str
    groups: set[int]


class Soul:
    """Runs turns for one session."""

    def __init__(
        self,
        *,
        bus: EventBus,
        context: Context,
        toolset: Toolset,
        approver: Approver,
        model: ResolvedModel | None,
        loop_control: LoopControl,
        work_dir: Path,
        client_tools: ClientTools | None = None,
        slash_commands: SlashCommands | None = None,
        plan_mode: Callable[[], bool] = lambda: False,
        model_error: str | None = None,
        additional_dirs: Sequence[Path] = (),
    ) -> None:
        self.bus = bus
        self.context = context
        self.toolset = toolset
        self.approver = approver
        self.files: FileAccess | None = None  # a front end may route file tools through an editor
        self.terminal: CommandRunner | None = None  # … and Shell through the editor's terminal
        self.model = model
        self.loop_control = loop_control
        self.work_dir = work_dir
        self.client_tools = client_tools
        self.slash_commands = slash_commands or SlashCommands()
        self.plan_mode = plan_mode
        self.model_error = model_error
        self.state: dict[str, Any] = {}
        self.additional_dirs: list[Path] = list(additional_dirs)
        """Workspace directories besides the work dir (`--add-dir`), for the file tools."""
        self.plan: PlanMode | None = None
        """Plan mode, set by the runtime builder (with `plan_mode` reading it)."""
        self.hooks: HookEngine | None = None
        """The session's hooks, set by the runtime builder."""
        self.sandbox: SandboxPolicy | None = None
        """The session's sandbox, set by the runtime builder; handed to every tool call."""
        self.background: NoticeSource | None = None
        """Background tasks, set by the runtime builder: their end notices join the context."""
        self.switch_model: Callable[[str | None, bool | None], Any] | None = None
        """Switches the model and/or thinking (`/model`), set by the runtime builder."""
        self._steers: list[UserInput] = []
        self.dmail: DMailBox | None = None
        """Where SendDMail leaves its message (the okabe agent); set by the runtime builder."""
        self.steps_run = 0
        """Steps of the last agent loop that finished (a flow adds them up)."""
        self.rejected = False
        """The user rejected a tool call in the last inner turn (a flow stops then)."""
        self.mcp: MCPManager | None = None
        """The session's MCP servers (set by the runtime builder when any is configured)."""
        self.running_calls: dict[str, RunningCall] = {}
        """The tool calls running now, with the process groups each started (cancel receipts)."""
        self.workspace: Workspace | None = None
        """Checkpoints of the workspace (set by the runtime builder when they are on)."""
        self.overlay: OverlayTurns | None = None
        """Transactional turns: each turn in an overlay (set by the runtime builder)."""
        self._asked = False
        """The running turn's request joined the context (a cut-short turn then says so)."""
        self.meter: Meter | None = None
        """What this soul spends, against the session's budget (engine/budget.py); set by the
        runtime builder, and by the Agent tool for a sub-agent."""

    @property
    def max_context_size(self) -> int | None:
        return self.model.max_context_size if self.model else None

    async def run(self, user_input: UserInput, *, internal: bool = False) -> TurnOutcome:
        """Run one turn. Raises LLMNotSet / LLMNotSupported / ProviderError after the
        turn has been closed with TurnEnd; cancellation propagates after TurnEnd too.
        `internal`: the engine's own prompt (print mode's word that background tasks ended),
        not the user's: no UserPromptSubmit hook, slash command or Ralph loop."""
        self.bus.emit(TurnBegin(user_input=user_input))
        return await self._turn(lambda: self._turn_body(user_input, internal=internal), asked=False)

    async def continue_turn(self, plan: Continuation) -> TurnOutcome:
        """Continue the turn a dead process left waiting for approvals (engine/recovery.py),
        inside the TurnBegin it recorded: the waiting calls run again (and ask again), the
        loop goes on from the next step, and the turn ends with TurnEnd as `run`'s do."""
        return await self._turn(lambda: self._continue(plan), asked=True, continued=True)

    async def _turn(
        self, body: Callable[[], Awaitable[TurnOutcome]], *, asked: bool, continued: bool = False
    ) -> TurnOutcome:
        """What every turn does around its body: the meter, checkpoints and overlay, and
        TurnEnd however it ends (`asked`: the request is in the context already; `continued`:
        a dead process's turn, whose spending counts on in the turn's budget)."""
        self._asked = asked
        meter = self.meter
        if meter is not None:
            meter.turn_begin(continued=continued)
        try:
            if self.workspace is not None:
                await self.workspace.turn_begin()
            if self.overlay is not None:
                await self.overlay.turn_begin()
            return await body()
        except BaseException as exc:
            if self._asked:  # the model must know this request was not finished
                cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
                self.context.close_interrupted(CANCELLED if cancelled else STEP_FAILED)
            raise
        finally:
            self._steers = []  # a steer that came after the last step boundary is void
            if meter is not None:
                meter.turn_end()
            if self.overlay is not None:  # before the end checkpoint: a commit is the turn's
                await self.overlay.turn_end()
            if self.workspace is not None:
                await self.workspace.turn_end()
            self.bus.emit(TurnEnd())
            self.bus.flush()

    async def _turn_body(self, user_input: UserInput, *, internal: bool) -> TurnOutcome:
        if internal:
            return await self.inner_turn(user_input)
        # UserPromptSubmit runs inside the turn (TurnBegin first, unlike the reference):
        # clients expect every event of a prompt between TurnBegin and TurnEnd.
        refusal = await hook_points.prompt_refusal(self.hooks, user_input)
        if refusal is not None:
            self.bus.emit(TextPart(text=refusal))
            return TurnOutcome("finished")
        command = parse_slash(user_input)
        if command is not None:
            return await self.slash_commands.run(self, command) or TurnOutcome("finished")
        if self.loop_control.max_ralph_iterations != 0:
            return await self._ralph(user_input)
        return await self.inner_turn(user_input)

    async def _continue(self, plan: Continuation) -> TurnOutcome:
        """The rest of the step that was waiting (its finished calls keep their results, the
        running ones are told they were cut short), then the agent loop from the next step."""
        self.rejected = False
        calls = plan.calls
        values: list[ToolReturnValue | None] = [plan.results.get(c.id) for c in calls]
        published = [v is not None for v in values]  # (on record already)
        for index, call in enumerate(calls):
            if values[index] is None and call.id not in plan.asked:
                values[index] = interrupted_result(ENGINE_STOPPED)
        self.bus.emit(resumed_notice(list(plan.asked), plan.interrupted))
        if self.mcp is not None:  # a waiting call may be an MCP server's
            await self.mcp.settle(self.bus.emit)
        run = [i for i, c in enumerate(calls) if c.id in plan.asked]
        if not await self._step_tools(plan.step, calls, values, published, run):
            self.steps_run = plan.step
            return TurnOutcome("finished")
        # (the model is needed from here on: without one the turn ends as a prompt's would,
        # its calls answered in both records)
        return await self._run_loops(self._require_model(""), first=plan.step + 1)

    async def inner_turn(self, user_input: UserInput) -> TurnOutcome:
        """The body of a turn (no TurnBegin/TurnEnd of its own): the input joins the context
        and the agent loop runs on it. Also how `/skill:<name>` runs its skill (spec §4.13)."""
        model = self._require_model(user_input)
        self.context.checkpoint()
        self.context.append(Message(role="user", content=user_input))
        self._asked = True
        self.rejected = False
        return await self._run_loops(model)

    async def nested_turn(self, user_input: UserInput) -> tuple[str, str, int]:
        """One inner turn of a flow, wrapped in its own TurnBegin/TurnEnd inside the outer
        turn: (status — `rejected` when the user rejected a tool —, the final answer's text,
        steps used)."""
        self.bus.emit(TurnBegin(user_input=user_input))
        try:
            outcome = await self.inner_turn(user_input)
        finally:
            self.bus.emit(TurnEnd())
        status = "rejected" if outcome.status == "finished" and self.rejected else outcome.status
        last = next((m for m in reversed(self.context.history) if m.role == "assistant"), None)
        steps = outcome.steps if outcome.steps is not None else self.steps_run
        return status, last.text() if last is not None else "", steps

    async def walk_flow(self, flow: Flow, *, max_moves: int | None = None) -> TurnOutcome:
        """Walk a flow as nested turns (`/flow:<name>`, Ralph mode)."""
        from soulwire.engine.flows import MAX_FLOW_MOVES, run_flow  # flows and Ralph only

        moves = MAX_FLOW_MOVES if max_moves is None else max_moves
        status, steps = await run_flow(flow, self.nested_turn, max_moves=moves)
        if status == "max_steps_reached":
            return TurnOutcome("max_steps_reached", steps=steps)
        if status == "budget_exceeded":
            return TurnOutcome("budget_exceeded")
        return TurnOutcome("finished")

    async def _ralph(self, user_input: UserInput) -> TurnOutcome:
        """Ralph mode (`max_ralph_iterations` ≠ 0): the prompt, then the same prompt while
        the model answers CONTINUE, up to the limit (-1: no limit)."""
        from soulwire.engine.flows import ralph_flow

        limit = self.loop_control.max_ralph_iterations
        flow = ralph_flow(user_input_text(user_input).strip(), user_input)
        return await self.walk_flow(flow, max_moves=limit + 1 if limit > 0 else 10**15)

    def steer(self, user_input: UserInput) -> None:
        """Queue input for the running turn: it joins the context at the next step boundary.
        Raises LLMNotSupported when the model cannot take it (e.g. an image)."""
        if self.model is not None:
            missing = [c for c in required_capabilities(user_input) if c not in self.model.capabilities]
            if missing:
                raise LLMNotSupported(self.model.model_name, missing)
        self._steers.append(user_input)

    def _take_steers(self) -> bool:
        """Append the queued steers to the context as user messages; True if there were any."""
        steers, self._steers = self._steers, []
        for user_input in steers:
            self.context.append(Message(role="user", content=user_input))
            self.bus.emit(SteerInput(user_input=user_input))
        return bool(steers)

    async def _run_loops(self, model: ResolvedModel, *, first: int = 1) -> TurnOutcome:
        """The agent loop (from step `first`), then the Stop hooks: one that blocks with a
        reason gets one more loop, with the reason as the user's message."""
        if self.mcp is not None:  # servers still connecting are waited for (spec §4 step 3)
            await self.mcp.settle(self.bus.emit)
        try:
            outcome = await self._agent_loop(model, first=first)
            if outcome.status == "finished":
                reason = await hook_points.stop(self.hooks, active=False)
                if reason is not None:
                    self.context.append(Message(role="user", content=reason))
                    outcome = await self._agent_loop(model)
                    if outcome.status == "finished":
                        await hook_points.stop(self.hooks, active=True)
            return outcome
        except ProviderError as exc:
            await hook_points.stop_failure(self.hooks, exc)
            raise

    async def run_loop_on(self, context: Context) -> TurnOutcome:
        """Run an agent loop on another context inside the current turn (used by /init).
        No nested TurnBegin/TurnEnd: clients such as the Go SDK cannot follow them."""
        model = self._require_model("")
        main, self.context = self.context, context
        try:
            return await self._agent_loop(model)
        finally:
            self.context = main

    def _require_model(self, user_input: UserInput) -> ResolvedModel:
        if self.model is None:
            raise LLMNotSet(self.model_error or "LLM is not set")
        missing = [c for c in required_capabilities(user_input) if c not in self.model.capabilities]
        if missing:
            raise LLMNotSupported(self.model.model_name, missing)
        return self.model

    async def _agent_loop(self, model: ResolvedModel, *, first: int = 1) -> TurnOutcome:
        limit = self.loop_control.max_steps_per_turn
        n = first - 1
        while True:
            n += 1
            if n > limit:
                return TurnOutcome("max_steps_reached", steps=limit)
            meter = self.meter
            if meter is not None and meter.stop_before_call(self._input_floor(model), model.model_name):
                self.steps_run = n - 1
                return TurnOutcome("budget_exceeded")
            self.bus.emit(StepBegin(n=n))
            try:
                compacted = await compact_if_due(
                    self.context, model, self.bus, self.loop_control, self.hooks, meter
                )
                if compacted and meter is not None:  # the summary spent: the step's call is checked anew
                    meter.check_call(self.context.token_count, model.model_name)
                self.context.checkpoint()
                self._remind(first_step=n == 1)
                keep_going = await self._step(model, n)
            except BudgetStop:  # a call inside the step was not made: the limit is announced
                self.steps_run = n
                return TurnOutcome("budget_exceeded")
            except (ProviderError, LLMNotSupported):
                self.bus.emit(StepInterrupted())
                raise
            dmail = self.dmail.take() if self.dmail is not None else None
            if dmail is not None and not self.rejected:  # a rejection ends the turn, D-Mail or not
                from soulwire.engine.dmail import dmail_message

                self.context.revert_to(dmail.checkpoint_id)
                self.context.checkpoint()
                self.context.append(
                    Message(role="user", content=[TextPart(text=dmail_message(dmail.message))])
                )
                keep_going = True
            # Steers join at the step boundary; one that came as the model would stop runs another step.
            steered = self._take_steers()
            if not (keep_going or steered):
                self.steps_run = n
                return TurnOutcome("finished")

    def _input_floor(self, model: ResolvedModel) -> int:
        """What the next step's call certainly takes as input, for the budget's check before
        the step: the context the provider counted, unless a compaction is due first (then
        the call's input is smaller, and the compaction's own call and the step's call after
        it are checked on their own)."""
        context = self.context
        if compaction_due(context.token_count, model.max_context_size, self.loop_control):
            return 0
        return context.token_count

    def _remind(self, *, first_step: bool) -> None:
        """Notices of ended background tasks, then reminders (plan mode), for the model; the
        wire shows the notices as `Notification` events only."""
        if self.background is not None:
            for notice in self.background.take_notices():
                self.context.append(Message(role="user", content=notice.text))
                self.bus.emit(notice.event)
        if self.plan is not None:
            message = self.plan.reminder(first_step)
            if message is not None:
                self.context.append(message)

    def tool_specs(self) -> list[ToolSpec]:
        """The tools offered to the model now (visible ones), with their JSON Schemas."""
        return [ToolSpec(t.name, t.description, lambda t=t: t.parameters) for t in self.toolset.visible()]

    async def _stream_reply(self, model: ResolvedModel, n: int) -> tuple[_Reply, StreamResult]:
        history = self.context.for_model()
        request = ChatRequest(
            system_prompt=self.context.system_prompt,
            history=(
                for_hearing(history, model.capabilities, model.model_name)
                if self.context.has_audio
                else history
            ),
            tools=self.tool_specs(),
            thinking=model.thinking,
        )
        attempts = self.loop_control.max_retries_per_step
        attempt = 1
        while True:
            reply, result = _Reply(), StreamResult()
            try:
                emit, add = self.bus.emit, reply.add
                async for part in model.provider.stream(request, result):
                    emit(part)
                    add(part)
                if reply.is_empty():
                    raise APIEmptyResponseError("The model returned an empty response.")
                return reply, result
            except ProviderError as exc:
                meter = self.meter
                if meter is not None and result.usage is not None:  # counted, so billed: it spent
                    meter.charge_aside(result.usage, model.model_name)
                if not exc.retryable or attempt >= attempts:
                    raise
                if meter is not None:  # a retry is a model call: checked before it is announced
                    meter.check_call(self.context.token_count, model.model_name)
                wait = self._backoff(attempt, exc)
                self.bus.emit(
                    StepRetry(
                        n=n,
                        next_attempt=attempt + 1,
                        max_attempts=attempts,
                        wait_s=wait,
                        error_type=exc.error_type,
                        status_code=exc.status_code,
                    )
                )
                await anyio.sleep(wait)
                attempt += 1
                if meter is not None:  # and after the wait (the clock, another part of the tree)
                    meter.check_call(self.context.token_count, model.model_name)

    @staticmethod
    def _backoff(attempt: int, exc: ProviderError) -> float:
        wait = min(RETRY_MAX_S, RETRY_INITIAL_S * 2 ** (attempt - 1)) + random.uniform(0, RETRY_JITTER_S)
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > 0:
            wait = max(wait, min(float(retry_after), RETRY_AFTER_CAP_S))
        return wait

    def _status(self, usage: TokenUsage | None, message_id: str | None) -> StatusUpdate:
        sandbox = self.sandbox
        shown = (
            SandboxStatus(mode=sandbox.mode, network=sandbox.network) if sandbox and sandbox.active else None
        )
        if usage is None or self.model is None:
            return StatusUpdate(message_id=message_id, plan_mode=self.plan_mode(), sandbox=shown)
        size = self.model.max_context_size
        return StatusUpdate(
            context_usage=usage.input / size,
            context_tokens=usage.input,
            max_context_tokens=size,
            token_usage=usage,
            message_id=message_id,
            plan_mode=self.plan_mode(),
            sandbox=shown,
        )

    async def _compact_after_overflow(self, model: ResolvedModel) -> bool:
        """Compact when the provider says the context is too long; False when there is
        nothing older than the last exchange to summarise (retrying could not help)."""
        older, _ = split_history(self.context.history)
        if not older:
            return False
        attempts = self.loop_control.max_retries_per_step
        await compact(self.context, model, self.bus, max_attempts=attempts, meter=self.meter)
        return True

    async def _step(self, model: ResolvedModel, n: int) -> bool:
        """One step; True when the loop should run another."""
        try:
            reply, result = await self._stream_reply(model, n)
        except ContextLengthExceededError:
            # One compaction-and-retry when the provider says the context is too long.
            if not await self._compact_after_overflow(model):
                raise
            if self.meter is not None:  # the summary spent: the step's call is checked anew
                self.meter.check_call(self.context.token_count, model.model_name)
            reply, result = await self._stream_reply(model, n)
        parts, calls = reply.finish()
        meter, allowed = self.meter, len(calls)
        if meter is not None:  # charged first: the StatusUpdate's state save holds it
            meter.charge(result.usage, model.model_name)
        self.bus.emit(self._status(result.usage, result.message_id))
        if meter is not None:
            allowed = meter.admit_tool_calls(len(calls))
        # The reply is complete: it joins the context before its tools run, so that a turn
        # cut short (a cancel, a killed engine) leaves the model its own words and calls.
        # Context writes are synchronous: a cancellation cannot split a step's records.
        if result.usage is not None:
            self.context.record_usage(result.usage.input)
        self.context.append(Message(role="assistant", content=parts, tool_calls=calls or None))
        if result.usage is not None:
            self.context.record_usage(result.usage.total)
        values: list[ToolReturnValue | None] = [None] * len(calls)
        if allowed < len(calls):  # the budget does not let the others run: their result says so
            from soulwire.engine.budget import not_run

            refused = not_run(meter.ledger.hit if meter is not None else None)
            values[allowed:] = [refused] * (len(calls) - allowed)
        return await self._step_tools(n, calls, values, [False] * len(calls), range(allowed))

    async def _step_tools(
        self,
        n: int,
        calls: Sequence[ToolCall],
        values: list[ToolReturnValue | None],
        published: list[bool],
        run: Sequence[int],
    ) -> bool:
        """Run the step's calls at indices `run` (the others have their value already) and
        close every call; True when the loop should run another step."""
        plan_mode = self.plan_mode()
        contexts = self._tool_contexts(calls)
        try:
            if self.workspace is not None and calls:
                await self.workspace.before_tools(n, [c.function.name for c in calls])
            await self._run_tools(calls, contexts, values, published, run)
        except BaseException as exc:
            why = CANCELLED if isinstance(exc, anyio.get_cancelled_exc_class()) else STEP_FAILED
            self._close_calls(calls, values, published, why)
            raise
        self._close_calls(calls, values, published, STEP_FAILED)
        if self.plan_mode() != plan_mode:  # EnterPlanMode / ExitPlanMode changed it
            self.bus.emit(StatusUpdate(plan_mode=self.plan_mode()))
        if any(ctx.rejected for ctx in contexts):
            self.rejected = True
            return False
        return bool(calls)

    def _tool_contexts(self, calls: Sequence[ToolCall]) -> list[ToolContext]:
        return [
            ToolContext(
                tool_call_id=c.id,
                work_dir=self.work_dir,
                approver=self.approver,
                client=self.client_tools,
                additional_dirs=self.additional_dirs,
                state=self.state,
                sandbox=self.sandbox,
                files=self.files,
                terminal=self.terminal,
            )
            for c in calls
        ]

    def _close_calls(
        self,
        calls: Sequence[ToolCall],
        values: list[ToolReturnValue | None],
        published: list[bool],
        why: str,
    ) -> None:
        """However the tools ended, every call gets its result, on the wire and in the
        context: the ones cut short (`why`) say so. Synchronous: a cancellation cannot split it."""
        done = [v if v is not None else interrupted_result(why) for v in values]
        for call, value, shown in zip(calls, done, published, strict=True):
            if not shown:
                self.bus.emit(ToolResult(tool_call_id=call.id, return_value=value))
        self.context.append(*(tool_message(c.id, v) for c, v in zip(calls, done, strict=True)))

    async def _run_tools(
        self,
        calls: Sequence[ToolCall],
        contexts: list[ToolContext],
        values: list[ToolReturnValue | None],
        published: list[bool],
        run: Sequence[int],
    ) -> None:
        """Run the step's tool calls at indices `run` concurrently, filling `values` (the
        others have theirs: refused by the budget, or recorded by a process that died);
        results not published yet are published in call order, each marked in `published`."""
        if not calls:
            return
        done = [anyio.Event() for _ in calls]
        meter = self.meter

        async def run_one(index: int) -> None:
            call = calls[index]
            self.running_calls[call.id] = RunningCall(call.function.name, collect_groups())
            try:
                if meter is None:
                    values[index] = await hook_points.call_tool(
                        self.hooks, call, self.toolset.call, contexts[index]
                    )
                else:
                    values[index] = await meter.run_tool(
                        hook_points.call_tool(self.hooks, call, self.toolset.call, contexts[index])
                    )
            finally:
                del self.running_calls[call.id]
                done[index].set()

        running = set(run)
        for index, event in enumerate(done):
            if index not in running:
                event.set()
        async with anyio.create_task_group() as group:
            for index in run:
                group.start_soon(run_one, index)
            for index, call in enumerate(calls):
                await done[index].wait()
                value = values[index]
                if value is not None and not published[index]:
                    self.bus.emit(ToolResult(tool_call_id=call.id, return_value=value))
                    published[index] = True
