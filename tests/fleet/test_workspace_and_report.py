"""The workspace diff (copy against source) and the report's summary, on real files."""

from __future__ import annotations

from pathlib import Path

from soulwire.fleet import CheckOutcome, TaskResult
from soulwire.fleet.report import summarise, to_markdown
from soulwire.fleet.results import ResultsWriter, read_results
from soulwire.fleet.workspace import MAX_DIFF_CHARS, prepare_workspace, workspace_diff


def test_the_diff_of_a_copy_against_its_source(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "kept.txt").write_text("same\n")
    (source / "pkg" / "edit.py").write_text("a = 1\nb = 2\n")
    (source / "gone.txt").write_text("bye\n")
    (source / "image.bin").write_bytes(b"\0\1\2")
    (source / ".git").mkdir()
    (source / ".git" / "HEAD").write_text("ref\n")
    work = tmp_path / "run" / "t" / "workspace"
    work.mkdir(parents=True)
    (work / "stale").write_text("from an interrupted run\n")
    prepare_workspace(source, work)
    assert not (work / "stale").exists() and (work / ".git" / "HEAD").is_file()
    assert workspace_diff(source, work) == ("", False)

    (work / "pkg" / "edit.py").write_text("a = 1\nb = 3\n")
    (work / "gone.txt").unlink()
    (work / "new.txt").write_text("no newline")
    (work / "image.bin").write_bytes(b"\0\1\3")
    (work / ".git" / "HEAD").write_text("changed\n")  # git's own files are not the task's work
    (work / "kept.txt").write_text("same\n")  # written again, the same: no change
    diff, truncated = workspace_diff(source, work)
    assert not truncated
    assert "--- a/pkg/edit.py\n+++ b/pkg/edit.py\n" in diff and "-b = 2\n+b = 3\n" in diff
    assert "--- a/gone.txt\n+++ /dev/null\n" in diff and "-bye\n" in diff
    assert "+++ b/new.txt\n" in diff and "+no newline\n\\ No newline at end of file\n" in diff
    assert "Binary files a/image.bin and b/image.bin differ\n" in diff
    assert ".git" not in diff and "kept.txt" not in diff
    assert (source / "gone.txt").exists()


def test_a_huge_diff_is_cut(tmp_path: Path) -> None:
    work = tmp_path / "w"
    prepare_workspace(None, work)
    for i in range(30):
        (work / f"f{i}.txt").write_text("x" * 9000 + "\n")
    diff, truncated = workspace_diff(None, work)
    assert truncated and len(diff) <= MAX_DIFF_CHARS and diff.count("+++ b/") < 30


def result(task_id: str, status: str = "done", exit_code: int | None = None, **extra: object) -> TaskResult:
    check = None if exit_code is None else CheckOutcome(exit_code=exit_code, passed=exit_code == 0)
    passed = None if check is None else status == "done" and check.passed
    return TaskResult.model_validate(
        {"id": task_id, "status": status, "check": check, "passed": passed, **extra}
    )


def test_the_report_summary(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    writer = ResultsWriter(out)
    writer.write(result("a", exit_code=0, duration_s=1.0, steps=2, usage={"input_other": 10, "output": 5}))
    writer.write(result("b", exit_code=1, duration_s=2.0))
    writer.write(result("c", "timed_out", duration_s=9.0))
    writer.write(result("d", "failed", reason="ChatProviderError: 500", duration_s=3.0))
    writer.write(result("e", "failed", reason="ChatProviderError: 502", duration_s=4.0))
    writer.write(result("b", exit_code=0, duration_s=2.0))  # a later line for b wins
    writer.close()
    summary = summarise(list(read_results(out).values()))
    assert summary.tasks == 5 and summary.checked == 2 and summary.passed == 2
    assert dict(summary.causes) == {"timed out": 1, "failed: ChatProviderError": 2}
    assert (summary.percentile(0.5), summary.percentile(1.0)) == (3.0, 9.0)
    markdown = to_markdown(summary)
    assert "| checks passed | 2/2 (100%) |" in markdown
    assert "| tokens in / out | 10 / 5 |" in markdown
    assert "| failed: ChatProviderError | 2 | d, e |" in markdown
    assert "| cost | unknown (no price for the model, or no usage reported) |" in markdown


def test_the_report_adds_up_the_cost_of_the_priced_tasks(tmp_path: Path) -> None:
    priced = [result("a", cost_usd=0.25), result("b", cost_usd=0.5)]
    assert "| cost | $0.7500 ($0.3750 per task) |" in to_markdown(summarise(priced))
    partly = to_markdown(summarise([*priced, result("c")]))
    assert "| cost | $0.7500 ($0.3750 per task; 1 of 3 tasks without a price) |" in partly


def test_a_line_cut_short_by_a_killed_driver_is_skipped_and_the_next_one_kept(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    out.write_text('{"id": "a", "status": "done"}\n{"id": "b", "sta')
    writer = ResultsWriter(out)
    writer.write(result("c"))
    writer.close()
    assert sorted(read_results(out)) == ["a", "c"]
    assert out.read_text().splitlines()[-1].startswith('{"id":"c"')


def test_the_fleets_own_files_are_left_out_of_copies_diffs_and_shipped_workspaces(tmp_path: Path) -> None:
    from soulwire.fleet.ray_backend import pack_workspace, unpack_workspace
    from soulwire.fleet.runlock import RunLock, fleet_outputs

    source = tmp_path / "repo"
    (source / "src").mkdir(parents=True)
    (source / "src" / "app.py").write_text("x = 1\n")
    run_dir, out = source / "tasks.results.run", source / "tasks.results.jsonl"
    lock = RunLock.acquire(out, run_dir)
    try:
        own = fleet_outputs(run_dir)
        assert own == {str(run_dir), str(out)}
        out.write_text('{"id": "earlier"}\n')
        first = run_dir / "a" / "workspace"
        prepare_workspace(source, first, leave_out=own)
        assert sorted(p.name for p in first.iterdir()) == ["src"]
        out.write_text('{"id": "earlier"}\n{"id": "a"}\n')  # the results file grows in the source
        (first / "src" / "app.py").write_text("x = 2\n")
        diff, _ = workspace_diff(source, first, leave_out=own)
        assert "a/src/app.py" in diff and "tasks.results" not in diff
        shipped = tmp_path / "shipped"
        unpack_workspace(pack_workspace(source, own), shipped)
        assert sorted(p.name for p in shipped.iterdir()) == ["src"]
    finally:
        lock.release()
    assert fleet_outputs(tmp_path / "no-run-dir") == {str(tmp_path / "no-run-dir")}
