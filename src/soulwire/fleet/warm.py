"""Warm engines: a few long-lived `soulwire serve` processes host the sessions of many tasks,
so the interpreter, the engine and the provider SDK start once per process instead of once
per task. Tasks with the same engine settings (model, configuration, yolo, thinking, step
limit, sandbox, environment) share a group of engines; each task is one session on the
least busy of them, created and driven over one WebSocket with the SDK's
`RemoteSession.create`. A group's engines start as one `soulwire serve --processes N`: one process
loads everything once and forks the others, so N engines cost one start-up. An engine that
dies takes its tasks with it: they fail with `EngineLostError`, the backend runs them again,
and the group starts a replacement."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from soulwire.fleet.backend import EngineSettings, TurnSlot
from soulwire.fleet.engines import (
    GroupKey,
    ServeEngine,
    StartingEngines,
    default_engines_per_group,
    engine_flags,
    engine_home,
    start_engine,
    start_engines,
    stop_engine,
)
from soulwire.fleet.errors import EngineLostError, EngineStartError, SessionNotOpenedError, first_error
from soulwire.fleet.local import LocalBackend, note_session, one_line, turn_prompt
from soulwire.fleet.policy import decide
from soulwire.fleet.results import TaskResult, Usage
from soulwire.fleet.tasks import Task
from soulwire.fleet.tools import run_external_tool, tool_answer
from soulwire.wire.pricing import ModelPrice
from soulwire.wire.types import tool_error


class EngineGroup:
    """Up to `size` engines with the same settings. They start in the background as tasks
    ask for them; a task takes the least busy engine that is up, so the first tasks do not
    wait for every engine of the group to start."""

    def __init__(self, backend: WarmBackend, key: GroupKey) -> None:
        self.backend = backend
        self.key = key
        self.engines: list[ServeEngine] = []
        self.starting = 0
        self.busy = 0
        """Tasks running on or waiting for this group's engines."""
        self.failure: Exception | None = None
        self._changed = anyio.Event()

    def fill(self, demand: int = 1) -> None:
        """Start engines until `demand` (at most the group's size) are alive or starting."""
        self.engines = [e for e in self.engines if e.alive]
        size = self.backend.engines_per_group
        if not self.engines and not self.starting:
            # All of them at once: one process loads and forks the rest (nearly free), instead
            # of each later task that finds the engines busy paying another start-up.
            demand = size
        wanted = min(size, max(demand, self.busy))
        missing = wanted - len(self.engines) - self.starting
        if missing > 0:  # one process for all of them: it loads once and forks the others
            self.starting += missing
            self.backend.start_soon(self._start_some, missing)

    async def _start_some(self, count: int) -> None:
        try:
            engines = await self.backend.spawn(self.key, count)
        except Exception as exc:  # told to the tasks waiting for an engine
            self.failure = exc
        else:
            self.engines.extend(engines)
            self.failure = None
        finally:
            self.starting -= count
            self._changed.set()
            self._changed = anyio.Event()

    async def acquire(self) -> ServeEngine:
        """The least busy live engine (waiting for one to start when none is up); `release`
        it after the task."""
        self.busy += 1
        try:
            return await self._acquire()
        except BaseException:
            self.busy -= 1
            raise

    def release(self, engine: ServeEngine) -> None:
        engine.sessions -= 1
        self.busy -= 1
        if engine.sessions == 0 and engine.alive:
            self.backend.start_soon(self._retire_if_idle, engine)

    async def _retire_if_idle(self, engine: ServeEngine) -> None:
        """Stop an engine process nobody used for `idle_s` (the group's tasks are done): when
        none of the engines it serves has a session."""
        await anyio.sleep(self.backend.idle_s)
        siblings = engine.siblings or [engine]
        if engine.alive and all(e.sessions == 0 for e in siblings) and engine in self.engines:
            self.engines = [e for e in self.engines if e not in siblings]
            await stop_engine(engine, self.backend.settings.close_timeout)

    async def _acquire(self) -> ServeEngine:
        while True:
            self.fill()
            live = [e for e in self.engines if e.alive]
            if live:
                engine = min(live, key=lambda e: e.sessions)
                engine.sessions += 1
                return engine
            if self.failure is not None and self.starting == 0:
                failure, self.failure = self.failure, None
                raise failure
            await self._changed.wait()


class WarmBackend(LocalBackend):
    """Runs each task as a session on a warm `soulwire serve` process (see the module doc).

    Use it as an async context manager (the fleet driver does), which stops the engines at
    the end; `engines_per_group` processes serve each distinct set of engine settings."""

    name = "warm"

    def __init__(
        self,
        settings: EngineSettings | None = None,
        *,
        engines_per_group: int | None = None,
        early: Mapping[GroupKey, StartingEngines] | None = None,
    ) -> None:
        """`early`: engine processes already spawned (`spawn_engines` with `engine_home()` and
        `engines_per_group` copies) for a group's settings; the group takes them instead of
        spawning its first ones, and those no group takes are stopped with the others."""
        super().__init__(settings)
        self.engines_per_group = engines_per_group or default_engines_per_group()
        self.idle_s = 2.0
        """An engine with no session this long is stopped."""
        self._groups: dict[GroupKey, EngineGroup] = {}
        self._task_group: Any = None
        self._home = engine_home()
        self._early = dict(early or {})
        self.started_engines = 0

    async def __aenter__(self) -> WarmBackend:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            await self.stop_engines()
            for starting in self._early.values():  # spawned early for settings no task had
                await starting.kill()
            self._early.clear()
        group, self._task_group = self._task_group, None
        if group is not None:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)

    async def stop_engines(self) -> None:
        """SIGTERM every engine (running turns are cancelled, files closed), then SIGKILL
        what is left after `close_timeout`."""
        processes = {id(e.process): e for g in self._groups.values() for e in g.engines if e.alive}
        async with anyio.create_task_group() as group:
            for engine in processes.values():  # one stop per process: its copies stop with it
                group.start_soon(stop_engine, engine, self.settings.close_timeout)
        self._groups.clear()

    def engines(self, task: Task) -> list[ServeEngine]:
        """The live engines that host tasks with `task`'s engine settings."""
        group = self._groups.get(GroupKey.of(task))
        return [e for e in group.engines if e.alive] if group is not None else []

    def start_soon(self, func: Any, *args: Any) -> None:
        if self._task_group is None:
            raise RuntimeError("WarmBackend is used outside `async with`")
        self._task_group.start_soon(func, *args)

    def prepare(self, tasks: list[Task], concurrency: int) -> None:
        """Start the engines the first tasks will need now, while workspaces are copied."""
        demand: dict[GroupKey, int] = {}
        for task in tasks[:concurrency]:
            key = GroupKey.of(task)
            demand[key] = demand.get(key, 0) + 1
        for task in tasks[:concurrency]:
            self._group(task).fill(demand[GroupKey.of(task)])

    def _group(self, task: Task) -> EngineGroup:
        key = GroupKey.of(task)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = EngineGroup(self, key)
        return group

    async def spawn(self, key: GroupKey, count: int = 1) -> list[ServeEngine]:
        """`count` engines of one new process (forked copies after the first)."""
        if self._task_group is None:
            raise RuntimeError("WarmBackend is used outside `async with`")
        early = self._early.pop(key, None)
        if early is not None and early.count != count:
            await early.kill()
            early = None
        if early is not None:
            engines, pump = await early.ready()
        else:
            engines, pump = await start_engines(
                self.settings, key.flags, dict(key.env), work_dir=self._home, count=count
            )
        self._task_group.start_soon(pump)
        self.started_engines += len(engines)
        return engines

    async def _agent(
        self,
        task: Task,
        work_dir: Path,
        result: TaskResult,
        slot: TurnSlot | None,
        task_dir: Path,
        resume: str | None = None,
    ) -> None:
        engine = await self._group(task).acquire()
        record = _TurnRecord()
        hung: SessionNotOpenedError | None = None
        try:
            async with anyio.create_task_group() as watch:

                async def lost() -> None:
                    await engine.exited.wait()
                    watch.cancel_scope.cancel()

                watch.start_soon(lost)
                s = self.settings
                env = self.tool_env(task) if task.tools else {}  # (a copy of os.environ: only for tools)
                try:
                    await run_remote_turn(
                        engine,
                        task,
                        work_dir,
                        result,
                        record,
                        s.cancel_grace,
                        env,
                        slot,
                        s.startup_timeout,
                        task_dir=task_dir,
                        resume=resume,
                        prices=s.prices,
                    )
                except SessionNotOpenedError as exc:
                    hung = exc
                watch.cancel_scope.cancel()
            if hung is not None:
                # A live engine that cannot open a session within the start-up timeout is hung:
                # stopping it fails over the tasks it holds, and this one runs on a new engine.
                with anyio.CancelScope(shield=True):
                    await stop_engine(engine, self.settings.close_timeout)
                raise EngineLostError(f"{hung} (the engine at {engine.url} was stopped)")
        finally:
            self._group(task).release(engine)
        if not engine.alive and not record.ended:
            raise EngineLostError(engine.describe_exit())


@dataclass
class _TurnRecord:
    steps: int = 0
    usage: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    step_text: list[str] = field(default_factory=lambda: list[str]())
    final: str = ""
    ended: bool = False

    def absorb(self, event: dict[str, Any], live: TaskResult | None = None) -> None:
        """Take one event in; `live` (the task's record) gets steps and tokens as they come."""
        kind, payload = event.get("type"), event.get("payload") or {}
        if kind == "StepBegin":
            self._close_step()
            self.steps += int(payload.get("n", 0) > 0)
            if live is not None:
                live.steps = self.steps
        elif kind == "ContentPart" and payload.get("type") == "text":
            self.step_text.append(str(payload.get("text", "")))
        elif kind == "StatusUpdate" and isinstance(payload.get("token_usage"), dict):
            usage: dict[str, Any] = payload["token_usage"]
            for i, name in enumerate(("input_other", "output", "input_cache_read", "input_cache_creation")):
                self.usage[i] += int(usage.get(name) or 0)
            if live is not None:
                live.usage = Usage(
                    input_other=self.usage[0],
                    output=self.usage[1],
                    input_cache_read=self.usage[2],
                    input_cache_creation=self.usage[3],
                )
        elif kind == "CheckpointTaken" and live is not None and isinstance(payload.get("id"), str):
            live.checkpoint = payload["id"]
        elif kind == "TurnEnd":
            self._close_step()
            self.ended = True

    def _close_step(self) -> None:
        text = "".join(self.step_text)
        if text:
            self.final = text
        self.step_text.clear()

    def fill(self, result: TaskResult) -> None:
        self._close_step()
        result.steps = self.steps
        result.final_message = self.final
        result.usage = Usage(
            input_other=self.usage[0],
            output=self.usage[1],
            input_cache_read=self.usage[2],
            input_cache_creation=self.usage[3],
        )


async def run_remote_turn(
    engine: ServeEngine,
    task: Task,
    work_dir: Path,
    result: TaskResult,
    record: _TurnRecord,
    cancel_grace: float,
    tool_env: dict[str, str],
    slot: TurnSlot | None = None,
    open_timeout: float = math.inf,
    *,
    task_dir: Path | None = None,
    resume: str | None = None,
    prices: Mapping[str, ModelPrice] | None = None,
) -> None:
    """One session on `engine` for `task`: its prompt to the end (or its time limit), the
    approvals answered by the task's policy, `result` filled as events arrive; `slot` is
    taken once the session is open, before the prompt. Raises `SessionNotOpenedError` when
    the session is not open within `open_timeout` seconds (the wait for `slot` not counted).
    `resume`: the id of an earlier session to continue instead of a new one; `task_dir`
    keeps the session's id while its turn runs (`local.note_session`)."""
    from soulwire.sdk.remote import RemoteSession

    policy = task.approval

    async def call_tool(payload: dict[str, Any]) -> Any:
        tool, call_id, arguments = tool_answer(task.tools, payload)
        if tool is None:
            value = tool_error(f"no external tool {payload.get('name')!r} in this task", brief="Unknown tool")
        else:
            value = await run_external_tool(tool, arguments, work_dir, tool_env)
        return {"tool_call_id": call_id, "return_value": value.model_dump(mode="json")}

    def on_request(kind: str, payload: dict[str, Any]) -> Any:
        if kind == "ToolCallRequest":
            return call_tool(payload)
        if kind != "ApprovalRequest":
            return None  # questions: the request's deadline answers
        decision = decide(
            policy,
            str(payload.get("sender", "")),
            str(payload.get("action", "")),
            str(payload.get("description", "")),
        )
        return {"request_id": payload.get("id"), "response": decision}

    session_id: str | None = None
    opening = anyio.CancelScope()  # (its deadline is set once the engine takes the open: `_in_turn`)
    try:
        tools = [t.spec() for t in task.tools]
        hello = _budget_hello(task, prices) or {}
        hello.setdefault("capabilities", {})["supports_checkpoints"] = True  # CheckpointTaken events
        if resume is None:  # created and attached on one connection
            where = str(work_dir)
            opened = RemoteSession.create(
                engine.ws_base,
                engine.token,
                work_dir=where,
                on_request=on_request,
                external_tools=tools,
                initialize=hello,
            )
        else:
            url = f"{engine.ws_base}/ws/sessions/{resume}"
            opened = RemoteSession.attach(
                url, engine.token, on_request=on_request, external_tools=tools, initialize=hello
            )
        with opening:
            async with _attach_errors(), _in_turn(engine, opened, opening, open_timeout) as session:
                opening.deadline = math.inf  # open: from here the task's time limit rules
                session_id = result.session_id = session.session_id or resume
                if slot is not None:
                    await slot.take()
                if task_dir is not None:
                    note_session(task_dir, session_id)
                with anyio.move_on_after(task.time_limit + cancel_grace):
                    with anyio.move_on_after(task.time_limit) as soft:
                        try:
                            async for event in session.prompt(turn_prompt(task, result.resumed)):
                                record.absorb(event, result)
                        except RuntimeError:
                            pass  # the engine's error answer, kept in session.last_error
                    if soft.cancelled_caught:
                        result.status, result.reason = "timed_out", f"time limit {task.time_limit:g}s"
                        with anyio.move_on_after(cancel_grace) as hard:
                            await session.call("cancel")
                        if hard.cancelled_caught:
                            result.reason += "; the turn did not stop after cancel"
                # TurnEnd can come before the prompt's answer (its status, or an error such
                # as "LLM is not set"): wait for it.
                if record.ended:
                    with anyio.move_on_after(cancel_grace):
                        await session.wait_answer()
                outcome = (session.last_result or {}).get("status")
                if result.status == "done" and session.last_error is not None:
                    result.status, result.reason = "failed", f"engine_error: {one_line(session.last_error)}"
                elif result.status == "done":
                    _judge(result, outcome, record)
        if opening.cancelled_caught:
            raise SessionNotOpenedError(f"the engine did not open the session within {open_timeout:g}s")
    except anyio.get_cancelled_exc_class():
        if session_id is not None:
            with anyio.move_on_after(2, shield=True):  # the fleet stops: stop the turn on the server
                await _cancel_quietly(engine, session_id)
        raise
    finally:
        record.fill(result)


@asynccontextmanager
async def _in_turn(
    engine: ServeEngine, opened: Any, opening: anyio.CancelScope, open_timeout: float
) -> AsyncGenerator[Any]:
    """The session `opened`, opened while holding one of `engine.opening`'s places. The
    engine has `open_timeout` seconds from then (`opening`'s deadline): waiting behind other
    tasks' opens does not make a busy engine look hung."""
    async with AsyncExitStack() as stack:
        async with engine.opening:
            opening.deadline = anyio.current_time() + open_timeout
            session = await stack.enter_async_context(opened)
        yield session


@asynccontextmanager
async def _attach_errors() -> AsyncGenerator[None]:
    """A refused WebSocket (the engine could not open the session: a bad configuration, …)
    as one `EngineStartError` with the server's reason, instead of a group of network errors."""
    try:
        yield
    except Exception as exc:
        leaf = first_error(exc)
        response = getattr(leaf, "response", None)
        body = getattr(response, "body", None)
        if isinstance(body, bytes | bytearray):
            try:
                detail = json.loads(body).get("detail", "")
            except ValueError:
                detail = body.decode("utf-8", "replace")
            status = getattr(response, "status_code", "?")
            raise EngineStartError(f"the engine refused the session (HTTP {status}): {detail}") from None
        if leaf is not exc:
            raise leaf from None
        raise


async def _cancel_quietly(engine: ServeEngine, session_id: str) -> None:
    """`cancel` the session's turn over a fresh connection (best effort)."""
    from soulwire.sdk.remote import RemoteSession

    if not engine.alive:
        return
    ws_url = f"{engine.ws_base}/ws/sessions/{session_id}"
    try:
        async with _attach_errors(), RemoteSession.attach(ws_url, engine.token) as session:
            await session.call("cancel")
    except Exception:
        pass


def _budget_hello(task: Task, prices: Mapping[str, ModelPrice] | None) -> dict[str, Any] | None:
    """What `initialize` says of the task's budget (and the run's prices, which price it)."""
    if task.budget is None:
        return None
    from soulwire.wire.pricing import price_table

    hello: dict[str, Any] = {
        "capabilities": {"supports_budget": True},
        "budget": task.budget.model_dump(mode="json", exclude_unset=True),
    }
    if prices:
        hello["prices"] = price_table(prices)
    return hello


def _judge(result: TaskResult, outcome: Any, record: _TurnRecord) -> None:
    if outcome == "finished":
        return
    if outcome in ("max_steps_reached", "budget_exceeded"):
        result.status, result.reason = "failed", outcome
    elif outcome == "cancelled":
        result.status, result.reason = "cancelled", "the turn was cancelled"
    elif outcome is None and not record.ended:
        result.status, result.reason = "failed", "the turn ended without an answer"
    elif outcome is not None:
        result.status, result.reason = "failed", f"turn ended: {outcome}"


__all__ = [
    "EngineGroup",
    "GroupKey",
    "ServeEngine",
    "WarmBackend",
    "engine_flags",
    "start_engine",
    "start_engines",
    "stop_engine",
]
