"""A fleet task done by another ACP agent (`"agent": ["kimi", "acp"]`): the command started in
the task's workspace, one session, the task's prompt, permission requests answered by the
task's approval policy, the time limit enforced with `session/cancel` and then by ending the
agent's process group. Workspaces, checks, diffs and results are the fleet's as for any task,
so one task file compares agents side by side."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any, cast

import anyio

from soulwire.fleet.backend import TurnSlot
from soulwire.fleet.errors import EngineStartError
from soulwire.fleet.policy import decide
from soulwire.fleet.results import TaskResult, Usage
from soulwire.fleet.tasks import Task
from soulwire.wire.pipes import JsonLinesPipe

_STOP_WAIT_S = 5.0


class _Client:
    """The editor side: collects the answer's text and tool calls, applies the policy."""

    def __init__(self, task: Task, name: str) -> None:
        self._task = task
        self._name = name
        self.texts: list[str] = []
        self.tool_calls = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", "")
        if kind == "agent_message_chunk":
            text = getattr(update.content, "text", None)
            if isinstance(text, str):
                self.texts.append(text)
        elif kind == "tool_call":
            self.tool_calls += 1

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        action = f"acp:{getattr(tool_call, 'kind', None) or 'other'}"
        answer = decide(self._task.approval, self._name, action, str(getattr(tool_call, "title", "") or ""))
        wanted = (
            ("allow_always", "allow_once")
            if answer.startswith("approve")
            else ("reject_once", "reject_always")
        )
        chosen = next((o.option_id for kind in wanted for o in options if o.kind == kind), None)
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))


async def run_acp_task(
    task: Task, work_dir: Path, result: TaskResult, slot: TurnSlot | None, env: dict[str, str]
) -> None:
    """The task's one turn on its ACP agent, filling `result`; raises EngineStartError when the
    agent cannot be started or fails before its turn ends."""
    from acp import PROTOCOL_VERSION, RequestError
    from acp.client.connection import ClientSideConnection

    assert isinstance(task.agent, list)
    client = _Client(task, os.path.basename(task.agent[0]))
    try:
        process = await anyio.open_process(
            task.agent, cwd=work_dir, env=env, stderr=subprocess.DEVNULL, start_new_session=True
        )
    except OSError as exc:
        raise EngineStartError(
            f"cannot start the ACP agent {task.agent[0]!r}: {exc.strerror or exc}"
        ) from None
    pipe = JsonLinesPipe(process)
    conn = ClientSideConnection(cast(Any, client), cast(Any, pipe))  # duck-typed to its protocols
    ended = False
    try:
        try:
            async with anyio.create_task_group() as group:
                # The agent may die with its stdout still open (a child holds it): its exit
                # ends the task as the end of its output would.
                group.start_soon(_watch, process, group.cancel_scope)
                await _turn(conn, task, work_dir, result, slot, PROTOCOL_VERSION)
                ended = True
                group.cancel_scope.cancel()
        except BaseExceptionGroup as failed:  # the one error of the turn, for the clauses below
            raise failed.exceptions[0] from None
        if not ended:
            raise EngineStartError(f"the ACP agent exited with status {process.returncode} mid-turn")
    except TimeoutError:
        result.status, result.reason = (
            "timed_out",
            f"time limit {task.time_limit:g}s (the agent did not start)",
        )
    except RequestError as exc:
        raise EngineStartError(f"the ACP agent answered error {exc.code}: {exc}") from None
    except (OSError, ConnectionError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
        raise EngineStartError(f"the ACP agent {task.agent_label!r} failed: {pipe.problem or exc}") from None
    finally:
        result.final_message = "".join(client.texts).strip()
        result.steps = max(result.steps, client.tool_calls)
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(_STOP_WAIT_S):
                await conn.close()
                await process.wait()
            _end(process.pid)
            with anyio.move_on_after(_STOP_WAIT_S):
                await process.wait()


async def _turn(
    conn: Any, task: Task, work_dir: Path, result: TaskResult, slot: TurnSlot | None, version: int
) -> None:
    with anyio.fail_after(task.time_limit):  # an agent that never answers is not waited for
        await conn.initialize(protocol_version=version)
        session = await conn.new_session(cwd=str(work_dir), mcp_servers=[])
    result.session_id = session.session_id
    if slot is not None:
        await slot.take()
    reply = None
    with anyio.move_on_after(task.time_limit) as soft:
        reply = await conn.prompt(
            session_id=session.session_id, prompt=[{"type": "text", "text": task.prompt}]
        )
    if soft.cancelled_caught:
        result.status, result.reason = "timed_out", f"time limit {task.time_limit:g}s"
        with anyio.move_on_after(_STOP_WAIT_S):
            await conn.cancel(session_id=session.session_id)
        return
    assert reply is not None
    usage = reply.usage
    if usage is not None:
        result.usage = Usage(
            input_other=usage.input_tokens - (usage.cached_read_tokens or 0),
            output=usage.output_tokens,
            input_cache_read=usage.cached_read_tokens or 0,
            input_cache_creation=usage.cached_write_tokens or 0,
        )
    stop = str(reply.stop_reason)
    if stop == "max_turn_requests":
        result.status, result.reason = "failed", "max_steps_reached"
    elif stop == "cancelled":
        result.status, result.reason = "cancelled", "the turn was cancelled"
    elif stop not in ("end_turn", "max_tokens"):
        result.status, result.reason = "failed", f"turn ended: {stop}"


async def _watch(process: Any, scope: anyio.CancelScope) -> None:
    await process.wait()
    scope.cancel()


def _end(pid: int) -> None:
    """The agent and everything it started (its own process group)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
