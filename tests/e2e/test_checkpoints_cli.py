"""`soulwire sessions checkpoints|changes|rewind|fork --new-work-dir` on a session the real
engine ran (scripted model, real files): what the turn did, a rewind refused by a hand edit
(exit 1, the file named), forced, undone; a fork with its own work dir; mistakes exit 2."""

from __future__ import annotations

import json

from tests.e2e.test_checkpoints import TURN_ONE, negotiated, prepare, tree
from tests.e2e.test_sessions_cli import cli
from tests.tool_calls import run_turn


def test_the_cli_shows_rewinds_undoes_and_forks(engine, sandbox, tmp_path):
    prepare(sandbox, repo=False)
    work = sandbox.work
    before = tree(work)
    wire = engine(*TURN_ONE, args=("--yolo",))
    negotiated(wire)
    session = wire.initialize()["result"]["session"]["id"]
    run_turn(wire)
    assert wire.close() == 0
    after = tree(work)
    w = ("--work-dir", str(work))

    listed = cli(sandbox, "checkpoints", session, *w)
    assert listed.returncode == 0 and "turn 1, before step 2: 2 changed" in listed.stdout
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["c1", "c2", "c3", "c4"]
    records = json.loads(cli(sandbox, "checkpoints", session, "--json", *w).stdout)
    assert [r["kind"] for r in records] == ["turn", "step", "step", "end"]

    diff = cli(sandbox, "changes", session, "--turn", "1", *w)
    assert diff.returncode == 0
    assert "--- a/a.txt\n+++ b/a.txt\n" in diff.stdout and "-two\n+TWO\n" in diff.stdout
    assert "mode 644 → 755 run.sh" in diff.stdout and "+++ b/link\n" in diff.stdout
    stat = cli(sandbox, "changes", session, "--turn", "1", "--stat", *w).stdout
    assert " added binary blob.bin" in stat and " deleted gone.txt" in stat

    (work / "a.txt").write_text("by hand\n")
    refused = cli(sandbox, "rewind", session, "--turn", "1", *w)
    assert refused.returncode == 1 and "a.txt" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert (work / "a.txt").read_text() == "by hand\n"
    forced = cli(sandbox, "rewind", session, "--turn", "1", "--force", *w)
    assert forced.returncode == 0, forced.stderr
    assert tree(work) == {**before, "noise.log": after["noise.log"]}
    assert cli(sandbox, "history", session, *w).stdout == ""  # the conversation was cut too
    undone = cli(sandbox, "rewind", session, "--undo", *w)
    assert undone.returncode == 0, undone.stderr
    assert tree(work) == {**after, "a.txt": (b"by hand\n", 0o644)}

    new_dir = tmp_path / "forked"
    forked = cli(sandbox, "fork", session, "--turn", "1", "--new-work-dir", str(new_dir), *w)
    assert forked.returncode == 0, forked.stderr
    new_id = forked.stdout.split(" as ")[1].split()[0]
    assert tree(new_dir) == {k: v for k, v in after.items() if k != "noise.log"}
    assert tree(work) == {**after, "a.txt": (b"by hand\n", 0o644)}
    in_fork = cli(sandbox, "checkpoints", new_id, "--work-dir", str(new_dir))
    assert in_fork.returncode == 0 and len(in_fork.stdout.splitlines()) == 4

    for mistake in (
        ("rewind", session, "--turn", "9"),
        ("changes", session, "--turn", "0"),
        ("rewind", session, "--turn", "1", "--files-only", "--context-only"),
        ("rewind", session),
    ):
        result = cli(sandbox, *mistake, *w)
        assert result.returncode == 2, mistake
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
