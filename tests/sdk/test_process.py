"""The engine process: not found, exiting early, crashing mid-turn, not answering, refusing
to exit; and that closing a session never leaves a process behind."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import anyio
import pytest

import soulwire.sdk as sdk
from soulwire.wire.messages import ToolCallRequest
from soulwire.wire.types import ToolCall

from .conftest import Engine, process_group_members
from .test_engines import call

pytestmark = pytest.mark.anyio


@sdk.tool
async def hang() -> str:
    """Never returns."""
    await asyncio.sleep(3600)  # (the scenario: a tool that never returns)
    return ""


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with Path(f"/proc/{pid}/stat").open() as f:  # still listed: only acceptable as a zombie
        return f.read().split(") ")[1].startswith("Z")


async def test_engine_not_found(tmp_path: Path):
    with pytest.raises(sdk.EngineNotFoundError, match="no-such-engine"):
        await sdk.Session(executable=str(tmp_path / "no-such-engine")).start()


async def test_engine_exiting_at_startup_reports_code_and_stderr(fake, soulwire: Engine, tmp_path: Path):
    with pytest.raises(sdk.EngineExitedError) as info:
        await sdk.Session(**fake("exit_early")).start()
    assert info.value.returncode == 2
    assert "the configuration is broken" in info.value.stderr_tail
    assert "during startup" in str(info.value) and "configuration is broken" in str(info.value)

    options = soulwire.options("text: x", config_file=tmp_path / "missing.toml")
    with pytest.raises(sdk.EngineExitedError, match="config file does not exist") as info:
        await sdk.Session(**options).start()
    assert info.value.returncode == 2


async def test_crash_mid_turn_is_a_clear_error(fake):
    async with sdk.Session(**fake("crash")) as session:
        turn = session.prompt("go")
        with pytest.raises(sdk.EngineExitedError) as info:
            async for _ in turn:
                pass
        assert info.value.returncode == 3
        assert "crashed on purpose" in str(info.value)
        with pytest.raises(sdk.EngineExitedError):
            session.prompt("again")


async def test_real_engine_killed_during_a_tool_call(soulwire: Engine):
    async with sdk.Session(**soulwire.options(call("h1", "hang", {}), tools=[hang])) as session:
        turn = session.prompt("go")
        with pytest.raises(sdk.EngineExitedError) as info:
            async for event in turn:
                if isinstance(event, ToolCall):
                    assert session.pid is not None
                    os.kill(session.pid, signal.SIGKILL)
        assert info.value.returncode == -signal.SIGKILL
        assert turn.error is info.value


async def test_startup_timeout_kills_the_engine(fake):
    session = sdk.Session(**fake("silent", startup_timeout=0.5))
    with pytest.raises(sdk.StartupTimeoutError):
        await session.start()
    assert session.pid is not None and gone(session.pid)
    assert session.closed


async def test_close_leaves_no_process_behind(soulwire: Engine):
    async with sdk.Session(**soulwire.options("text: hi")) as session:
        await session.prompt("hi")
        pid = session.pid
        assert pid is not None and process_group_members(pid) == [pid]
    assert session.returncode == 0
    assert gone(pid) and process_group_members(pid) == []
    with pytest.raises(sdk.SessionClosedError):
        session.prompt("after close")
    await session.close()  # idempotent


async def test_engine_ignoring_eof_is_killed_with_its_children(fake, tmp_path: Path):
    pidfile = tmp_path / "pids"
    session = sdk.Session(**fake("stubborn", "--pidfile", str(pidfile), close_timeout=0.3))
    await session.start()
    engine_pid, child_pid = (int(p) for p in pidfile.read_text().split())
    assert not gone(child_pid)
    async with asyncio.timeout(60):  # 0.3 s for EOF + 2 s after SIGTERM, then SIGKILL
        await session.close()
    assert session.returncode == -signal.SIGKILL
    async with asyncio.timeout(30):
        while not (gone(engine_pid) and gone(child_pid)):
            await asyncio.sleep(0.05)
    assert process_group_members(engine_pid) == []


async def test_close_while_a_turn_runs(soulwire: Engine):
    async with sdk.Session(**soulwire.options(call("h1", "hang", {}), tools=[hang])) as session:
        turn = session.prompt("go")
        async for event in turn:
            if isinstance(event, ToolCall):
                break
    assert turn.finished
    # the engine ends the turn on stdin EOF; if it could not, the turn reports the close
    assert turn.status == "cancelled" or isinstance(turn.error, sdk.SessionClosedError)


async def test_strict_tools_fails_start_and_cleans_up(soulwire: Engine):
    @sdk.tool(name="Shell")
    def shell(command: str) -> str:
        """Pretends to be the built-in."""
        return command

    session = sdk.Session(**soulwire.options("text: x", tools=[shell], strict_tools=True))
    with pytest.raises(sdk.ToolsRejectedError, match="conflicts with builtin tool") as info:
        await session.start()
    assert "Shell" in info.value.rejected
    assert session.pid is not None and gone(session.pid)


async def test_replayed_tool_requests_are_history_not_questions(soulwire: Engine):
    asked: list[str] = []

    @sdk.tool
    def ping() -> str:
        """Answers pong."""
        asked.append("ping")
        return "pong"

    async with sdk.Session(**soulwire.options(call("p1", "ping", {}), "text: ok", tools=[ping])) as session:
        await session.prompt("go")
        history = [event async for event in session.replay()]
    assert asked == ["ping"]
    assert [e.id for e in history if isinstance(e, ToolCallRequest)] == ["p1"]


async def test_cancelling_the_task_that_owns_a_session_leaves_no_process(soulwire: Engine):
    """The session's owner is cancelled mid-turn (a timeout around it): the engine and every
    task of the session end with it."""
    pids: list[int] = []
    with anyio.CancelScope() as scope:
        async with sdk.Session(**soulwire.options(call("h1", "hang", {}), tools=[hang])) as session:
            assert session.pid is not None
            pids.append(session.pid)
            async for event in session.prompt("go"):
                if isinstance(event, ToolCall):  # mid-turn: the hanging tool is starting
                    scope.cancel()
    assert scope.cancelled_caught
    assert session.closed and gone(pids[0]) and process_group_members(pids[0]) == []


async def test_an_answered_approval_stops_its_timeout(soulwire: Engine):
    """The timeout task of an approval ends when it is answered (no default applied later)."""
    shell = call("s1", "Shell", {"command": "true"})
    options = soulwire.options(shell, "text: done", approval_timeout=0.2, approval_default="reject")
    async with sdk.Session(**options) as session:
        seen: list[sdk.Approval] = []
        async for event in session.prompt("go"):
            if isinstance(event, sdk.Approval):
                seen.append(event)
                assert event.approve()
        # The answer stopped the timer: its default can never be applied later.
        timer = seen[0]._timer  # pyright: ignore[reportPrivateUsage]
        assert timer is not None and timer.cancel_called
    assert [a.answered_by for a in seen] == ["stream"]
    assert seen[0].decision == sdk.ApprovalDecision.approve()
