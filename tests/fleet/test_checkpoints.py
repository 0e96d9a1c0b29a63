"""Checkpoints in fleets, with real `soulwire fleet run` processes: a task with checkpoints on
names its last checkpoint in its result (and the report lists it); a later run starts a task
from any checkpoint of the earlier run (`from_checkpoint: RUN/TASK@CKPT`) with the files that
checkpoint recorded, on warm engines and on fresh ones."""

from __future__ import annotations

import json

import pytest

from soulwire.fleet import read_results
from tests.fleet.conftest import FleetLab, shell, write_file
from tests.fleet.test_cli import fleet_cli


def add_edit_then_shell_task(lab: FleetLab) -> None:
    """Task `t` with checkpoints: WriteFile a.txt (v1), then Shell rewrites it (v2) and removes
    the workspace's keep.txt — a checkpoint before the Shell step and one at its end."""
    lab.task(
        "t",
        write_file("a.txt", "v1\n"),
        shell("echo v2 > a.txt && rm keep.txt"),
        "text: done",
        workspace=str(lab.workspace("src", {"keep.txt": "kept\n"})),
        checkpoints=True,
    )
    lab.write_tasks()


@pytest.mark.parametrize("engines", ["warm", "fresh"])
def test_a_result_names_its_checkpoint_and_a_later_run_starts_from_any_of_them(
    lab: FleetLab, engines: str
) -> None:
    add_edit_then_shell_task(lab)
    first = fleet_cli(lab, "run", "tasks.jsonl", "--engines", engines, "--no-progress")
    assert first.returncode == 0, first.stderr
    earlier = read_results(lab.root / "tasks.results.jsonl")["t"]
    assert earlier.checkpoint is not None and earlier.session_id is not None
    listing = fleet_cli(lab, "report", "tasks.results.jsonl", "--json")
    assert json.loads(listing.stdout)["checkpoints"] == {"t": earlier.checkpoint}

    sessions = json.loads(
        fleet_cli_sessions(
            lab, "checkpoints", earlier.session_id, "--json", "--work-dir", earlier.work_dir or ""
        )
    )
    assert sessions[-1]["id"] == earlier.checkpoint and sessions[-1]["kind"] == "end"
    before_shell = [c["id"] for c in sessions if c["kind"] == "step"][-1]

    lab.lines.clear()
    lab.task("mid", "text: again from the middle", from_checkpoint=f"tasks.results.jsonl/t@{before_shell}")
    lab.task("end", "text: on from the end", from_checkpoint="tasks.results.run/t")
    lab.task("nowhere", "text: never", from_checkpoint="tasks.results.jsonl/nosuch")
    lab.write_tasks("again.jsonl")
    second = fleet_cli(lab, "run", "again.jsonl", "--engines", engines, "--no-progress")
    assert second.returncode == 1, second.stderr  # `nowhere` failed
    again = read_results(lab.root / "again.results.jsonl")
    mid, end = again["mid"], again["end"]
    assert mid.status == "done" and end.status == "done", (mid.reason, end.reason)
    assert mid.from_checkpoint == f"{lab.root}/tasks.results.jsonl/t@{before_shell}"
    assert end.from_checkpoint == f"{lab.root}/tasks.results.jsonl/t@{earlier.checkpoint}"
    assert (lab.root / "again.results.run/mid/workspace/a.txt").read_text() == "v1\n"
    assert (lab.root / "again.results.run/mid/workspace/keep.txt").read_text() == "kept\n"
    assert (lab.root / "again.results.run/end/workspace/a.txt").read_text() == "v2\n"
    assert not (lab.root / "again.results.run/end/workspace/keep.txt").exists()
    assert (lab.root / "tasks.results.run/t/workspace/a.txt").read_text() == "v2\n"  # the earlier run's
    assert mid.final_message == "again from the middle" and not mid.resumed
    assert again["nowhere"].status == "failed" and "has no task 'nosuch'" in (again["nowhere"].reason or "")


def fleet_cli_sessions(lab: FleetLab, *args: str) -> str:
    import subprocess

    from tests.fleet.conftest import soulwire_cli

    done = subprocess.run(
        [*soulwire_cli(), "sessions", *args],
        cwd=lab.root,
        env=lab.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.usefixtures("bwrap")
def test_a_task_runs_its_turn_in_an_overlay_committed_or_discarded(lab: FleetLab) -> None:
    for policy in ("commit", "discard"):
        lab.task(
            policy,
            shell("echo new > new.txt && rm keep.txt"),
            "text: done",
            workspace=str(lab.workspace(f"src-{policy}", {"keep.txt": "kept\n"})),
            sandbox="workspace-write",
            overlay=policy,
        )
    lab.task("asked", "text: never", overlay="ask")  # nobody would answer: refused
    lab.write_tasks()
    done = fleet_cli(lab, "run", "tasks.jsonl", "--no-progress")
    assert done.returncode == 2 and "tasks.jsonl:3: overlay" in done.stderr, done.stderr
    lab.lines.pop()
    lab.write_tasks()
    done = fleet_cli(lab, "run", "tasks.jsonl", "--no-progress")
    assert done.returncode == 0, done.stderr
    committed = lab.root / "tasks.results.run/commit/workspace"
    discarded = lab.root / "tasks.results.run/discard/workspace"
    assert (committed / "new.txt").read_text() == "new\n" and not (committed / "keep.txt").exists()
    assert not (discarded / "new.txt").exists() and (discarded / "keep.txt").read_text() == "kept\n"
