"""Warm engines: many tasks' sessions on a few long-lived `soulwire serve` processes."""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

import anyio
import pytest

from soulwire import fleet
from soulwire.fleet.backend import TurnSlot
from tests.fleet.conftest import FleetLab, shell, write_file

pytestmark = pytest.mark.anyio


async def test_four_tasks_share_one_warm_engine_each_in_its_own_workspace(lab: FleetLab) -> None:
    source = lab.workspace("repo", {"README.md": "hello\n"})
    for name in ("a", "b", "c", "d"):
        lab.task(
            name,
            write_file("notes.txt", "same name\n"),
            "text: wrote it",
            shared="one",
            workspace=str(source),
            check="grep -q 'same name' notes.txt",
        )
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"
    backend = lab.warm_backend(engines=1)
    results = await fleet.run_all(tasks, concurrency=4, out=out, backend=backend)

    assert {r.id: r.status for r in results} == {t.id: "done" for t in tasks}, [r.reason for r in results]
    assert backend.started_engines == 1  # four sessions, one engine process
    assert len({r.session_id for r in results}) == 4
    assert len({r.work_dir for r in results}) == 4
    for result in results:
        assert result.passed is True and result.steps == 2 and result.final_message == "wrote it"
        assert Path(result.work_dir or "", "notes.txt").read_text() == "same name\n"
        assert "+same name" in result.diff
    assert not (source / "notes.txt").exists()
    # The session is on disk where `soulwire --session` finds it.
    assert list(lab.share.glob(f"sessions/*/{results[0].session_id}"))


async def test_warm_time_limit_failing_check_and_step_limit(lab: FleetLab) -> None:
    lab.task("hangs", shell("sleep 60"), "text: never", time_limit=1.5)
    lab.task("bad-check", "text: ok", check="echo nope; exit 4")
    lab.task("steps", write_file("a.txt", "x"), write_file("b.txt", "y"), "text: end", max_steps=1)
    tasks = fleet.load_tasks(lab.write_tasks())
    results = {r.id: r for r in await fleet.run_all(tasks, concurrency=3, backend=lab.warm_backend())}

    hangs = results["hangs"]
    assert hangs.status == "timed_out" and hangs.reason is not None and "time limit 1.5s" in hangs.reason
    bad = results["bad-check"]
    assert bad.status == "done" and bad.passed is False
    assert bad.check is not None and bad.check.exit_code == 4 and "nope" in bad.check.output_tail
    steps = results["steps"]
    assert steps.status == "failed" and steps.reason == "max_steps_reached"


async def test_approval_rules_answer_each_request(lab: FleetLab) -> None:
    rules = {
        "rules": [{"sender": "Shell", "description": "Run command `echo allowed*", "decision": "approve"}],
        "default": "reject",
    }
    lab.task(
        "rules",
        shell("echo allowed > ok.txt", "s1"),
        shell("echo denied > no.txt", "s2"),
        "text: done",
        approval=rules,
    )
    tasks = fleet.load_tasks(lab.write_tasks())
    for backend in (lab.backend(), lab.warm_backend()):
        (result,) = await fleet.run_all(tasks, backend=backend, run_dir=lab.root / backend.name)
        assert result.status == "done", result.reason
        work = Path(result.work_dir or "")
        assert (work / "ok.txt").read_text() == "allowed\n"
        assert not (work / "no.txt").exists()


async def test_a_killed_engine_process_its_task_runs_again_once(lab: FleetLab) -> None:
    marker = lab.root / "started"
    lab.task("victim", shell(f"touch {marker}; sleep 30"), "text: never", time_limit=4)
    lab.task("calm", "text: fine")
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"
    backend = lab.warm_backend(engines=1, retries=1)

    async def kill_the_engine_when_the_command_runs() -> None:
        with anyio.fail_after(60):
            while not marker.exists():
                await anyio.sleep(0.05)
        marker.unlink()
        (engine,) = backend.engines(tasks[0])
        os.killpg(engine.process.pid, signal.SIGKILL)

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_the_engine_when_the_command_runs)
        results = await fleet.run_all(tasks, concurrency=2, out=out, backend=backend)
    lines = out.read_text().splitlines()
    assert len(lines) == 2  # one line per task: the retried task is not written twice
    victim = fleet.read_results(out)["victim"]
    # The retry plays the same script on a new engine, and (not killed this time) hits its limit.
    assert victim.attempts == 2 and victim.status == "timed_out", victim.reason
    assert backend.started_engines == 3  # calm's, the victim's, and its replacement
    assert {r.id for r in results} == {"victim", "calm"}


async def test_cost_from_the_usage_and_a_price(lab: FleetLab) -> None:
    from soulwire.sdk.pricing import ModelPrice

    usage = 'usage: {"input_other": 1000000, "output": 500000}'
    lab.task("priced", f"text: hello\n{usage}")
    tasks = fleet.load_tasks(lab.write_tasks())
    prices = {"scripted_echo": ModelPrice(input=2.0, output=10.0)}
    for backend in (lab.backend(), lab.warm_backend()):
        backend.settings = lab.settings(prices=prices)
        (result,) = await fleet.run_all(tasks, backend=backend, run_dir=lab.root / backend.name)
        assert result.usage.input_other == 1_000_000 and result.usage.output == 500_000
        assert result.cost_usd == 7.0  # 1M x $2 + 0.5M x $10
    (unpriced,) = await fleet.run_all(tasks, backend=lab.warm_backend(), run_dir=lab.root / "unpriced")
    assert unpriced.cost_usd is None  # no price for this model: unknown, not zero


async def test_external_tools_run_in_the_workspace(lab: FleetLab) -> None:
    from tests.fleet.conftest import call

    tool = {
        "name": "count_lines",
        "description": "Count the lines of a file of the workspace",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        "command": "python3 -c \"import json,sys; print(len(open(json.load(sys.stdin)['path']).readlines()))\"",
    }
    source = lab.workspace("lines", {"three.txt": "a\nb\nc\n"})
    lab.task(
        "tooled",
        call("t1", "count_lines", {"path": "three.txt"}),
        "text: counted",
        workspace=str(source),
        tools=[tool],
    )
    tasks = fleet.load_tasks(lab.write_tasks())
    for backend in (lab.backend(), lab.warm_backend()):
        (result,) = await fleet.run_all(tasks, backend=backend, run_dir=lab.root / backend.name)
        assert result.status == "done" and result.steps == 2, result.reason
        shares = list(lab.share.glob(f"sessions/*/{result.session_id}/wire.jsonl"))
        assert shares and '"output":"3\\n"' in shares[0].read_text().replace(" ", ""), backend.name


@pytest.mark.usefixtures("bwrap")  # fails without bubblewrap, as every sandbox test does
async def test_a_read_only_sandbox_per_task(lab: FleetLab) -> None:
    lab.task("confined", shell("echo x > out.txt"), "text: tried", sandbox="read-only", sandbox_network=False)
    lab.task("free", shell("echo x > out.txt"), "text: wrote")
    tasks = fleet.load_tasks(lab.write_tasks())
    for backend in (lab.backend(), lab.warm_backend()):
        results = {
            r.id: r for r in await fleet.run_all(tasks, backend=backend, run_dir=lab.root / backend.name)
        }
        assert {r.status for r in results.values()} == {"done"}, [r.reason for r in results.values()]
        assert not Path(results["confined"].work_dir or "", "out.txt").exists(), backend.name
        assert Path(results["free"].work_dir or "", "out.txt").read_text() == "x\n"


def _forked_copies(pid: int) -> list[int]:
    """The `soulwire serve` copies `pid` forked (its other children are its tools' commands)."""
    with Path(f"/proc/{pid}/task/{pid}/children").open(encoding="ascii") as handle:
        children = [int(p) for p in handle.read().split()]
    return [c for c in children if b"serve" in Path(f"/proc/{c}/cmdline").read_bytes()]


async def test_two_engines_are_one_process_and_a_dead_copy_fails_over_its_task(lab: FleetLab) -> None:
    started = lab.root / "started"
    started.mkdir()
    script = shell(f"touch {started}/$$; sleep 30")
    for name in ("one", "two"):
        lab.task(name, script, "text: never", shared="both", time_limit=4)
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"
    backend = lab.warm_backend(engines=2, retries=1)
    killed: list[int] = []

    async def kill_the_copy_when_both_commands_run() -> None:
        with anyio.fail_after(60):
            while len(list(started.iterdir())) < 2:
                await anyio.sleep(0.05)
        engines = backend.engines(tasks[0])
        assert len(engines) == 2 and len({e.process.pid for e in engines}) == 1  # one process, forked
        (copy,) = _forked_copies(engines[0].process.pid)
        killed.append(copy)
        os.kill(copy, signal.SIGKILL)  # the copy only: the first process and its sessions live on

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_the_copy_when_both_commands_run)
        results = await fleet.run_all(tasks, concurrency=2, out=out, backend=backend)
    assert killed
    assert len(out.read_text().splitlines()) == 2  # one line per task
    by_attempts = sorted(r.attempts for r in results)
    assert by_attempts == [1, 2], [
        (r.id, r.attempts, r.reason) for r in results
    ]  # only the copy's task ran again
    assert all(r.status == "timed_out" for r in results), [r.reason for r in results]
    assert backend.started_engines == 3  # the two of the first process, and the copy's replacement


async def test_the_next_tasks_are_staged_while_every_place_is_taken(lab: FleetLab) -> None:
    """At concurrency 1 the next task's workspace and session are ready before the running
    task ends, and its turn starts only once that task's place is free."""
    asked, ran = lab.root / "asked", lab.root / "ran"
    asked.mkdir()
    # Each command runs until the next task has asked for a place (20 s bound), whatever
    # the machine's speed: the n-th command waits for n + 1 tasks to have asked (at most 3).
    wait_for_the_next = (
        f"mkdir -p {ran}; touch {ran}/$$; n=$(ls {ran} | wc -l); want=$((n + 1 > 3 ? 3 : n + 1)); i=0; "
        f"while [ $(ls {asked} | wc -l) -lt $want ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i + 1)); done"
    )
    for name in ("a", "b", "c"):
        lab.task(name, shell(wait_for_the_next), "text: slept", shared="same")
    tasks = fleet.load_tasks(lab.write_tasks())
    backend = lab.warm_backend(engines=1)
    waits: dict[str, tuple[float, str | None]] = {}
    run_task = backend.run_task

    async def spying(
        task: fleet.Task, task_dir: Path, record: fleet.TaskResult, slot: TurnSlot | None = None
    ) -> fleet.TaskResult:
        assert slot is not None  # the warm backend stages
        take = slot.take

        async def noted_take() -> None:
            waits.setdefault(task.id, (time.time(), record.session_id))
            (asked / task.id).touch()
            await take()

        slot.take = noted_take  # type: ignore[method-assign]
        return await run_task(task, task_dir, record, slot)

    backend.run_task = spying  # type: ignore[method-assign]
    results = await fleet.run_all(tasks, concurrency=1, backend=backend)

    assert [r.status for r in results] == ["done"] * 3, [r.reason for r in results]
    ordered = sorted(results, key=lambda r: r.started_at or 0)
    for earlier, later in itertools.pairwise(ordered):
        assert (earlier.finished_at or 0) <= (later.started_at or 0)  # one turn at a time
        waited_at, session = waits[later.id]
        assert session == later.session_id  # its session was open when it asked for a place…
        assert waited_at < (earlier.finished_at or 0)  # …before the task ahead had finished


async def test_an_engine_that_never_opens_the_session_is_stopped_and_the_task_fails(lab: FleetLab) -> None:
    """A hung engine (it accepts the WebSocket, then says nothing) must not hold a task, and
    with it the whole run, forever: past the start-up timeout the engine is stopped and the
    task runs again on a new one, then fails with the reason."""
    import sys

    hung = [sys.executable, str(Path(__file__).with_name("hung_engine.py"))]
    lab.task("stuck", "text: never")
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"
    backend = lab.warm_backend(engines=1, retries=1, executable=hung, startup_timeout=2)
    with anyio.fail_after(30):
        (result,) = await fleet.run_all(tasks, concurrency=1, out=out, backend=backend)
    assert result.status == "failed" and result.attempts == 2, (result.status, result.reason)
    assert "did not open the session within 2s" in (result.reason or ""), result.reason
    assert result.started_at is not None and result.session_id is None
    assert backend.started_engines == 2  # the first hung engine was stopped, its replacement too
    assert not backend.engines(tasks[0])


async def test_a_stopped_engine_is_known_gone_as_soon_as_its_stop_returns(tmp_path: Path) -> None:
    """`stop_engine` returns once the process has exited, and from then on neither the engine
    nor its forked copies may be given to a task: a task retried at once after its engine
    was stopped (a hung one) was once handed the same engine, because only the stderr pump
    said it was gone, a moment later."""
    import sys

    from soulwire.fleet.engines import start_engines, stop_engine

    hung = [sys.executable, str(Path(__file__).with_name("hung_engine.py"))]
    settings = fleet.EngineSettings(executable=hung, startup_timeout=10)
    engines, _pump = await start_engines(settings, (), {}, work_dir=tmp_path, count=2)  # (no pump runs)
    assert all(engine.alive for engine in engines)
    await stop_engine(engines[0], 5)
    assert not any(engine.alive for engine in engines)
    assert engines[0].process.returncode is not None


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "fresh"])
async def test_a_task_without_a_model_fails_at_once_with_the_reason(lab: FleetLab, warm: bool) -> None:
    """No model configured (a new user without an API key): the engine answers the prompt
    with an error after the turn's end. The task fails with that reason, without waiting."""
    lab.lines.append({"id": "nomodel", "prompt": "hello", "approval": "yolo", "time_limit": 60})
    tasks = fleet.load_tasks(lab.write_tasks())
    grace = 600  # far past the bound below: a task that waited out the grace could not pass
    backend = (
        lab.warm_backend(cancel_grace=grace) if warm else fleet.LocalBackend(lab.settings(cancel_grace=grace))
    )
    with anyio.fail_after(60):
        (result,) = await fleet.run_all(tasks, concurrency=1, backend=backend)
    assert result.status == "failed", (result.status, result.reason)
    assert "LLM is not set" in (result.reason or ""), result.reason


async def test_an_engine_opens_two_sessions_at_a_time_in_the_order_they_came() -> None:
    """Staged tasks open their sessions a few at a time, first come first served, and the
    wait for a place does not count against the open's time limit (a busy engine is not
    a hung one)."""
    from contextlib import asynccontextmanager
    from typing import Any, cast

    from soulwire.fleet.engines import ServeEngine
    from soulwire.fleet.warm import _in_turn  # pyright: ignore[reportPrivateUsage]

    engine = ServeEngine(process=cast(Any, None), url="http://127.0.0.1:9", token="t")
    opening_now, most, order = 0, 0, list[int]()

    @asynccontextmanager
    async def opened(n: int):  # an open: its round trips take 0.1 s
        nonlocal opening_now, most
        opening_now += 1
        most = max(most, opening_now)
        order.append(n)
        await anyio.sleep(0.1)  # (the scenario: an open whose round trips take 0.1 s)
        opening_now -= 1
        yield n

    timed_out: list[int] = []

    async def task(n: int) -> None:
        scope = anyio.CancelScope()
        with scope:
            async with _in_turn(engine, opened(n), scope, 0.3) as session:
                scope.deadline = float("inf")  # open: the turn is not under the open's limit
                assert session == n
                await anyio.sleep(0.05)  # (the scenario: the turn itself takes a moment)
        if scope.cancelled_caught:
            timed_out.append(n)

    async with anyio.create_task_group() as group:
        for n in range(12):  # the last wait ~0.5 s for a place, longer than the 0.3 s limit
            group.start_soon(task, n)
    assert most == 2
    assert order == list(range(12))
    assert timed_out == []
