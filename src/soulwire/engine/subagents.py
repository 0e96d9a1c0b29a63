"""The `Agent` tool: runs a sub-agent (a nested soul with its own context) inside a tool
call of the parent turn (spec §4.11).

A sub-agent lives in `<session>/subagents/<agent_id>/` (meta.json, context.jsonl, wire.jsonl,
prompt.txt, output). Its merged events reach the parent's channel wrapped in SubagentEvent;
its approvals go through the session's broker, tagged with its id and type, and travel
unwrapped. Whatever goes wrong inside it becomes an error result of the Agent call; only a
cancellation of the parent turn passes through (and ends the sub-agent with it)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from pydantic import Field

from soulwire.engine.bus import EventBus
from soulwire.engine.context import Context
from soulwire.ids import uuid4_hex
from soulwire.llm.errors import LLMNotSet, LLMNotSupported, ProviderError
from soulwire.sessions.store import FileSessionStore
from soulwire.tools.base import (
    SUBAGENT_STATE_KEY,
    ActionRequest,
    ApprovalOutcome,
    BackgroundJobs,
    ToolContext,
    ToolParams,
    Toolset,
    TypedTool,
)
from soulwire.wire.messages import ApprovalRequest, ApprovalResponse, SubagentEvent, envelope
from soulwire.wire.types import TextPart, ToolReturnValue, WireModel, tool_error, tool_ok

if TYPE_CHECKING:
    from soulwire.engine.acp_delegate import AcpDelegate
    from soulwire.engine.approvals import ApprovalBroker
    from soulwire.engine.soul import Soul
    from soulwire.llm.registry import ResolvedModel

ModelOfAlias = Callable[[str], "ResolvedModel"]
"""The model of an alias of the configuration, for a sub-agent's `model`: raises LookupError
for an alias the configuration does not have, LLMNotSet for one that cannot be used."""

SUBAGENT_TYPES = ("coder", "explore", "plan")
READ_ONLY_TOOLS = frozenset({"ReadFile", "ReadMediaFile", "Glob", "Grep", "SearchWeb", "FetchURL"})
# Tools a sub-agent never gets: it cannot start sub-agents, ask the user or switch plan mode.
PARENT_ONLY_TOOLS = frozenset({"Agent", "AskUserQuestion", "EnterPlanMode", "ExitPlanMode"})
BACKGROUND_TIMEOUT_S = 900
"""A background sub-agent without `timeout` is stopped after this long, unless the
configuration says otherwise (`[background] agent_task_timeout_s`, the reference's key)."""
BRIEF_SUMMARY_CHARS = 200
"""A final answer shorter than this gets one follow-up asking for a fuller summary (as the
reference does: 85 characters are re-asked, 200 are not)."""
MORE_SUMMARY_REQUEST = (
    "Your previous response was too brief. Please provide a more comprehensive summary that includes:\n\n"
    "1. Specific technical details and implementations\n"
    "2. Detailed findings and analysis\n"
    "3. All important information that the parent agent should know"
)

_ROLE_PROMPTS = {
    "coder": "You may read, search, edit files and run commands to complete the task.",
    "explore": "Explore the code base read-only: read, search and fetch; do not change anything.",
    "plan": "Study the code read-only and produce a concrete, step-by-step implementation plan.",
}

DESCRIPTION = """\
Start a sub-agent to work on a self-contained task, or resume one by its agent id.

The sub-agent has its own context: it sees only the prompt you give it, so state the task, \
the relevant files and what you want back. Its final message is returned to you.

Types: `coder` (default; can edit files and run commands), `explore` (read-only search and \
reading), `plan` (read-only; returns an implementation plan). Use `resume` with an agent id \
from an earlier result to continue that sub-agent with a new prompt."""


class AgentParams(ToolParams):
    description: str = Field(description="A short (3-5 words) description of the task.")
    prompt: str = Field(description="The task for the sub-agent, with all the context it needs.")
    subagent_type: str = Field(default="coder", description="`coder`, `explore` or `plan`.")
    model: str | None = Field(
        default=None, description="Model alias for the sub-agent (default: the current one)."
    )
    resume: str | None = Field(default=None, description="The agent id of a sub-agent to continue.")
    run_in_background: bool = Field(default=False, description="Run the sub-agent in the background.")
    timeout: int | None = Field(
        default=None, ge=30, le=3600, description="Seconds before the sub-agent is stopped."
    )


def system_prompt(subagent_type: str, work_dir: Path) -> str:
    return (
        "You are a Soulwire sub-agent working in a software project for a parent agent.\n"
        f"The working directory is {work_dir}.\n"
        f"{_ROLE_PROMPTS[subagent_type]}\n"
        "The parent sees only your last message: end with a complete, exact report of what you found or did."
    )


class SubagentKind(NamedTuple):
    """A sub-agent type an agent file declares (`subagents:`): its system prompt and the
    tools it may use (None: all of the parent's that a sub-agent may have)."""

    description: str
    system_prompt: str
    tools: frozenset[str] | None = None


class _SubagentStore(FileSessionStore):
    """A session store rooted at a sub-agent's directory instead of a session's."""

    def __init__(self, directory: Path, *, protocol_version: str) -> None:
        self._open(directory, protocol_version)


def close_interrupted_subagents(session_dir: Path, agent_ids: Sequence[str], protocol_version: str) -> None:
    """Close the turns of sub-agents a killed engine left running (and of theirs, if any)."""
    from soulwire.engine.recovery import close_interrupted_turn

    for agent_id in agent_ids:
        directory = session_dir / "subagents" / agent_id
        if "/" in agent_id or not directory.is_dir():
            continue
        store = _SubagentStore(directory, protocol_version=protocol_version)
        try:
            close_interrupted_turn(store, Context(store, ""))
        finally:
            store.close()


class _TaggedApprover:
    """The broker, with the sub-agent named in every ApprovalRequest it sends."""

    def __init__(self, broker: ApprovalBroker, agent_id: str, subagent_type: str) -> None:
        self._broker = broker
        self._agent_id = agent_id
        self._subagent_type = subagent_type

    async def request(self, request: ActionRequest) -> ApprovalOutcome:
        tagged = replace(request, agent_id=self._agent_id, subagent_type=self._subagent_type)
        return await self._broker.request(tagged)


@dataclass(eq=False)  # compared by identity (and cheaper to define)
class _Instance:
    agent_id: str
    subagent_type: str
    directory: Path
    resumed: bool
    model_alias: str | None = None
    """The `model` it was started with (kept in meta.json: a resume runs on it again)."""
    model: ResolvedModel | None = None
    """That alias's model; None: the parent's."""


class AgentTool(TypedTool[AgentParams]):
    """Runs or resumes a sub-agent of the parent soul."""

    name = "Agent"
    description = DESCRIPTION
    params = AgentParams

    def __init__(
        self,
        soul: Soul,
        broker: ApprovalBroker,
        session_dir: Path,
        protocol_version: str,
        jobs: BackgroundJobs | None = None,
        models: ModelOfAlias | None = None,
        background_timeout_s: int = BACKGROUND_TIMEOUT_S,
    ) -> None:
        self._jobs = jobs
        """Where `run_in_background` sub-agents run (the session's background tasks)."""
        self._background_timeout_s = background_timeout_s
        self._models = models
        """The model of a `model` alias (None: only the parent's own alias is known)."""
        self._soul = soul
        self._broker = broker
        self._root = session_dir / "subagents"
        self._protocol_version = protocol_version
        self._running: set[str] = set()
        self.kinds: dict[str, SubagentKind] = {}
        """Types from an agent file; when set, they replace the built-in coder/explore/plan."""
        self.delegates: dict[str, AcpDelegate] = {}
        """More types: other ACP agents (`[acp_agents]`), run by `acp_delegate`."""

    def _types(self) -> tuple[str, ...]:
        return (*(tuple(self.kinds) or SUBAGENT_TYPES), *self.delegates)

    def delegate_to(self, delegates: dict[str, AcpDelegate], note: str) -> None:
        """Offer other ACP agents as types; this session's tool text names them (`note`)."""
        self.delegates = delegates
        vars(self)["description"] = f"{DESCRIPTION}\n\n{note}"

    @property
    def running(self) -> frozenset[str]:
        """The ids of the sub-agents running now (a cancel receipt names them)."""
        return frozenset(self._running)

    async def execute(self, params: AgentParams, ctx: ToolContext) -> ToolReturnValue:
        instance = self._instance(params)
        if isinstance(instance, ToolReturnValue):
            return instance
        refused = self._pick_model(instance) or self._unpriced(instance)
        if refused is not None:
            return refused
        if instance.agent_id in self._running:
            return tool_error(f"Sub-agent `{instance.agent_id}` is already running.", brief="Sub-agent busy")
        delegate = self.delegates.get(instance.subagent_type)
        if delegate is not None:
            return await self._delegate(delegate, instance, params, ctx.tool_call_id)
        if params.run_in_background:
            return self._start_in_background(instance, params, ctx.tool_call_id)
        self._running.add(instance.agent_id)
        try:
            return await self._run(instance, params, ctx.tool_call_id)
        finally:
            self._running.discard(instance.agent_id)

    async def _delegate(
        self, delegate: AcpDelegate, instance: _Instance, params: AgentParams, call_id: str
    ) -> ToolReturnValue:
        """A turn of another ACP agent, shown and approved as a sub-agent of ours."""
        if params.run_in_background or instance.resumed:
            return tool_error("ACP sub-agents run in the foreground, once per call.", brief="Not supported")

        def emit(message: WireModel) -> None:
            event = envelope(message)
            self._soul.bus.emit(
                SubagentEvent(
                    parent_tool_call_id=call_id,
                    agent_id=instance.agent_id,
                    subagent_type=instance.subagent_type,
                    event=event,
                )
            )

        approver = _TaggedApprover(self._broker, instance.agent_id, instance.subagent_type)
        return await delegate.run(
            prompt=params.prompt,
            work_dir=self._soul.work_dir,
            approver=approver,
            emit=emit,
            log_dir=instance.directory,
            timeout=params.timeout,
            meter=self._soul.meter.child() if self._soul.meter is not None else None,
        )

    def _start_in_background(self, instance: _Instance, params: AgentParams, call_id: str) -> ToolReturnValue:
        """Start the sub-agent as a background task and answer at once (the reference's lines);
        its result reaches the model as the task's end notice and through TaskOutput."""
        if self._jobs is None:
            return tool_error(
                "Background sub-agents need a running session.", brief="Background start failed"
            )

        async def job(output: Path) -> None:
            try:
                result = await self._run(instance, params, call_id, background=True)
            finally:
                self._running.discard(instance.agent_id)
            text = result.output if isinstance(result.output, str) else ""
            output.write_text((text or result.message) + "\n", encoding="utf-8")
            if result.is_error:
                raise RuntimeError(result.message.splitlines()[-1] if result.message else "sub-agent failed")

        self._running.add(instance.agent_id)
        try:
            task = self._jobs.start_job(
                job,
                kind="agent",
                description=params.description.strip(),
                timeout_s=params.timeout or self._background_timeout_s,
                tool_call_id=call_id,
            )
        except Exception as exc:  # too many tasks, or no running session
            self._running.discard(instance.agent_id)
            why = str(exc) if not str(exc).isdigit() else f"{exc} background tasks are already running"
            return tool_error(
                f"Cannot start the sub-agent in the background: {why}.", brief="Background start failed"
            )
        instance.directory.mkdir(parents=True, exist_ok=True)
        _write_meta(instance.directory, instance, params.description, status="running_background")
        lines = [
            f"task_id: {task.id}",
            f"kind: {task.kind}",
            f"status: {task.status}",
            f"description: {params.description.strip()}",
            f"agent_id: {instance.agent_id}",
            f"actual_subagent_type: {instance.subagent_type}",
            "automatic_notification: true",
            "next_step: You will be automatically notified when it completes.",
            "next_step: Use TaskOutput with this task_id for a non-blocking status/output snapshot. "
            "Only set block=true when you intentionally want to wait.",
            f'resume_hint: Use Agent(resume="{instance.agent_id}", prompt="...") to continue this '
            "instance later.",
        ]
        return tool_ok("\n".join(lines), message="Background task started.")

    def _instance(self, params: AgentParams) -> _Instance | ToolReturnValue:
        if params.resume is not None:
            directory = self._root / params.resume
            meta = _read_meta(directory) if params.resume and "/" not in params.resume else None
            if meta is None:
                message = (
                    f"Sub-agent `{params.resume}` not found: resume takes an agent id from an earlier result."
                )
                return tool_error(message, brief="Sub-agent not found")
            kind = str(meta.get("subagent_type") or "coder")
            known = self._types()
            alias = params.model or (str(meta["model"]) if meta.get("model") else None)
            return _Instance(params.resume, kind if kind in known else known[0], directory, True, alias)
        if params.subagent_type not in self._types():
            message = (
                f"Unknown subagent_type `{params.subagent_type}`: use one of {', '.join(self._types())}."
            )
            return tool_error(message, brief="Unknown sub-agent type")
        agent_id = "a" + uuid4_hex()[:8]
        return _Instance(agent_id, params.subagent_type, self._root / agent_id, False, params.model)

    def _pick_model(self, instance: _Instance) -> ToolReturnValue | None:
        """Resolve the instance's `model` alias (the reference's errors when it cannot be)."""
        alias = instance.model_alias
        parent = self._soul.model
        if alias is None or (parent is not None and alias == parent.alias):
            return None
        try:
            if self._models is None:
                raise LookupError(alias)
            instance.model = self._models(alias)
        except LookupError:
            return tool_error(f"Unknown model alias: {alias}", brief="Invalid model alias")
        except LLMNotSet as exc:
            return tool_error(str(exc), brief="Invalid model alias")
        return None

    def _unpriced(self, instance: _Instance) -> ToolReturnValue | None:
        """A money limit cannot count a model without a price: such a sub-agent is refused."""
        meter = self._soul.meter
        if meter is None or instance.model is None:
            return None
        from soulwire.engine.budget import BudgetError

        try:
            meter.ledger.check_model(instance.model.model_name)
        except BudgetError as exc:
            return tool_error(f"Cannot start the sub-agent: {exc}.", brief="No price for the model")
        return None

    def _toolset(self, subagent_type: str) -> Toolset:
        offered = [t for t in self._soul.toolset.visible() if t.name not in PARENT_ONLY_TOOLS]
        kind = self.kinds.get(subagent_type)
        if kind is not None:
            return Toolset([t for t in offered if kind.tools is None or t.name in kind.tools])
        if subagent_type != "coder":
            offered = [t for t in offered if t.name in READ_ONLY_TOOLS]
        return Toolset(offered)

    async def _run(
        self, instance: _Instance, params: AgentParams, parent_call_id: str, *, background: bool = False
    ) -> ToolReturnValue:
        from soulwire.engine.soul import Soul  # the soul module imports nothing of ours

        parent = self._soul
        directory = instance.directory
        directory.mkdir(parents=True, exist_ok=True)
        _write_meta(
            directory, instance, params.description, status="running_background" if background else "running"
        )
        (directory / "prompt.txt").write_text(params.prompt, encoding="utf-8")
        store = _SubagentStore(directory, protocol_version=self._protocol_version)
        bus = EventBus()

        def forward(message: WireModel) -> None:
            if isinstance(message, ApprovalRequest | ApprovalResponse):
                return  # the broker sends these to the client itself, unwrapped
            store.record_wire(envelope(message))
            if background:
                return  # no turn of the parent's is there to carry it: its wire.jsonl keeps it
            parent.bus.emit(
                SubagentEvent(
                    parent_tool_call_id=parent_call_id,
                    agent_id=instance.agent_id,
                    subagent_type=instance.subagent_type,
                    event=envelope(message),
                )
            )

        bus.subscribe(forward, merged=True)
        context = Context(store, self._system_prompt(instance.subagent_type))
        if instance.resumed:  # a killed engine may have left it inside a turn: close that first
            from soulwire.engine.recovery import close_interrupted_turn

            close_interrupted_turn(store, context)
        soul = Soul(
            bus=bus,
            context=context,
            toolset=self._toolset(instance.subagent_type),
            approver=_TaggedApprover(self._broker, instance.agent_id, instance.subagent_type),
            model=instance.model or parent.model,
            loop_control=parent.loop_control,
            work_dir=parent.work_dir,
            client_tools=parent.client_tools,
            model_error=None if instance.model is not None else parent.model_error,
            additional_dirs=parent.additional_dirs,
        )
        soul.sandbox = parent.sandbox
        soul.meter = parent.meter.child(background=background) if parent.meter is not None else None
        soul.state[SUBAGENT_STATE_KEY] = True
        hooks = parent.hooks
        try:
            if hooks is not None and hooks.has("SubagentStart"):
                payload = {"agent_name": instance.subagent_type, "prompt": params.prompt}
                await hooks.run("SubagentStart", instance.subagent_type, payload)
            with anyio.fail_after(params.timeout):
                outcome = await soul.run(params.prompt)
                summary = _last_text(soul.context)
                if outcome.status == "finished" and len(summary) < BRIEF_SUMMARY_CHARS:
                    outcome = await soul.run(MORE_SUMMARY_REQUEST)
                    summary = _last_text(soul.context) or summary
        except TimeoutError:
            return self._failed(
                instance, f"Sub-agent timed out after {params.timeout} s.", "Sub-agent timed out"
            )
        except (ProviderError, LLMNotSet, LLMNotSupported) as exc:
            return self._failed(instance, f"Sub-agent failed: {exc}", "Sub-agent failed")
        finally:
            store.close()
        if outcome.status != "finished":
            return self._failed(
                instance, f"Sub-agent stopped: {outcome.status.replace('_', ' ')}.", "Sub-agent stopped"
            )
        if hooks is not None and hooks.has("SubagentStop"):
            payload = {"agent_name": instance.subagent_type, "response": summary}
            await hooks.run("SubagentStop", instance.subagent_type, payload)
        _append_output(directory, f"[summary]\n{summary}\n")
        _write_meta(directory, instance, params.description, status="idle")
        return tool_ok(
            f"agent_id: {instance.agent_id}\n"
            f"resumed: {str(instance.resumed).lower()}\n"
            f"actual_subagent_type: {instance.subagent_type}\n"
            "status: completed\n\n"
            f"[summary]\n{summary}"
        )

    def _system_prompt(self, subagent_type: str) -> str:
        kind = self.kinds.get(subagent_type)
        return kind.system_prompt if kind is not None else system_prompt(subagent_type, self._soul.work_dir)

    def _failed(self, instance: _Instance, message: str, brief: str) -> ToolReturnValue:
        _append_output(instance.directory, f"[error]\n{message}\n")
        return tool_error(f"agent_id: {instance.agent_id}\n{message}", brief=brief)


def _last_text(context: Context) -> str:
    """The text of the sub-agent's last assistant message: its answer to the parent."""
    for message in reversed(context.history):
        if message.role == "assistant":
            content = message.content
            if isinstance(content, str):
                return content
            return "".join(p.text for p in content if isinstance(p, TextPart))
    return ""


def _read_meta(directory: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _write_meta(directory: Path, instance: _Instance, description: str, *, status: str = "running") -> None:
    now = time.time()
    previous = _read_meta(directory) or {}
    created = previous.get("created_at", now)
    meta = {
        "agent_id": instance.agent_id,
        "subagent_type": instance.subagent_type,
        "status": status,
        "description": previous.get("description", description),
        **({"model": instance.model_alias} if instance.model_alias else {}),
        "created_at": created,
        "updated_at": now,
    }
    (directory / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")


def _append_output(directory: Path, text: str) -> None:
    with (directory / "output").open("a", encoding="utf-8") as handle:
        handle.write(text)
