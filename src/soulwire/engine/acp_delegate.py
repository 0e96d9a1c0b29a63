"""Sub-agents that are other ACP agents: a declared command (`[acp_agents.NAME] command = […]`
in the config) started on demand as an ACP agent, given the task in a session on the parent's
work dir, and driven to the end of its turn as an editor would drive it.

What it does is Soulwire's to show and to allow: its updates are folded into the same Wire
events a native sub-agent's are (text, thinking, tool calls and results, wrapped in
`SubagentEvent`s of the Agent call), and its permission requests go through the session's
approvals (the user's answer, or the rules, yolo and afk). Whatever goes wrong — the command
is missing, the agent crashes, writes something that is not JSON-RPC, or never answers — ends
as one error result of the Agent call, with the agent's process group gone; a cancelled
parent turn cancels the delegated turn and ends the process."""

from __future__ import annotations

import json
import math
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soulwire.engine.budget import Limit, Meter, not_run
from soulwire.errors import SoulwireError
from soulwire.tools.base import ActionRequest, ApprovalOutcome, Approver
from soulwire.wire.fold import Merger
from soulwire.wire.messages import ToolResult
from soulwire.wire.pipes import JsonLinesPipe
from soulwire.wire.types import (
    FunctionCall,
    TextPart,
    ThinkPart,
    TokenUsage,
    ToolCall,
    ToolReturnValue,
    WireModel,
    tool_error,
    tool_ok,
)

CONFIG_KEY = "acp_agents"
STOP_WAIT_S = 2.0


class AcpAgentSpec(BaseModel):
    """`[acp_agents.NAME]`: how to start the agent and what the parent model is told."""

    model_config = ConfigDict(extra="forbid")
    command: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    description: str = ""
    start_timeout_s: float = Field(default=60.0, gt=0)
    """How long `initialize` and `session/new` may take (a cold agent loads its runtime)."""
    idle_timeout_s: float = Field(default=600.0, gt=0)
    """How long the agent may stay silent mid-turn (no update, no request, no answer) before
    the call ends as an error; the time the user takes to answer its approval doesn't count."""


class AcpAgentError(SoulwireError):
    """One line for the parent's Agent call."""


class _OverBudget(SoulwireError):
    """A budget limit is reached: the agent is not prompted (its call is not made)."""

    def __init__(self, limit: Limit) -> None:
        super().__init__(f"the {limit[1]} budget's {limit[2]} limit is reached")
        self.limit = limit


def declared_agents(raw_config: dict[str, Any]) -> dict[str, AcpAgentSpec]:
    """The `[acp_agents]` table; raises ValueError naming a bad entry."""
    table = raw_config.get(CONFIG_KEY)
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ValueError(f"`{CONFIG_KEY}` must be a table of agents")
    agents: dict[str, AcpAgentSpec] = {}
    for name, entry in table.items():
        try:
            agents[str(name)] = AcpAgentSpec.model_validate(entry)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"])
            raise ValueError(f"`{CONFIG_KEY}.{name}`: {where}: {problem['msg']}") from None
    return agents


@dataclass
class _Turn:
    """Folds one delegated turn's ACP updates into Wire events."""

    emit: Callable[[WireModel], None]
    texts: list[str] = field(default_factory=list[str])
    calls: dict[str, str] = field(default_factory=dict[str, str])
    kinds: dict[str, str] = field(default_factory=dict[str, str])
    """The kind each tool call announced (a permission request may leave it out)."""
    merger: Merger | None = None
    updates: int = 0
    cost_usd: float | None = None
    """The session's cost as the agent's last `usage_update` said it (USD), if it did."""
    idle_s: float = math.inf
    silence: anyio.CancelScope | None = None
    """Ends the prompt when the agent has been silent for `idle_s` (its deadline moves on)."""

    def __post_init__(self) -> None:
        self.merger = Merger(self.emit)

    def heard(self, *, waiting: bool = False) -> None:
        """The agent spoke: its silence starts again (`waiting`: on the user, which never times out)."""
        if self.silence is not None:
            self.silence.deadline = math.inf if waiting else anyio.current_time() + self.idle_s

    def update(self, update: Any) -> None:
        self.updates += 1
        self.heard()
        assert self.merger is not None
        kind = getattr(update, "session_update", "")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            content = update.content
            text = getattr(content, "text", None)
            if not isinstance(text, str) or not text:
                return
            if kind == "agent_message_chunk":
                self.texts.append(text)
                self.merger.push(TextPart(text=text))
            else:
                self.merger.push(ThinkPart(think=text))
        elif kind == "tool_call":
            call_id = str(update.tool_call_id)
            name = str(update.title or update.kind or "tool")
            self.calls[call_id] = name
            if update.kind:
                self.kinds[call_id] = str(update.kind)
            arguments = json.dumps(update.raw_input) if update.raw_input is not None else "{}"
            self.merger.push(ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments)))
        elif kind == "usage_update":
            cost = getattr(update, "cost", None)
            if cost is not None and str(cost.currency).upper() == "USD":
                self.cost_usd = float(cost.amount)
        elif kind == "tool_call_update" and update.status in ("completed", "failed"):
            call_id = str(update.tool_call_id)
            if self.calls.pop(call_id, None) is None:
                return
            output = _content_text(update.content) or (
                update.raw_output if isinstance(update.raw_output, str) else ""
            )
            failed = update.status == "failed"
            value = ToolReturnValue(
                is_error=failed, output=output, message="The tool failed." if failed else "", display=[]
            )
            self.merger.flush()
            self.emit(ToolResult(tool_call_id=call_id, return_value=value))

    def finish(self) -> str:
        assert self.merger is not None
        self.merger.flush()
        return "".join(self.texts)


def _content_text(content: Any) -> str:
    texts: list[str] = []
    for item in content or []:
        inner = getattr(item, "content", None)
        text = getattr(inner, "text", None)
        if isinstance(text, str):
            texts.append(text)
    return "\n".join(texts)


def _display(content: Any) -> list[dict[str, Any]]:
    """What a permission request shows, as display blocks: its diffs (ACP `diff` content,
    the file's path with the old and new text), then its text as a brief."""
    blocks: list[dict[str, Any]] = []
    for item in content or []:
        if getattr(item, "type", None) == "diff" and isinstance(getattr(item, "new_text", None), str):
            old = getattr(item, "old_text", None)
            blocks.append(
                {"type": "diff", "path": str(item.path), "old_text": old or "", "new_text": item.new_text}
            )
    text = _content_text(content)
    return blocks + ([{"type": "brief", "text": text}] if text else [])


class _Editor:
    """The client side Soulwire plays for the delegate."""

    def __init__(self, turn: _Turn, approver: Approver, agent: str) -> None:
        self._turn = turn
        self._approver = approver
        self._agent = agent

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self._turn.update(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        call_id = str(tool_call.tool_call_id)
        display = _display(tool_call.content)
        # An agent that names no kind (`kimi acp`) still shows a diff for an edit.
        edits = "edit" if any(block["type"] == "diff" for block in display) else None
        kind = str(getattr(tool_call, "kind", None) or self._turn.kinds.get(call_id) or edits or "other")
        title = str(getattr(tool_call, "title", None) or f"{self._agent} wants to act")
        self._turn.heard(waiting=True)
        try:
            outcome: ApprovalOutcome = await self._approver.request(
                ActionRequest(
                    tool_call_id=call_id,
                    sender=self._agent,
                    action=f"acp:{self._agent}:{kind}",
                    description=title,
                    display=display,
                )
            )
        finally:
            self._turn.heard()
        wanted = ("allow_once", "allow_always") if outcome.approved else ("reject_once", "reject_always")
        chosen = next((o.option_id for w in wanted for o in options if o.kind == w), None)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))

    async def read_text_file(self, **kwargs: Any) -> Any:
        from acp import RequestError

        raise RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, **kwargs: Any) -> Any:
        from acp import RequestError

        raise RequestError.method_not_found("fs/write_text_file")


def _charge(meter: Meter | None, usage: Any, cost_usd: float | None) -> None:
    """Charge what the agent reported (ACP's prompt `usage`, its `usage_update` cost), if any."""
    if meter is None or (usage is None and cost_usd is None):
        return
    tokens = TokenUsage()
    if usage is not None:
        read, write = usage.cached_read_tokens or 0, usage.cached_write_tokens or 0
        tokens = TokenUsage(
            input_other=max(0, usage.input_tokens - read - write),
            output=usage.output_tokens,
            input_cache_read=read,
            input_cache_creation=write,
        )
    meter.charge_reported(tokens, cost_usd)


def _kill_group(process: anyio.abc.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class AcpDelegate:
    """One declared ACP agent, run once per Agent call."""

    name: str
    spec: AcpAgentSpec

    async def run(
        self,
        *,
        prompt: str,
        work_dir: Path,
        approver: Approver,
        emit: Callable[[WireModel], None],
        log_dir: Path,
        timeout: float | None = None,
        meter: Meter | None = None,
    ) -> ToolReturnValue:
        """The delegated turn; its final text, or one error. Its prompt is a model call of the
        tree's: a limit of `meter` reached (by a sibling, the clock) stops it before the agent is
        started or prompted, as a sub-agent's call would be. What the agent reports it spent
        (the prompt's `usage`, its `usage_update`'s cost) is charged to `meter` when its turn
        has ended (every update it sent read)."""
        turn = _Turn(emit)
        state: dict[str, Any] = {"session": None, "exited": False, "usage": None}
        try:
            with anyio.fail_after(timeout):
                if meter is not None and (limit := meter.reached()) is not None:
                    raise _OverBudget(limit)
                stop = await self._drive(prompt, work_dir, approver, turn, log_dir, state, meter)
        except _OverBudget as refused:
            turn.finish()
            return not_run(refused.limit)
        except AcpAgentError as exc:
            turn.finish()
            return tool_error(f"ACP agent `{self.name}`: {exc}", brief="Sub-agent failed")
        except TimeoutError:
            turn.finish()
            return tool_error(
                f"ACP agent `{self.name}` timed out after {timeout} s.", brief="Sub-agent timed out"
            )
        finally:  # (a turn cut short, by an error or a cancel, spent what it reported so far)
            _charge(meter, state["usage"], turn.cost_usd)
        text = turn.finish()
        if stop not in ("end_turn", "max_tokens", "max_turn_requests"):
            return tool_error(f"ACP agent `{self.name}` stopped: {stop}.", brief="Sub-agent stopped")
        return tool_ok(f"agent: {self.name}\nstop_reason: {stop}\n\n[summary]\n{text}")

    async def _drive(
        self,
        prompt: str,
        work_dir: Path,
        approver: Approver,
        turn: _Turn,
        log_dir: Path,
        state: dict[str, Any],
        meter: Meter | None,
    ) -> str:
        from acp import RequestError
        from acp.client.connection import ClientSideConnection

        log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.spec.env}
        try:
            with open(log_dir / "stderr.log", "ab") as stderr:  # noqa: ASYNC230 - a local log, at once
                process = await anyio.open_process(
                    self.spec.command, cwd=work_dir, env=env, stderr=stderr, start_new_session=True
                )
        except OSError as exc:
            raise AcpAgentError(f"cannot start {self.spec.command[0]!r}: {exc.strerror or exc}") from None
        transport = JsonLinesPipe(process)
        editor = _Editor(turn, approver, self.name)
        conn = ClientSideConnection(cast(Any, editor), cast(Any, transport))  # duck-typed to its protocols
        stop = ""
        try:
            try:
                async with anyio.create_task_group() as group:
                    # The agent may die with its stdout still open (a child holds it): its exit
                    # ends the call as the end of its output would.
                    group.start_soon(_watch, process, group.cancel_scope, state)
                    stop = await self._talk(conn, prompt, work_dir, state, turn, meter)
                    group.cancel_scope.cancel()
            except BaseExceptionGroup as failed:  # the one error of the call, for the clauses below
                raise failed.exceptions[0] from None
            if state["exited"] and not stop:
                raise AcpAgentError(_exit_reason(process, log_dir))
            return stop
        except TimeoutError:
            raise AcpAgentError(
                f"no answer to {'session/new' if state['session'] is None else 'the prompt'} "
                f"within {self.spec.start_timeout_s:g} s"
            ) from None
        except RequestError as exc:
            raise AcpAgentError(f"error {exc.code}: {exc}") from None
        except (ConnectionError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise AcpAgentError(transport.problem or _exit_reason(process, log_dir) or str(exc)) from None
        except anyio.get_cancelled_exc_class():
            if state["session"] is not None:  # the parent turn was cancelled: the delegate's too
                with anyio.move_on_after(STOP_WAIT_S, shield=True):
                    await conn.cancel(session_id=state["session"])
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(conn, process)

    async def _talk(
        self, conn: Any, prompt: str, work_dir: Path, state: dict[str, Any], turn: _Turn, meter: Meter | None
    ) -> str:
        from acp import PROTOCOL_VERSION
        from acp.schema import ClientCapabilities, Implementation

        with anyio.fail_after(self.spec.start_timeout_s):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="soulwire", version="1"),
            )
            session = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
        state["session"] = session.session_id
        if meter is not None and (limit := meter.reached()) is not None:  # reached while it started
            raise _OverBudget(limit)
        with anyio.CancelScope() as silence:
            turn.idle_s, turn.silence = self.spec.idle_timeout_s, silence
            turn.heard()
            text = [{"type": "text", "text": prompt}]
            reply = await conn.prompt(session_id=session.session_id, prompt=text)
            state["usage"] = reply.usage
            return str(reply.stop_reason)
        turn.silence = None
        with anyio.move_on_after(STOP_WAIT_S):
            await conn.cancel(session_id=session.session_id)
        raise AcpAgentError(f"silent for {self.spec.idle_timeout_s:g} s mid-turn (no update, no answer)")


async def _watch(process: anyio.abc.Process, scope: anyio.CancelScope, state: dict[str, Any]) -> None:
    await process.wait()
    state["exited"] = True
    scope.cancel()


def _exit_reason(process: anyio.abc.Process, log_dir: Path) -> str:
    code = process.returncode
    tail = ""
    try:
        lines = (log_dir / "stderr.log").read_text("utf-8", "replace").strip().splitlines()
        tail = f": {lines[-1][:200]}" if lines else ""
    except OSError:
        pass
    if code is None:
        return f"the connection to the agent ended{tail}"
    return f"the agent exited with status {code} mid-turn{tail}"


async def _stop(conn: Any, process: anyio.abc.Process) -> None:
    """Close the connection and end the agent: stdin closed, then its whole group killed."""
    with anyio.move_on_after(STOP_WAIT_S):
        try:
            await conn.close()
        except Exception:
            pass
        await process.wait()
    _kill_group(process)
    with anyio.move_on_after(STOP_WAIT_S):
        await process.wait()


def delegates_of(raw_config: dict[str, Any]) -> dict[str, AcpDelegate]:
    return {name: AcpDelegate(name, spec) for name, spec in declared_agents(raw_config).items()}


def describe(delegates: Sequence[AcpDelegate]) -> str:
    """The Agent tool's note on the ACP agents it may delegate to."""
    lines = [f"- `{d.name}`: {d.spec.description or 'an external ACP agent'}" for d in delegates]
    return "Other agents (as subagent_type), working in the same directory:\n" + "\n".join(lines)


__all__ = ["AcpAgentSpec", "AcpDelegate", "declared_agents", "delegates_of", "describe"]
