"""`soulwire fleet run|report` as a person runs it: a real `soulwire` process driving real
engines; Ctrl-C mid-run leaves no process behind and the same command resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from soulwire.fleet import read_results
from tests.fleet.conftest import FleetLab, shell, soulwire_cli, write_file


def fleet_cli(lab: FleetLab, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*soulwire_cli(), "fleet", *args],
        cwd=lab.root,
        env=lab.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def processes_in(directory: Path) -> list[str]:
    """Live processes whose working directory is inside `directory` (Linux /proc)."""
    found: list[str] = []
    for entry in (p.name for p in Path("/proc").iterdir()):
        if not entry.isdigit():
            continue
        try:
            cwd = str(Path(f"/proc/{entry}/cwd").readlink())
            with Path(f"/proc/{entry}/stat").open() as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
            with Path(f"/proc/{entry}/cmdline").open("rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state != "Z" and cwd.startswith(str(directory)):
            found.append(f"{entry}: {cmdline}")
    return found


def test_run_then_report(lab: FleetLab) -> None:
    source = lab.workspace("repo", {"a.txt": "1\n"})
    lab.task(
        "edits", write_file("a.txt", "2\n"), "text: edited", workspace=str(source), check="grep -q 2 a.txt"
    )
    lab.task("fails-check", "text: did nothing", workspace=str(source), check="grep -q 2 a.txt")
    lab.task("hangs", shell("sleep 60"), time_limit=1.5)
    lab.write_tasks()

    run = fleet_cli(lab, "run", "tasks.jsonl", "--concurrency", "3", "--no-progress")
    assert run.returncode == 1, run.stderr  # a check failed, a task timed out
    assert "Traceback" not in run.stderr
    results = read_results(lab.root / "tasks.results.jsonl")
    assert results["edits"].passed is True and results["fails-check"].passed is False
    assert results["hangs"].status == "timed_out"
    assert "edits: done check passed" in run.stderr and "hangs: timed_out" in run.stderr
    assert Path(results["edits"].work_dir or "").is_relative_to(lab.root / "tasks.results.run")
    assert not processes_in(lab.root / "tasks.results.run")

    markdown = fleet_cli(lab, "report", "tasks.results.jsonl", "--markdown")
    assert markdown.returncode == 0
    assert "| checks passed | 1/2 (50%) |" in markdown.stdout
    assert "| check exit 1 | 1 | fails-check |" in markdown.stdout
    assert "| timed out | 1 | hangs |" in markdown.stdout
    summary = json.loads(fleet_cli(lab, "report", "tasks.results.jsonl", "--json").stdout)
    assert summary["tasks"] == "3" and summary["failures"] == {"check exit 1": 1, "timed out": 1}
    table = fleet_cli(lab, "report", "tasks.results.jsonl")
    assert table.returncode == 0 and "fails-check" in table.stdout


def test_a_bad_task_file_is_one_line_and_exit_2(lab: FleetLab) -> None:
    (lab.root / "tasks.jsonl").write_text('{"id": "a", "prompt": "p"}\n{"id": "b"}\n')
    run = fleet_cli(lab, "run", "tasks.jsonl", "--engines-per-group", "3")
    assert run.returncode == 2
    assert run.stderr == "soulwire fleet: tasks.jsonl:2: prompt: Field required\n"
    # the first line's engines were spawned before the file was validated: none is left
    assert not processes_naming("--processes 3"), processes_naming("--processes 3")
    usage = fleet_cli(lab, "run", "tasks.jsonl", "--concurrency", "0")
    assert usage.returncode == 2 and "must be ≥ 1" in usage.stderr
    lab.task("fine", "text: ok")
    lab.write_tasks("ok.jsonl")
    (lab.root / "blocked").write_text("a file where a directory should be")
    unwritable = fleet_cli(lab, "run", "ok.jsonl", "--out", "blocked/results.jsonl", "--no-progress")
    assert unwritable.returncode == 1 and "Traceback" not in unwritable.stderr
    assert "soulwire fleet: [Errno 20] Not a directory" in unwritable.stderr
    missing = fleet_cli(lab, "report", "nothing.jsonl")
    assert missing.returncode == 2 and missing.stderr == "soulwire fleet: no results file: nothing.jsonl\n"


def test_report_on_a_file_that_is_not_results_says_so(lab: FleetLab) -> None:
    """The task file given by mistake, a file of anything else, and a results file with a
    line cut short: never an empty table that looks like a run with no tasks."""
    lab.task("a", "text: ok")
    lab.write_tasks()
    tasks = fleet_cli(lab, "report", "tasks.jsonl")
    assert tasks.returncode == 2 and tasks.stdout == ""
    expected = "soulwire fleet: tasks.jsonl holds no result lines (a task file? its results go to tasks.results.jsonl)\n"
    assert tasks.stderr == expected
    (lab.root / "notes.txt").write_text("hello\n\n")
    other = fleet_cli(lab, "report", "notes.txt")
    assert other.returncode == 2 and other.stderr == "soulwire fleet: notes.txt holds no result lines\n"
    assert fleet_cli(lab, "run", "tasks.jsonl", "--no-progress").returncode == 0
    results = lab.root / "tasks.results.jsonl"
    with results.open("a") as handle:
        handle.write('{"id": "b", "sta')  # a line cut short by a killed driver
    partial = fleet_cli(lab, "report", str(results), "--markdown")
    assert partial.returncode == 0 and "| tasks | 1 |" in partial.stdout
    assert partial.stderr == f"soulwire fleet: {results}: skipped lines that are not results: 2\n"


def test_prices_from_a_file_cost_each_task_whichever_way_it_names_its_configuration(lab: FleetLab) -> None:
    """`--prices` prices the provider's model name, found in the task's own `config`, in its
    `config_file`, or in the engines' default configuration (the share dir's config.json)."""
    usage = 'usage: {"input_other": 1000000, "output": 500000}'
    inline = lab.task("inline", f"text: hello\n{usage}", shared="same")
    config = inline["config"]
    (lab.root / "model.json").write_text(json.dumps(config))
    lab.task("from-file", f"text: hello\n{usage}", shared="same", config=None, config_file="model.json")
    lab.share.mkdir(parents=True, exist_ok=True)
    (lab.share / "config.json").write_text(json.dumps(config))
    lab.task("default", f"text: hello\n{usage}", shared="same", config=None)
    lab.lines = [{k: v for k, v in line.items() if v is not None} for line in lab.lines]
    lab.write_tasks()
    (lab.root / "prices.json").write_text('{"scripted_echo": {"input": 2, "output": 10}}')
    run = fleet_cli(lab, "run", "tasks.jsonl", "--prices", "prices.json", "--no-progress")
    assert run.returncode == 0, run.stderr
    results = read_results(lab.root / "tasks.results.jsonl")
    assert {k: r.cost_usd for k, r in results.items()} == {"inline": 7.0, "from-file": 7.0, "default": 7.0}
    report = fleet_cli(lab, "report", "tasks.results.jsonl", "--markdown")
    assert "| cost | $21.0000 ($7.0000 per task) |" in report.stdout
    (lab.root / "bad.json").write_text('{"scripted_echo": {"input": 2}}')
    bad = fleet_cli(lab, "run", "tasks.jsonl", "--prices", "bad.json")
    assert bad.returncode == 2 and bad.stderr.startswith(
        'soulwire fleet: bad.json: scripted_echo: expected {"input"'
    )


def test_an_empty_task_file_runs_nothing_and_makes_no_files(lab: FleetLab) -> None:
    (lab.root / "tasks.jsonl").write_text("\n")
    run = fleet_cli(lab, "run", "tasks.jsonl", "--json")
    assert run.returncode == 0
    assert json.loads(run.stdout) == {
        "event": "fleet_finished",
        "interrupted": False,
        **dict.fromkeys(("done", "failed", "timed_out", "running", "staged", "pending", "cancelled"), 0),
        "elapsed_s": 0.0,
    }
    assert run.stderr == "soulwire fleet: tasks.jsonl has no tasks: nothing to run\n"
    assert sorted(p.name for p in lab.root.iterdir() if p.name.startswith("tasks")) == ["tasks.jsonl"]


def test_ctrl_c_stops_cleanly_and_the_same_command_resumes(lab: FleetLab) -> None:
    lab.task("quick-1", "text: one")
    lab.task("quick-2", "text: two")
    lab.task("slow-1", shell("touch started && sleep 60"), "text: slow one")
    lab.task("slow-2", shell("touch started && sleep 60"), "text: slow two")
    lab.write_tasks()
    run_dir = lab.root / "out.run"
    command = [*soulwire_cli(), "fleet", "run", "tasks.jsonl", "-j", "2", "--out", "out.jsonl", "--json"]
    driver = subprocess.Popen(
        command, cwd=lab.root, env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    markers = [run_dir / task / "workspace" / "started" for task in ("slow-1", "slow-2")]
    deadline = time.monotonic() + 90
    while not all(marker.exists() for marker in markers):
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() < deadline, "the slow tasks never started"
        time.sleep(0.1)
    assert processes_in(run_dir)  # the engines and their `sleep`s are running now

    driver.send_signal(signal.SIGINT)
    stdout, stderr = driver.communicate(timeout=60)
    assert driver.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert not processes_in(run_dir), "processes left behind after Ctrl-C"
    events = [json.loads(line) for line in stdout.splitlines()]
    assert events[-1]["event"] == "fleet_finished" and events[-1]["interrupted"] is True
    assert events[-1]["cancelled"] == 2
    after_interrupt = read_results(lab.root / "out.jsonl")
    assert {k: r.status for k, r in after_interrupt.items()} == {
        "quick-1": "done",
        "quick-2": "done",
        "slow-1": "cancelled",
        "slow-2": "cancelled",
    }
    cancelled = after_interrupt["slow-1"]  # the line still names the interrupted session
    assert cancelled.session_id and cancelled.work_dir == str(run_dir / "slow-1" / "workspace")
    # Steps as far as the driver had read the engine's events when it stopped (a warm engine's
    # WebSocket may still hold the first StepBegin on a loaded machine).
    assert cancelled.steps <= 1 and cancelled.reason == "the fleet was interrupted"

    for task in ("slow-1", "slow-2"):  # this time the model answers at once
        (lab.root / "scripts" / f"{task}.json").write_text(json.dumps([f"text: {task} finished"]))
    again = subprocess.run(command, cwd=lab.root, env=lab.env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    events_again = [json.loads(line) for line in again.stdout.splitlines()]
    ran = [e["id"] for e in events_again if e["event"] == "task_finished"]
    assert sorted(ran) == ["slow-1", "slow-2"]  # the finished ones were skipped
    final = read_results(lab.root / "out.jsonl")
    assert {r.status for r in final.values()} == {"done"}
    assert final["slow-1"].final_message == "slow-1 finished"
    # Each interrupted task continued its session in its workspace as it was left.
    assert (run_dir / "slow-1" / "workspace" / "started").exists()
    assert final["slow-1"].session_id == cancelled.session_id and final["slow-1"].resumed
    assert final["quick-1"].session_id == after_interrupt["quick-1"].session_id


def test_a_live_status_line_in_a_terminal(lab: FleetLab) -> None:
    lab.task("waits", shell("sleep 1"), "text: ok")
    lab.write_tasks()
    leader, follower = os.openpty()
    env = {**lab.env, "TERM": "xterm", "COLUMNS": "200"}
    env.pop("NO_COLOR", None)
    with subprocess.Popen(
        [*soulwire_cli(), "fleet", "run", "tasks.jsonl"],
        cwd=lab.root,
        env=env,
        stderr=follower,
        stdout=subprocess.PIPE,
    ) as driver:
        os.close(follower)
        screen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the driver is gone
                break
            if not chunk:
                break
            screen += chunk
        assert driver.wait(timeout=60) == 0
    os.close(leader)
    text = screen.decode(errors="replace")
    assert "tasks/s" in text and "waiting" in text  # the live line was drawn
    assert "waits: done" in text and "fleet: 1 done, 0 failed" in text


def test_a_killed_driver_leaves_no_process_and_the_same_command_resumes(lab: FleetLab) -> None:
    lab.task("quick", "text: one")
    lab.task("slow", shell("touch started && sleep 60"), "text: slow")
    lab.write_tasks()
    run_dir = lab.root / "out.run"
    command = [*soulwire_cli(), "fleet", "run", "tasks.jsonl", "-j", "2", "--out", "out.jsonl", "--json"]
    driver = subprocess.Popen(
        command, cwd=lab.root, env=lab.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    marker = run_dir / "slow" / "workspace" / "started"
    deadline = time.monotonic() + 90
    while not (marker.exists() and "quick" in read_results(lab.root / "out.jsonl")):
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() < deadline, "the tasks never got going"
        time.sleep(0.1)

    driver.kill()  # SIGKILL: no chance to clean up; the engines notice their stdin closing
    driver.wait(timeout=30)
    deadline = time.monotonic() + 30
    while processes_in(run_dir):
        assert time.monotonic() < deadline, f"left behind: {processes_in(run_dir)}"
        time.sleep(0.2)
    assert set(read_results(lab.root / "out.jsonl")) == {"quick"}  # no line for the killed task

    (lab.root / "scripts" / "slow.json").write_text(json.dumps(["text: slow finished"]))
    again = subprocess.run(command, cwd=lab.root, env=lab.env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    ran = [json.loads(line)["id"] for line in again.stdout.splitlines() if '"task_finished"' in line]
    assert ran == ["slow"]
    final = read_results(lab.root / "out.jsonl")
    assert {k: r.status for k, r in final.items()} == {"quick": "done", "slow": "done"}
    assert final["slow"].final_message == "slow finished"


@pytest.mark.parametrize("engines", ["warm", "fresh"])
def test_an_interrupted_task_continues_its_session_and_workspace(lab: FleetLab, engines: str) -> None:
    """Ctrl-C mid-turn, then the same command: the interrupted task continues the same
    session in the workspace as it was left (not a fresh copy), and says so."""
    lab.task("long", write_file("half.txt", "first half\n"), shell("touch started && sleep 60"), "text: x")
    lab.write_tasks()
    command = [*soulwire_cli(), "fleet", "run", "tasks.jsonl", "--out", "out.jsonl", "--engines", engines]
    driver = subprocess.Popen(
        [*command, "--json"], cwd=lab.root, env=lab.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    workspace = lab.root / "out.run" / "long" / "workspace"
    deadline = time.monotonic() + 90
    while not (workspace / "started").exists():
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() < deadline, "the task never got going"
        time.sleep(0.1)
    driver.send_signal(signal.SIGINT)
    assert driver.wait(timeout=60) == 130
    first = read_results(lab.root / "out.jsonl")["long"]
    assert first.status == "cancelled" and first.session_id

    (lab.root / "scripts" / "long.json").write_text(
        json.dumps([write_file("rest.txt", "second\n"), "text: all done"])
    )
    again = subprocess.run(command, cwd=lab.root, env=lab.env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    final = read_results(lab.root / "out.jsonl")["long"]
    assert final.status == "done" and final.resumed is True, (final.status, final.reason)
    assert final.session_id == first.session_id  # the same session, continued
    assert final.final_message == "all done"
    assert (workspace / "half.txt").read_text() == "first half\n"  # not a fresh copy
    assert "+first half" in final.diff and "+second" in final.diff
    assert not (lab.root / "out.run" / "long" / "session").exists()  # ended: nothing to resume


def test_json_progress_lines_name_the_slowest_running_task(lab: FleetLab) -> None:
    lab.task("quick", 'text: one\nusage: {"input_other": 10, "output": 5}')
    lab.task("slow", shell("sleep 2"), "text: slow")
    lab.write_tasks()
    done = fleet_cli(lab, "run", "tasks.jsonl", "-j", "2", "--json", "--progress-interval", "0.2")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    progress = [e for e in events if e["event"] == "progress"]
    assert progress, done.stdout
    late = [e for e in progress if e["done"] == 1 and e["running"] == 1]
    assert late and late[-1]["slowest"][0]["id"] == "slow" and late[-1]["tokens"] >= 15
    assert {"tasks_per_s", "cost_usd", "pending", "staged", "elapsed_s"} <= set(late[-1])
    finished = {e["id"]: e for e in events if e["event"] == "task_finished"}
    assert finished["quick"]["tokens"] == 15


def test_json_progress_counts_staged_tasks_apart_from_running_and_waiting(lab: FleetLab) -> None:
    for name in ("one", "two", "three"):
        lab.task(name, shell("sleep 1.5"), "text: done", shared="same")
    lab.write_tasks()
    done = fleet_cli(
        lab, "run", "tasks.jsonl", "-j", "1", "--stage-ahead", "1", "--json", "--progress-interval", "0.2"
    )
    assert done.returncode == 0, done.stderr
    progress = [e for e in map(json.loads, done.stdout.splitlines()) if e["event"] == "progress"]
    # While the first task runs, the second has its session open and the third waits.
    assert any((e["done"], e["running"], e["staged"], e["pending"]) == (0, 1, 1, 1) for e in progress), (
        progress
    )
    assert all(e["done"] + e["running"] + e["staged"] + e["pending"] == 3 for e in progress), progress


def processes_naming(text: str) -> list[str]:
    """Live processes whose command line contains `text`."""
    found: list[str] = []
    for entry in (p.name for p in Path("/proc").iterdir()):
        try:
            with Path(f"/proc/{entry}/cmdline").open("rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            with Path(f"/proc/{entry}/stat").open() as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and text in cmdline and entry != str(os.getpid()):
            found.append(f"{entry}: {cmdline}")
    return found


def test_engines_started_early_for_settings_no_pending_task_has_are_stopped(lab: FleetLab) -> None:
    """The driver starts the first task's engines before it reads the results file; when that
    task is finished already and the next one needs other settings, those engines go."""
    lab.task("first", "text: one", max_steps=5)
    lab.write_tasks()
    assert fleet_cli(lab, "run", "tasks.jsonl", "--out", "out.jsonl").returncode == 0
    lab.task("second", "text: two", max_steps=7)  # other engine settings: another group
    lab.write_tasks()
    again = fleet_cli(lab, "run", "tasks.jsonl", "--out", "out.jsonl", "--json")
    assert again.returncode == 0, again.stderr
    ran = [json.loads(line)["id"] for line in again.stdout.splitlines() if '"task_finished"' in line]
    assert ran == ["second"]
    assert not processes_naming("--max-steps-per-turn 5"), processes_naming("--max-steps-per-turn 5")
    assert not processes_naming("--max-steps-per-turn 7")


def test_the_same_command_twice_at_once_runs_once(lab: FleetLab) -> None:
    """A second run of the same results file or run dir while the first runs is one line and
    exit 1: else both would run every task in the same workspaces and write it twice."""
    lab.task("slow", shell("touch started && while [ ! -e go ]; do sleep 0.05; done"), "text: went")
    lab.task("quick", "text: one")
    lab.write_tasks()
    run_dir = lab.root / "out.run"
    command = ["run", "tasks.jsonl", "-j", "2", "--out", "out.jsonl", "--no-progress"]
    first = subprocess.Popen(
        [*soulwire_cli(), "fleet", *command], cwd=lab.root, env=lab.env, stderr=subprocess.PIPE, text=True
    )
    marker = run_dir / "slow" / "workspace" / "started"
    deadline = time.monotonic() + 90
    while not marker.exists():
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the slow task never started"
        time.sleep(0.05)

    same = fleet_cli(lab, *command)
    assert same.returncode == 1
    assert same.stderr == (
        f"soulwire fleet: {run_dir} is in use by another fleet run (pid {first.pid});"
        " wait for it to end, or stop it\n"
    )
    other_dir = fleet_cli(lab, *command, "--run-dir", "elsewhere.run")  # the same results file
    assert other_dir.returncode == 1
    assert other_dir.stderr == (
        "soulwire fleet: out.jsonl is being written by another fleet run; wait for it to end, or stop it\n"
    )

    (marker.parent / "go").touch()  # the first run's slow task may end now
    _, stderr = first.communicate(timeout=90)
    assert first.returncode == 0, stderr
    lines = [json.loads(line)["id"] for line in (lab.root / "out.jsonl").read_text().splitlines()]
    assert sorted(lines) == ["quick", "slow"]  # each task once
    assert not (lab.root / "elsewhere.run").exists()  # the refused run set nothing up
    again = fleet_cli(lab, *command)  # the lock went with the first run
    assert again.returncode == 0, again.stderr
    assert "0 to run" in again.stderr


def test_a_workspace_holding_the_task_file_is_copied_without_the_fleets_own_files(lab: FleetLab) -> None:
    """`"workspace": "."` beside the task file (the natural set-up in a repository): the run dir
    and the results file are in the workspace, but no copy holds them (else each copy held the
    workspaces before it, down to "file name too long") and no diff shows them."""
    repo = lab.workspace("repo", {"app.py": "print('hi')\n"})
    for name in ("a", "b", "c"):
        lab.task(name, write_file(f"note-{name}.txt", name), "text: noted", workspace=".")
    lab.write_tasks("sources/repo/tasks.jsonl")
    run = fleet_cli(lab, "run", "sources/repo/tasks.jsonl", "-j", "1", "--no-progress")
    assert run.returncode == 0, run.stderr
    results = read_results(repo / "tasks.results.jsonl")
    assert {r.status for r in results.values()} == {"done"}, [r.reason for r in results.values()]
    for name, result in results.items():
        workspace = Path(result.work_dir or "")
        assert sorted(p.name for p in workspace.iterdir()) == ["app.py", f"note-{name}.txt", "tasks.jsonl"]
        assert "+++ b/note-" + name in result.diff
        assert "tasks.results" not in result.diff, result.diff
