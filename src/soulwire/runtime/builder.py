"""Assembles a session: config → model → store → context → toolset → approvals → soul."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from soulwire import __version__
from soulwire.config.loader import ConfigError
from soulwire.config.model import Config, validate_config
from soulwire.engine import hook_points
from soulwire.engine.approvals import ApprovalBroker
from soulwire.engine.budget import BudgetError, Ledger, Meter
from soulwire.engine.bus import EventBus
from soulwire.engine.client import ClientChannel, ExternalToolCaller
from soulwire.engine.context import Context
from soulwire.engine.hooks import Hook, HookEngine
from soulwire.engine.plan import PlanMode
from soulwire.engine.plan_tools import EnterPlanMode, ExitPlanMode
from soulwire.engine.questions import AskUserQuestion, QuestionAsker
from soulwire.engine.recovery import Continuation, close_interrupted_turn, plan_continuation
from soulwire.engine.skills import SkillCatalog, session_skills
from soulwire.engine.slash import default_commands
from soulwire.engine.soul import Soul
from soulwire.engine.state import StateKeeper
from soulwire.engine.subagents import AgentTool, SubagentKind, close_interrupted_subagents
from soulwire.llm.env import configuration_hint
from soulwire.llm.errors import LLMNotSet
from soulwire.llm.registry import ResolvedModel, resolve_model
from soulwire.runtime.model_switch import switch_model
from soulwire.runtime.models import SessionModels
from soulwire.runtime.options import SessionOptions
from soulwire.runtime.sandbox import approval_mode, session_sandbox
from soulwire.runtime.session import SessionHandle, open_session
from soulwire.sessions.backend import SHARED_RECORD_WINDOW_S
from soulwire.sessions.jsonl import warn_stderr
from soulwire.tools.base import Tool, Toolset
from soulwire.tools.builtin import default_tools
from soulwire.tools.builtin.background import BackgroundLimits, BackgroundTasks
from soulwire.tools.commands import run_shell_command
from soulwire.tools.external import ExternalTool, schema_problem
from soulwire.tools.mcp_config import load_mcp_servers, tool_call_timeout_s
from soulwire.wire import PROTOCOL_VERSION
from soulwire.wire.messages import ApprovalRequest, ApprovalResponse, StatusUpdate, envelope
from soulwire.wire.model_switch import ModelChanged
from soulwire.wire.types import WireModel

if TYPE_CHECKING:
    from soulwire.runtime.agentspec import AgentSpec
    from soulwire.sessions.lock import SessionLock
    from soulwire.tools.mcp_client import MCPManager
    from soulwire.wire.budget import Budget, BudgetReport

# Approvals travel outside the turn (spec §3.6); a model switch is a setting, kept in state.json.
NOT_RECORDED = (ApprovalRequest, ApprovalResponse, ModelChanged)
QUESTION_TOOLS = frozenset({"AskUserQuestion"})
PLAN_TOOLS = frozenset({"EnterPlanMode", "ExitPlanMode"})


def system_prompt(options: SessionOptions, skills: SkillCatalog | None = None) -> str:
    text = (
        "You are Soulwire, a coding agent working in a software project.\n"
        f"The working directory is {options.work_dir}.\n"
        "Use the tools to inspect and change files and to run commands; keep answers short and exact."
    )
    section = skills.prompt_section() if skills else ""
    return f"{text}\n\n{section}" if section else text


def session_skills_of(options: SessionOptions) -> SkillCatalog:
    """The session's skills; each broken one is reported once on stderr and skipped."""
    catalog = session_skills(options.work_dir, options.share_dir, options.skills_dirs, options.raw_config)
    for problem in catalog.problems:
        line = problem.line()
        if line not in _REPORTED:
            _REPORTED.add(line)
            warn_stderr(line)
    return catalog


_REPORTED: set[str] = set()
log = logging.getLogger("soulwire.runtime")


def _workspace_dirs(options: SessionOptions, state: dict[str, Any]) -> list[Path]:
    """`--add-dir` directories and those stored with the session, absolute and deduplicated."""
    stored = [Path(p) for p in state.get("additional_dirs") or [] if isinstance(p, str)]
    dirs: list[Path] = []
    for path in (*options.add_dirs, *stored):
        path = Path(os.path.abspath(path.expanduser()))
        if path not in dirs:
            dirs.append(path)
    return dirs


@dataclass(eq=False)  # compared by identity (and cheaper to define)
class Runtime:
    """One live session: the soul and everything it was built from."""

    options: SessionOptions
    config: Config
    session: SessionHandle
    bus: EventBus
    soul: Soul
    broker: ApprovalBroker
    toolset: Toolset
    state: StateKeeper
    hooks: HookEngine
    plan: PlanMode
    questions: QuestionAsker
    external_names: set[str] = field(default_factory=set)
    tasks: BackgroundTasks | None = None
    mcp: MCPManager | None = None
    ledger: Ledger | None = None
    """The session's budget and what it spent (engine/budget.py)."""
    models: SessionModels | None = None
    """Every model the session resolved (its providers are closed when it ends)."""
    continuation: Continuation | None = None
    """The turn a dead process left waiting for approvals, to be continued by the host
    (`SessionOptions.continue_turn`; engine/recovery.py) — taken when it starts."""
    interrupted_turn: bool = False
    """With `continue_turn`: the session opened with a turn a dead process left open (then
    continued, or closed as interrupted)."""

    def attach_client(self, channel: ClientChannel) -> None:
        """Route approvals, questions, client hooks and external tool calls to a connected client."""
        self.broker._channel = channel
        self.soul.client_tools = ExternalToolCaller(channel, self.bus)
        self.hooks.channel = channel
        self.questions.channel = channel

    def apply_client(
        self, *, supports_question: bool, supports_plan_mode: bool, hook_subscriptions: list[dict[str, Any]]
    ) -> None:
        """What a client declared in `initialize`: the tools it cannot serve are hidden from the
        model (a client that never initialises hides nothing), its hook subscriptions are added."""
        self.questions.supported = supports_question
        hidden = set() if supports_question else set(QUESTION_TOOLS)
        if not supports_plan_mode:
            hidden |= PLAN_TOOLS
        self.toolset.set_hidden(hidden)
        self.hooks.subscribe(hook_subscriptions)

    def set_plan_mode(self, enabled: bool) -> bool:
        """Switch plan mode (client or command); the StatusUpdate is sent, recorded and saved."""
        self.plan.set(enabled)
        self.bus.emit(StatusUpdate(plan_mode=self.plan.enabled))
        self.bus.flush()
        return self.plan.enabled

    @asynccontextmanager
    async def running(
        self, *, reason: str = "exit", wait_for_start: bool = False
    ) -> AsyncGenerator[anyio.abc.TaskGroup]:
        """The session's lifetime, for a front end to serve inside: `start` in a task group of
        its own, `stop` on the way out (whether the front end ended or was cancelled)."""
        async with anyio.create_task_group() as group:
            await self.start(group, wait_for_start=wait_for_start)
            try:
                yield group
            finally:
                await self.stop(reason)
                group.cancel_scope.cancel()

    async def start(self, group: anyio.abc.TaskGroup, *, wait_for_start: bool = False) -> None:
        """Begin the session's life in `group` (a front end's, alive until `stop`): the MCP
        servers' connections and the background tasks' watchers run there, and the
        SessionStart hook — before this returns with `wait_for_start`, else alongside."""
        if self.tasks is not None:  # background commands are watched for the whole session
            self.tasks.attach(group)
        if self.mcp is not None:  # connects in the background; the first turn waits for it
            self.mcp.start(group)
        if wait_for_start:
            await self._session_started()
        else:
            group.start_soon(self._session_started)

    async def stop(self, reason: str = "exit") -> None:
        """End the session's life: the SessionEnd hook, then every background command and
        MCP server is ended — shielded and bounded, so a cancelled front end still cleans up."""
        with anyio.CancelScope(shield=True):
            await self._session_ended(reason)

    async def _session_started(self) -> None:
        await hook_points.session_start(self.hooks, "resume" if self.session.resumed else "startup")

    async def _session_ended(self, reason: str) -> None:
        try:
            await hook_points.session_end(self.hooks, reason)
        finally:
            if self.tasks is not None:  # no background command outlives the session
                await self.tasks.aclose()
            if self.mcp is not None:  # nor any MCP server process
                await self.mcp.aclose()
            if self.models is not None:  # nor a provider's connections
                await self.models.aclose()

    def register_external_tools(self, tools: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, str]]]:
        """Register client tools; returns accepted names and rejected `{name, reason}`."""
        accepted: list[str] = []
        rejected: list[dict[str, str]] = []
        for spec in tools:
            name = str(spec.get("name", ""))
            parameters = spec.get("parameters")
            existing = self.toolset.get(name)
            # A name conflicts only with a tool this session offers, as in the reference
            # (`SearchWeb` without its service, `ReadMediaFile` for a text-only model are free);
            # an MCP tool that took over a client tool's name counts as built-in from then on.
            if existing is not None and not (
                name in self.external_names and isinstance(existing, ExternalTool)
            ):
                rejected.append({"name": name, "reason": "conflicts with builtin tool"})
                continue
            problem = schema_problem(parameters if parameters is not None else {})
            if problem is not None:
                rejected.append({"name": name, "reason": problem})
                continue
            self.toolset.add(ExternalTool(name, str(spec.get("description") or ""), parameters or {}))
            self.external_names.add(name)
            accepted.append(name)
        return accepted, rejected

    def update_budget(self, update: Budget | None, prices: dict[str, Any] | None = None) -> BudgetReport:
        """Apply a budget update and prices (`initialize`'s `budget` and `prices`, `set_budget`,
        `/budget`). Raises, changing nothing, ValueError for a malformed price table and
        BudgetError for a money limit on a model without a price."""
        from soulwire.wire.pricing import parse_prices

        assert self.ledger is not None
        model = self.soul.model
        self.ledger.update(update, parse_prices(prices or {}), model=model.model_name if model else None)
        self.state.save_if_changed(wait=False)
        return self.ledger.report()

    def save_state(self) -> None:
        """Write state.json now if anything in it changed (e.g. after set_plan_mode)."""
        self.state.save_if_changed()

    def close(self, *, exit_ok: bool = True) -> None:
        if self.tasks is not None:  # no background command outlives the session
            self.tasks.close()
        if self.soul.sandbox is not None:
            self.soul.sandbox.close()
        self.bus.flush()
        if self.session.store.exists():
            self.state.save_if_changed()
        self.session.close(exit_ok=exit_ok)


def build_runtime(
    options: SessionOptions, channel: ClientChannel | None = None, *, lock: SessionLock | None = None
) -> Runtime:
    """Build a session's runtime. Raises ConfigError for unusable configuration (and
    SessionHeldError when another process holds the session; `lock`: this process holds it
    already)."""
    config = validate_config(options.raw_config, options.config_path or "--config")
    loop = config.loop_control
    updates: dict[str, Any] = {}
    if options.max_steps_per_turn is not None:
        updates["max_steps_per_turn"] = options.max_steps_per_turn
    if options.max_retries_per_step is not None:
        updates["max_retries_per_step"] = options.max_retries_per_step
    if options.max_ralph_iterations is not None:
        updates["max_ralph_iterations"] = options.max_ralph_iterations
    if updates:
        loop = loop.model_copy(update=updates)
    try:
        model = resolve_model(config, model_alias=options.model, thinking=options.thinking)
        model_error = None if model else configuration_hint(options.config_path, options.share_dir)
    except LLMNotSet as exc:  # a model is named but unusable: prompts answer -32001 with why
        model, model_error = None, str(exc)
    _check_budget(config, model)
    session = open_session(options, protocol_version=PROTOCOL_VERSION, lock=lock)
    shared = options.stores is not None and options.stores.shared
    bus = EventBus(merge_window_s=SHARED_RECORD_WINDOW_S if shared else None)

    def record(message: WireModel) -> None:
        if not isinstance(message, NOT_RECORDED):
            session.store.record_wire(envelope(message))
            session.announce()

    bus.subscribe(record, merged=True)
    broker = ApprovalBroker(
        bus,
        channel=channel,
        yolo=options.yolo or config.default_yolo,
        afk=options.afk or options.print_mode,
        scope=config.approval_scope,
        mode=approval_mode(options, config),
    )
    questions = QuestionAsker(bus, afk=lambda: broker.afk, channel=channel)
    skills = session_skills_of(options)
    agent = _agent_spec(options)
    if agent is None:  # the default agent, without reading its file (start-up speed)
        prompt = system_prompt(options, skills)
    else:
        from soulwire.runtime.agentspec import builtin_args, render_system_prompt

        arguments = builtin_args(options.work_dir, list(options.add_dirs), skills.prompt_section())
        prompt = render_system_prompt(agent, arguments)
    context = Context(session.store, prompt)
    # The last process may have died inside a turn: a host that takes sessions over (serve)
    # continues one that was only waiting for approvals (not in an overlay: its writes died
    # with it); any other is closed in both records (and the turns of the sub-agents it was
    # running), so that the model and every face know.
    overlay = (options.overlay or config.overlay) != "off" or (session.store.dir / "overlay").exists()
    interrupted = options.continue_turn and session.store.has_open_turn()
    continuation = plan_continuation(session.store, context) if interrupted and not overlay else None
    if continuation is not None:
        broker.reissue = dict(continuation.asked)
    else:
        left_running = close_interrupted_turn(session.store, context)
        if left_running:
            close_interrupted_subagents(session.store.dir, left_running, PROTOCOL_VERSION)
    toolset = Toolset()
    soul = Soul(
        bus=bus,
        context=context,
        toolset=toolset,
        approver=broker,
        model=model,
        loop_control=loop,
        work_dir=options.work_dir,
        client_tools=ExternalToolCaller(channel, bus) if channel else None,
        slash_commands=default_commands(skills),
        model_error=model_error,
    )
    keeper = StateKeeper(session.store, broker, soul.state, add_dirs=[str(d) for d in options.add_dirs])
    keeper.restore()
    ledger = _ledger(config, bus, keeper)
    soul.meter = Meter(ledger)
    soul.additional_dirs = _workspace_dirs(options, keeper.state)
    soul.sandbox = sandbox = session_sandbox(options, config, keeper.state, soul.additional_dirs)
    if options.afk:
        soul.state["afk"] = True  # --afk is remembered by the session; print mode's afk is not
    plan = PlanMode(soul.state, plans_dir=options.share_dir / "plans", session_id=session.id)
    if options.plan_mode or (config.default_plan_mode and not session.resumed):
        plan.set(True)
    soul.plan = plan
    soul.plan_mode = lambda: plan.enabled
    soul.hooks = HookEngine(
        [Hook.from_config(h) for h in config.hooks],
        bus=bus,
        session_id=session.id,
        work_dir=str(options.work_dir),
        channel=channel,
        run_command=run_shell_command,
    )
    tasks = _background_tasks(config, session)
    soul.background = tasks
    models = SessionModels(config, options, model)
    agent_tool = AgentTool(
        soul,
        broker,
        session.store.dir,
        PROTOCOL_VERSION,
        jobs=tasks,
        models=models,
        background_timeout_s=config.background.agent_task_timeout_s,
    )
    tools: list[Tool] = [
        agent_tool,
        AskUserQuestion(questions),
        *default_tools(
            tasks,
            capabilities=model.capabilities if model else frozenset(),
            sandboxed=sandbox.active,
            services=config.services,
        ),
        ExitPlanMode(plan, questions, bus, afk=lambda: broker.afk),  # the reference's order
        EnterPlanMode(plan, questions, bypassed=lambda: broker.yolo or broker.afk),
    ]
    if agent is not None:
        tools = _agent_tools(agent, tools, soul)
        agent_tool.kinds = _subagent_kinds(agent, options, skills)
    acp_agents = {**(options.raw_config.get("acp_agents") or {}), **(agent.acp_agents if agent else {})}
    if acp_agents:  # other ACP agents as sub-agents (else the module is not even imported)
        _add_acp_agents(agent_tool, {"acp_agents": acp_agents})
    for tool in tools:
        toolset.add(tool)
    if (options.share_dir / "plugins").is_dir():  # else the module is not even imported
        _add_plugin_tools(options.share_dir / "plugins", config, toolset)
    bus.subscribe(keeper.on_event, merged=True)
    runtime = Runtime(
        options, config, session, bus, soul, broker, toolset, keeper, soul.hooks, plan, questions
    )
    runtime.tasks = tasks
    runtime.ledger = ledger
    runtime.models = models
    soul.switch_model = partial(switch_model, runtime)
    runtime.mcp = soul.mcp = _mcp_manager(options, config, toolset)
    if config.checkpoints.enabled if options.checkpoints is None else options.checkpoints:
        from soulwire.runtime.checkpoints import enable_checkpoints

        enable_checkpoints(runtime)
    runtime.continuation = continuation
    runtime.interrupted_turn = interrupted
    if overlay:
        from soulwire.runtime.overlay import enable_overlay

        enable_overlay(runtime)
    if log.isEnabledFor(logging.INFO):  # --verbose / --debug
        log.info(
            "soulwire %s: session %s (%s) in %s; model %s; agent %s; tools %s; %d skill(s)%s",
            __version__,
            session.id,
            "resumed" if session.resumed else "new",
            options.work_dir,
            model.alias if model else f"none ({model_error})",
            agent.file if agent else "default",
            ", ".join(t.name for t in tools),
            len(skills.skills),
            "".join(f"\n  skill {s.name} [{s.scope}] {s.path}" for s in skills.skills),
        )
    return runtime


def _check_budget(config: Config, model: ResolvedModel | None) -> None:
    """A money limit for a model without a price is refused before the session opens
    (ConfigError: one line, exit 2)."""
    try:
        Ledger(config.budgets, config.prices).check_model(model.model_name if model else None)
    except BudgetError as exc:
        raise ConfigError(str(exc)) from None


def _ledger(config: Config, bus: EventBus, keeper: StateKeeper) -> Ledger:
    """The session's budget ledger, going on from the totals state.json kept."""
    from soulwire.engine.budget import STATE_KEY

    ledger = Ledger(config.budgets, config.prices, bus.emit, saved=keeper.state.get(STATE_KEY))
    keeper.extras[STATE_KEY] = ledger.saved
    return ledger


def _add_plugin_tools(plugins_dir: Path, config: Config, toolset: Toolset) -> None:
    """The tools of the plugins installed with `soulwire plugin install` (never replacing a
    built-in tool of the same name)."""
    from soulwire.tools.plugins import host_values, load_plugin_tools

    for tool in load_plugin_tools(plugins_dir, host_values(config)):
        if toolset.get(tool.name) is None:
            toolset.add(tool)


def _agent_spec(options: SessionOptions) -> AgentSpec | None:
    if options.agent is None and options.agent_file is None:
        return None  # nothing to read or import: the built-in default agent
    from soulwire.runtime.agentspec import agent_file_for, load_agent_spec

    path = agent_file_for(options.agent, options.agent_file)
    return load_agent_spec(path) if path is not None else None


def _agent_tools(agent: AgentSpec, built: list[Tool], soul: Soul) -> list[Tool]:
    """The tools an agent file lists, in its order: built-in ones it names (a tool this
    session cannot offer, such as SearchWeb without its service, is left out), plus Think
    and SendDMail, which only agent files ask for."""
    from soulwire.engine.dmail import DMailBox, SendDMail, Think  # tools only agent files ask for

    by_name = {t.name: t for t in built}
    chosen: list[Tool] = []
    for name in agent.tool_names():
        if name == "SendDMail":
            soul.dmail = DMailBox(soul.context)
            soul.context.mark_checkpoints = True
            chosen.append(SendDMail(soul.dmail))
        elif name == "Think":
            chosen.append(Think())
        elif name in by_name and by_name[name] not in chosen:
            chosen.append(by_name[name])
    return chosen


def _add_acp_agents(agent_tool: AgentTool, raw_config: dict[str, Any]) -> None:
    from soulwire.config.loader import ConfigError
    from soulwire.engine.acp_delegate import delegates_of, describe

    try:
        delegates = delegates_of(raw_config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    agent_tool.delegate_to(delegates, describe(list(delegates.values())))


def _subagent_kinds(
    agent: AgentSpec, options: SessionOptions, skills: SkillCatalog
) -> dict[str, SubagentKind]:
    """The sub-agent types of an agent file (its `subagents`), each with its own prompt and
    tools; none declared keeps the built-in coder, explore and plan."""
    from soulwire.runtime.agentspec import builtin_args, load_agent_spec, render_system_prompt

    kinds: dict[str, SubagentKind] = {}
    for name, ref in agent.subagents.items():
        sub = load_agent_spec(ref.path)
        arguments = builtin_args(options.work_dir, list(options.add_dirs), skills.prompt_section())
        tools = frozenset(sub.tool_names())
        kinds[name] = SubagentKind(ref.description, render_system_prompt(sub, arguments), tools)
    return kinds


def _mcp_manager(options: SessionOptions, config: Config, toolset: Toolset) -> MCPManager | None:
    """The session's MCP servers, or None (and no import of the SDK) when none is configured."""
    servers = load_mcp_servers(options.mcp_config_files, options.mcp_configs, options.share_dir)
    if not servers:
        return None
    from soulwire.tools.mcp_client import MCPManager

    return MCPManager(
        servers, toolset, call_timeout_s=tool_call_timeout_s(config.mcp), share=options.share_dir
    )


def _background_tasks(config: Config, session: SessionHandle) -> BackgroundTasks:
    """The session's background task manager; tasks live under `<session>/tasks/`."""
    section = config.background
    limits = BackgroundLimits(
        max_running_tasks=section.max_running_tasks,
        read_max_bytes=section.read_max_bytes,
        notification_tail_lines=section.notification_tail_lines,
        notification_tail_chars=section.notification_tail_chars,
        kill_grace_s=section.kill_grace_period_ms / 1000,
        keep_alive_on_exit=section.keep_alive_on_exit,
    )
    return BackgroundTasks(session.store.dir / "tasks", limits)
