"""A small fleet of real engines (the scripted model) through the Python API: results as they
finish, private workspaces, check commands, limits, diffs and resuming from the results file."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from soulwire import fleet
from tests.fleet.conftest import FleetLab, shell, write_file

pytestmark = pytest.mark.anyio


async def test_a_fleet_of_five_at_concurrency_two(lab: FleetLab) -> None:
    source = lab.workspace("repo", {"README.md": "hello\n", "src/app.py": "print(1)\n"})
    lab.task("same-a", write_file("notes.txt", "from a\n"), "text: wrote a", workspace=str(source))
    lab.task("same-b", write_file("notes.txt", "from b\n"), "text: wrote b", workspace=str(source))
    lab.task("check-ok", "text: nothing to do", workspace=str(source), check="test -f README.md && echo fine")
    lab.task(
        "check-fails",
        write_file("src/app.py", "print(2)\n"),
        "text: changed",
        workspace=str(source),
        check="echo broken >&2; exit 3",
    )
    lab.task("no-workspace", "text: hi")
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"

    seen: list[str] = []
    async with fleet.run_fleet(tasks, concurrency=2, out=out, backend=lab.backend()) as results:
        async for result in results:
            seen.append(result.id)
    assert sorted(seen) == sorted(t.id for t in tasks)

    by_id = fleet.read_results(out)
    assert {r.status for r in by_id.values()} == {"done"}, {r.id: r.reason for r in by_id.values()}
    a, b = by_id["same-a"], by_id["same-b"]
    # Same file name, separate workspaces: each kept its own write, the source is untouched.
    assert Path(a.work_dir or "", "notes.txt").read_text() == "from a\n"
    assert Path(b.work_dir or "", "notes.txt").read_text() == "from b\n"
    assert not (source / "notes.txt").exists()
    assert "+++ b/notes.txt" in a.diff and "+from a" in a.diff and "from b" not in a.diff
    assert a.final_message == "wrote a" and a.steps == 2 and a.session_id
    assert a.check is None and a.passed is None

    ok = by_id["check-ok"]
    assert ok.check is not None and ok.check.exit_code == 0 and "fine" in ok.check.output_tail
    assert ok.passed is True and ok.diff == ""

    bad = by_id["check-fails"]
    assert bad.status == "done" and bad.passed is False
    assert bad.check is not None and bad.check.exit_code == 3 and "broken" in bad.check.output_tail
    assert "-print(1)" in bad.diff and "+print(2)" in bad.diff
    assert (source / "src" / "app.py").read_text() == "print(1)\n"

    # The session of a task can be opened later: it is in the share dir under its work dir.
    sessions = list((lab.share / "sessions").glob(f"*/{a.session_id}"))
    assert len(sessions) == 1 and (sessions[0] / "context.jsonl").is_file()
    assert len(out.read_text().splitlines()) == 5


async def test_a_hanging_task_hits_its_time_limit(lab: FleetLab) -> None:
    lab.task("hangs", shell("sleep 120"), "text: never", time_limit=2)
    lab.task("quick", "text: quick")
    tasks = fleet.load_tasks(lab.write_tasks())
    results = {r.id: r for r in await fleet.run_all(tasks, concurrency=2, backend=lab.backend())}
    hung = results["hangs"]
    assert hung.status == "timed_out" and "time limit 2s" in (hung.reason or "")
    assert hung.session_id is not None
    assert results["quick"].status == "done"


async def test_the_step_limit_and_an_engine_error_are_failures(lab: FleetLab) -> None:
    lab.task("loops", shell("true", "a"), shell("true", "b"), shell("true", "c"), "text: end", max_steps=2)
    lab.task("bad-script", "error: 400 no such thing")
    lab.task("rejected", shell("touch made.txt"), "text: was refused", approval="reject")
    tasks = fleet.load_tasks(lab.write_tasks())
    run_dir = lab.root / "run"  # kept after the run, to look into the workspaces
    results = {
        r.id: r for r in await fleet.run_all(tasks, concurrency=3, backend=lab.backend(), run_dir=run_dir)
    }
    assert results["loops"].status == "failed" and results["loops"].reason == "max_steps_reached"
    assert results["bad-script"].status == "failed"
    assert (results["bad-script"].reason or "").startswith("ChatProviderError: ")
    refused = results["rejected"]
    assert refused.work_dir is not None and Path(refused.work_dir).is_dir()
    assert not Path(refused.work_dir, "made.txt").exists()
    assert refused.diff == ""


async def test_a_second_run_skips_finished_tasks(lab: FleetLab) -> None:
    lab.task("one", "text: 1")
    lab.task("two", "text: 2")
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "results.jsonl"
    # An earlier run finished "one", was interrupted while "two" ran, and was killed while
    # writing a line.
    first = (await fleet.run_all(tasks[:1], out=out, backend=lab.backend()))[0]
    with out.open("a") as handle:
        handle.write(json.dumps({"id": "two", "status": "cancelled"}) + "\n")
        handle.write('{"id": "two", "stat')
    again = fleet.Fleet(tasks, out=out, backend=lab.backend())
    assert [r.id for r in again.skipped] == ["one"] and [t.id for t in again.pending] == ["two"]
    async with again.results() as results:
        ran = [r.id async for r in results]
    assert ran == ["two"]
    final = fleet.read_results(out)
    assert final["one"].session_id == first.session_id and final["two"].status == "done"


def git(cwd: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_git_worktree_workspace(lab: FleetLab) -> None:
    repo = lab.workspace("repo", {"app.py": "print(1)\n"})
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    plain = lab.workspace("plain", {"a.txt": "a\n"})
    lab.task(
        "in-worktree",
        write_file("app.py", "print(2)\n"),
        write_file("new.txt", "new\n", "w2"),
        "text: ok",
        workspace=str(repo),
        workspace_mode="worktree",
        check="git status --porcelain",
    )
    lab.task("not-a-repo", "text: never", workspace=str(plain), workspace_mode="worktree")
    tasks = fleet.load_tasks(lab.write_tasks())
    run_dir = lab.root / "run"
    results = {
        r.id: r for r in await fleet.run_all(tasks, concurrency=2, backend=lab.backend(), run_dir=run_dir)
    }
    done = results["in-worktree"]
    assert done.status == "done", done.reason
    assert "-print(1)" in done.diff and "+print(2)" in done.diff and "+++ b/new.txt" in done.diff
    assert done.check is not None and "app.py" in done.check.output_tail  # a real git worktree
    assert (repo / "app.py").read_text() == "print(1)\n" and git(repo, "status", "--porcelain") == ""
    assert done.work_dir is not None and done.work_dir in git(repo, "worktree", "list")
    refused = results["not-a-repo"]
    assert refused.status == "failed" and (refused.reason or "").startswith("workspace: git worktree failed")
    assert refused.session_id is None


async def test_a_run_without_a_results_file_leaves_no_temporary_directory(
    lab: FleetLab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `out` or `run_dir` the workspaces go to a temporary directory: removed at the
    end (git worktrees in it unregistered from their repository); the results keep the diffs."""
    temp = lab.root / "tmp"
    temp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    repo = lab.workspace("repo", {"app.py": "print(1)\n"})
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    lab.task("copied", write_file("a.txt", "a\n"), "text: ok", workspace=str(repo))
    lab.task(
        "worktree", write_file("b.txt", "b\n"), "text: ok", workspace=str(repo), workspace_mode="worktree"
    )
    tasks = fleet.load_tasks(lab.write_tasks())
    results = {r.id: r for r in await fleet.run_all(tasks, concurrency=2, backend=lab.backend())}
    assert {r.status for r in results.values()} == {"done"}, {r.id: r.reason for r in results.values()}
    assert "+a" in results["copied"].diff and "+b" in results["worktree"].diff
    work_dir = results["worktree"].work_dir
    assert work_dir is not None and Path(work_dir).is_relative_to(temp)  # it was made there
    assert list(temp.iterdir()) == []
    assert work_dir not in git(repo, "worktree", "list")


def test_claiming_the_run_reads_again_what_a_run_that_ended_meanwhile_finished(tmp_path: Path) -> None:
    """`Fleet.claim()` re-reads the results file when it changed after the plan was made (a
    run that held it ended in between), and keeps the plan when it did not."""
    from soulwire.fleet.results import ResultsWriter

    out = tmp_path / "out.jsonl"
    writer = ResultsWriter(out)
    writer.write(fleet.TaskResult(id="a", status="done"))
    tasks = [fleet.Task(id=name, prompt="p") for name in ("a", "b", "c")]
    run = fleet.Fleet(tasks, out=out)
    assert [t.id for t in run.pending] == ["b", "c"]
    writer.write(fleet.TaskResult(id="b", status="failed", reason="x"))
    writer.close()
    run.claim()
    assert [t.id for t in run.pending] == ["c"] and [r.id for r in run.skipped] == ["a", "b"]
    again = fleet.Fleet(tasks, out=tmp_path / "other.jsonl", run_dir=tmp_path / "other.run")
    again.claim()
    assert [t.id for t in again.pending] == ["a", "b", "c"]
