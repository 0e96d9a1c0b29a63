"""The Ray backend on a real local Ray cluster (`ray start --head` on 127.0.0.1, started here):
tasks as calls on worker actors with warm engines, a killed worker's task retried with one
result line, workspaces shipped through the object store. Marked `ray` (a separate CI step)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from soulwire import fleet
from tests.fleet.conftest import FleetLab, shell, write_file

pytestmark = [pytest.mark.ray, pytest.mark.anyio]


@pytest.fixture(scope="module", autouse=True)
def ray_extra() -> None:
    """Fails, not skips, without the Ray extra: `.ci/run` installs it, and a skip would turn a
    machine that lost it into a green run of tests that never ran (`-m "not ray"` leaves them out)."""
    if importlib.util.find_spec("ray") is None:
        pytest.fail(
            "the Ray extra is not installed: pip install -e '.[ray]' (.ci/run installs it)", pytrace=False
        )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """A local Ray cluster: `ray start --head --block` in its own process group, killed after."""
    temp = Path(tempfile.mkdtemp(prefix="swray-"))  # short: Ray's socket paths have a limit
    port = _free_port()
    ray_cli = Path(sys.executable).with_name("ray")
    argv = [
        str(ray_cli), "start", "--head", "--block", "--port", str(port),
        "--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--disable-usage-stats",
        "--include-dashboard", "false", "--temp-dir", str(temp),
    ]  # fmt: skip
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    head = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if head.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the local Ray cluster did not start")
                time.sleep(0.5)
        yield address
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            if _group_ends(head, within=15):  # the head and the group's other processes
                break
        shutil.rmtree(temp, ignore_errors=True)


def _group_ends(head: subprocess.Popen[bytes], within: float) -> bool:
    """True once no process of `head`'s group is left (the head reaped), within `within` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        head.poll()
        try:
            os.killpg(head.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def backend(lab: FleetLab, address: str, **options: object) -> fleet.RayBackend:
    settings = lab.settings(executable=None)
    return fleet.RayBackend(settings, address=address, workers=2, worker_cpus=0.5, **options)  # type: ignore[arg-type]


async def test_tasks_run_on_ray_workers_each_in_its_own_workspace(lab: FleetLab, ray_address: str) -> None:
    source = lab.workspace("repo", {"README.md": "hello\n"})
    for name in ("a", "b", "c"):
        lab.task(
            name,
            write_file("same.txt", f"{name}\n"),
            "text: ok",
            workspace=str(source),
            check="test -f same.txt",
        )
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"
    results = await fleet.run_all(tasks, concurrency=3, out=out, backend=backend(lab, ray_address))

    assert {r.id: r.status for r in results} == {"a": "done", "b": "done", "c": "done"}, [
        r.reason for r in results
    ]
    for result in results:
        assert result.passed is True and result.node and result.attempts == 1
        assert Path(result.work_dir or "", "same.txt").read_text() == f"{result.id}\n"
    assert len(out.read_text().splitlines()) == 3


async def test_a_killed_worker_its_task_is_retried_with_one_result(lab: FleetLab, ray_address: str) -> None:
    marker = lab.root / "running"
    lab.task("victim", shell(f"touch {marker}; sleep 30"), "text: never", time_limit=5)
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"
    ray_backend = backend(lab, ray_address)

    async def kill_a_worker_when_the_command_runs() -> None:
        with anyio.fail_after(120):
            while not marker.exists():
                await anyio.sleep(0.1)
        marker.unlink()
        for pid in await ray_backend.worker_pids():
            os.kill(pid, signal.SIGKILL)  # both: whichever ran it

    async with anyio.create_task_group() as group:
        group.start_soon(kill_a_worker_when_the_command_runs)
        (result,) = await fleet.run_all(tasks, out=out, backend=ray_backend)
    assert len(out.read_text().splitlines()) == 1
    # Ray restarted the worker and ran the call again; this time it hit its time limit.
    assert result.attempts == 2 and result.status == "timed_out", result.reason


async def test_shipped_workspaces(lab: FleetLab, ray_address: str) -> None:
    source = lab.workspace("shipped", {"data/input.txt": "42\n"})
    lab.task("reads", "text: ok", workspace=str(source), check="grep -q 42 data/input.txt")
    tasks = fleet.load_tasks(lab.write_tasks())
    (result,) = await fleet.run_all(tasks, backend=backend(lab, ray_address, ship_workspaces=True))
    assert result.status == "done" and result.passed is True, (result.reason, result.check)
    assert "shipped" not in (result.work_dir or "")


def test_the_cli_on_a_ray_cluster(lab: FleetLab, ray_address: str) -> None:
    lab.task("one", write_file("a.txt", "1\n"), "text: one", check="test -f a.txt")
    lab.task("two", "text: two")
    lab.write_tasks()
    command = [
        sys.executable, "-m", "soulwire", "fleet", "run", "tasks.jsonl", "-j", "2", "--json",
        "--backend", "ray", "--address", ray_address, "--ray-workers", "1",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=lab.root, env=lab.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = fleet.read_results(lab.root / "tasks.results.jsonl")
    assert {k: (r.status, r.passed) for k, r in results.items()} == {
        "one": ("done", True),
        "two": ("done", None),
    }
    assert all(r.node for r in results.values())
    # The workers' engines kept the sessions in the command's share dir (not the node's
    # default), where `soulwire --session` run here finds them.
    stored = {p.name for p in (lab.share / "sessions").glob("*/*")}
    assert {r.session_id for r in results.values()} <= stored


async def test_by_default_one_worker_per_node_with_an_engine_per_cpu(lab: FleetLab, ray_address: str) -> None:
    for name in ("a", "b", "c", "d"):
        lab.task(name, "text: ok", shared="same")
    tasks = fleet.load_tasks(lab.write_tasks())
    settings = lab.settings(executable=None)
    ray_backend = fleet.RayBackend(settings, address=ray_address)  # no workers: the default layout
    results = await fleet.run_all(tasks, concurrency=4, backend=ray_backend)
    assert {r.status for r in results} == {"done"}, [r.reason for r in results]
    assert ray_backend.capacity == [2]  # the test cluster: one node of 2 CPUs, 2 engines
    assert len({r.node for r in results}) == 1


def test_the_cli_on_a_local_cluster_of_its_own(lab: FleetLab) -> None:
    """Without `--address` the command starts a cluster in its own process, with its node on
    127.0.0.1 and Ray's token authentication on (its ports are open on every interface: the
    token is what keeps other machines out)."""
    lab.task("one", write_file("a.txt", "1\n"), "text: one", check="test -f a.txt")
    lab.write_tasks()
    env = {k: v for k, v in lab.env.items() if not k.startswith("RAY_")}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    command = [sys.executable, "-m", "soulwire", "fleet", "run", "tasks.jsonl", "-j", "1", "--backend", "ray"]
    done = subprocess.run(command, cwd=lab.root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = fleet.read_results(lab.root / "tasks.results.jsonl")
    assert (results["one"].status, results["one"].passed) == ("done", True)
    assert (lab.root / "home" / ".ray" / "auth_token").is_file()  # Ray made the token it requires
    assert "Token authentication is enabled" in done.stderr
    # Ray's warning about the thread it was started from is not shown: the command handles
    # its signals itself.
    assert "SIGTERM handler is not set" not in done.stderr


def test_a_cluster_address_nothing_listens_on_is_one_line_at_once(lab: FleetLab) -> None:
    """Ray retries an unreachable address for ever, a warning every few seconds; the command
    says so in one line and exits instead, having started nothing."""
    lab.task("one", "text: one")
    lab.write_tasks()
    address = f"127.0.0.1:{_free_port()}"  # closed again: nothing listens there
    command = [sys.executable, "-m", "soulwire", "fleet", "run", "tasks.jsonl", "--backend", "ray"]
    done = subprocess.run(
        [*command, "--address", address],
        cwd=lab.root,
        env=lab.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert f"soulwire fleet: cannot reach the Ray cluster at {address}: Connection refused" in done.stderr
    assert "Traceback" not in done.stderr and " done, " not in done.stderr  # no empty summary
    assert not (lab.root / "tasks.results.jsonl").exists() or not fleet.read_results(
        lab.root / "tasks.results.jsonl"
    )


def test_ctrl_c_while_ray_is_still_connecting_exits(lab: FleetLab) -> None:
    """An address that accepts connections but never answers as Ray (here a socket that
    only listens) keeps `ray.init` retrying inside Ray's native code; Ctrl-C still ends the
    command with 130 (it used to wait for that call for ever, at the interpreter's exit)."""
    lab.task("one", "text: one")
    lab.write_tasks()
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        command = [sys.executable, "-m", "soulwire", "fleet", "run", "tasks.jsonl", "--backend", "ray"]
        run = subprocess.Popen(
            [*command, "--address", address, "--no-progress"],
            cwd=lab.root,
            env=lab.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert run.stderr is not None
            # Past the probe, inside ray.init: Ray names the address it is connecting to.
            for line in run.stderr:
                if "Connecting to existing Ray cluster" in line:
                    break
            else:
                pytest.fail("the command ended before connecting")
            # and inside its retries: Ray's client has connected to the silent port
            silent.settimeout(60)
            connected, _ = silent.accept()
            connected.close()
            run.send_signal(signal.SIGINT)
            assert run.wait(timeout=30) == 130
        finally:
            run.kill()
            run.wait()


async def test_the_run_total_holds_on_ray(lab: FleetLab, ray_address: str) -> None:
    """The task file's run total with tasks on Ray workers, one at a time: the first stops at
    the run's remainder, the second crosses the total, the third does not start."""
    from tests.fleet.test_budget import shell_step

    for name in ("a", "b", "c"):
        lab.task(name, shell_step(f"{name}1", 600), "text: never")
    lab.lines.insert(0, {"fleet": {"budget": {"tokens": 1000}}})
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"
    results = await fleet.run_all(
        tasks, concurrency=1, out=out, backend=backend(lab, ray_address), run_budget=tasks.run.budget
    )
    assert [r.status for r in results] == ["cancelled"] * 3, [r.reason for r in results]
    assert sorted(str(r.reason).rsplit("(", 1)[1] for r in results) == [
        "not started)", "stopped at its remainder)", "stopped)"
    ]  # fmt: skip
    assert sum(r.usage.input_other for r in results) == 1200
    assert all(r.node for r in results if r.usage.input_other)


def test_a_task_starts_from_a_checkpoint_of_an_earlier_run_on_ray(lab: FleetLab, ray_address: str) -> None:
    """`from_checkpoint` on Ray workers: the earlier run (also on Ray) names each task's last
    checkpoint; a later run starts one task from its middle (before the Shell step) and one
    from its end, each in a fresh workspace of its own, the earlier one untouched."""
    from tests.fleet.test_checkpoints import add_edit_then_shell_task, fleet_cli_sessions

    add_edit_then_shell_task(lab)
    on_ray = ["--backend", "ray", "--address", ray_address, "--ray-workers", "1", "--no-progress"]

    def run(name: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "soulwire", "fleet", "run", name, *on_ray]
        return subprocess.run(command, cwd=lab.root, env=lab.env, capture_output=True, text=True, timeout=300)

    first = run("tasks.jsonl")
    assert first.returncode == 0, first.stderr
    earlier = fleet.read_results(lab.root / "tasks.results.jsonl")["t"]
    assert earlier.node and earlier.checkpoint is not None and earlier.session_id is not None
    listed = fleet_cli_sessions(
        lab, "checkpoints", earlier.session_id, "--json", "--work-dir", earlier.work_dir or ""
    )
    before_shell = [c["id"] for c in json.loads(listed) if c["kind"] == "step"][-1]

    lab.lines.clear()
    lab.task("mid", "text: again from the middle", from_checkpoint=f"tasks.results.jsonl/t@{before_shell}")
    lab.task("end", "text: on from the end", from_checkpoint="tasks.results.run/t")
    lab.write_tasks("again.jsonl")
    second = run("again.jsonl")
    assert second.returncode == 0, second.stderr
    again = fleet.read_results(lab.root / "again.results.jsonl")
    mid, end = again["mid"], again["end"]
    assert (mid.status, end.status) == ("done", "done"), (mid.reason, end.reason)
    assert mid.node and end.node  # run by the Ray workers
    assert end.from_checkpoint == f"{lab.root}/tasks.results.jsonl/t@{earlier.checkpoint}"
    assert mid.final_message == "again from the middle"
    mid_dir, end_dir = Path(mid.work_dir or ""), Path(end.work_dir or "")
    assert (mid_dir / "a.txt").read_text() == "v1\n" and (mid_dir / "keep.txt").read_text() == "kept\n"
    assert (end_dir / "a.txt").read_text() == "v2\n" and not (end_dir / "keep.txt").exists()
    assert (Path(earlier.work_dir or "") / "a.txt").read_text() == "v2\n"  # the earlier run's


async def test_each_limit_at_each_scope_stops_its_task_on_ray_and_a_raised_one_continues_it(
    lab: FleetLab, ray_address: str
) -> None:
    """The local fleet's twelve tasks (tests/fleet/test_budget.py), each with one limit at one
    scope, on Ray workers: each is stopped by its limit after its first command; run again over
    the same results file with the limits raised, each continues its session on a worker where it
    stopped (the same session, both runs' spend in its line) and finishes."""
    from tests.fleet.test_budget import (
        check_each_continued,
        check_each_stopped,
        each_limit_at_each_scope,
        raise_each_limit,
    )

    each_limit_at_each_scope(lab)
    out = lab.root / "results.jsonl"
    tasks = fleet.load_tasks(lab.write_tasks())
    results = await fleet.run_all(tasks, concurrency=2, out=out, backend=backend(lab, ray_address))
    check_each_stopped({r.id: r for r in results})
    sessions = {r.id: r.session_id for r in results}

    raise_each_limit(lab)
    tasks = fleet.load_tasks(lab.root / "tasks.jsonl")
    again = await fleet.run_all(tasks, concurrency=2, out=out, backend=backend(lab, ray_address))
    assert len(again) == 12
    check_each_continued(fleet.read_results(out))
    assert all(r.node for r in again) and {r.id: r.session_id for r in again} == sessions


@pytest.mark.parametrize("kind", ["usd", "time_s"])
async def test_the_run_total_of_money_and_time_holds_on_ray(
    lab: FleetLab, ray_address: str, kind: str
) -> None:
    """The run totals besides tokens on Ray, as on the local backend."""
    from soulwire.wire.pricing import ModelPrice
    from tests.budget_cases import PRICES
    from tests.fleet.test_budget import check_run_total, run_total_tasks

    run_total_tasks(lab, kind)
    tasks = fleet.load_tasks(lab.write_tasks())
    settings = lab.settings(executable=None, prices={m: ModelPrice(**p) for m, p in PRICES.items()})
    ray_backend = fleet.RayBackend(settings, address=ray_address, workers=2, worker_cpus=0.5)
    results = await fleet.run_all(
        tasks, concurrency=1, out=lab.root / "results.jsonl", backend=ray_backend, run_budget=tasks.run.budget
    )
    check_run_total(results, kind, slow_start=True)
