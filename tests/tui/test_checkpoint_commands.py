"""/changes, /undo and /rewind in the real shell (tmux): a turn's diff, undoing it after a
confirmation that lists its files, and the picker of turns."""

from __future__ import annotations

from collections.abc import Callable

from tests.tui.conftest import Tmux, tool_call, user_inputs, wait_for_file

Shell = Callable[..., Tmux]


def test_changes_undo_and_rewind(tmux_shell: Shell):
    shell = tmux_shell(
        tool_call("w1", "WriteFile", path="a.txt", content="first line\n"),
        "text: wrote a",
        tool_call("w2", "Shell", command="echo second >> a.txt && touch b.txt"),
        "text: changed a",
        checkpoints={"enabled": True},
    )
    work = shell.sandbox.work
    shell.start("--yolo")
    shell.ready()
    shell.type("make a")
    shell.keys("Enter")
    shell.wait_for("wrote a")
    shell.type("change a")
    shell.keys("Enter")
    shell.wait_for("changed a")

    shell.type("/changes 1")
    shell.keys("Enter")
    shell.wait_for(r"turn 1: a\.txt")
    shell.wait_for(r"^\+first line")
    shell.type("/changes")  # the last turn
    shell.keys("Enter")
    shell.wait_for(r"turn 2: a\.txt, b\.txt")

    shell.type("/undo")
    shell.keys("Enter")
    shell.wait_for(r"Undo turn 2\?")
    shell.wait_for(r"restore a\.txt, b\.txt")
    shell.keys("Enter")
    shell.wait_for(r"Back to before turn 2: 2 file\(s\) restored")
    assert (work / "a.txt").read_text() == "first line\n" and not (work / "b.txt").exists()
    wait_for_file(lambda: user_inputs(shell.sandbox.share) == ["make a"], "the conversation cut to turn 1")

    shell.keys("Escape", "Escape")  # at an empty prompt: the same picker as /rewind
    shell.wait_for(r"Go back to before which turn\?")
    shell.wait_for(r"1  make a  — a\.txt")
    shell.keys("Enter")
    shell.wait_for(r"Back to before turn 1: 1 file\(s\) restored")
    assert not (work / "a.txt").exists()
    shell.type("/exit")
    shell.keys("Enter")
    shell.wait_for("^EXIT=0$")


def test_an_overlay_turn_ends_with_a_commit_or_discard_choice(tmux_shell: Shell, bwrap: None):
    shell = tmux_shell(
        tool_call("s1", "Shell", command="echo agent > new.txt && rm old.txt"),
        "text: first done",
        tool_call("s2", "Shell", command="echo again > other.txt"),
        "text: second done",
        checkpoints={"enabled": True},
        sandbox="workspace-write",
        overlay="ask",
    )
    work = shell.sandbox.work
    work.mkdir(parents=True, exist_ok=True)
    (work / "old.txt").write_text("old\n")
    shell.start("--yolo")
    shell.ready()
    shell.type("first")
    shell.keys("Enter")
    shell.wait_for(r"This turn's changes are in the sandbox's overlay \(2 file\(s\)\)")
    shell.wait_for(r"added\s+new\.txt")
    shell.wait_for(r"deleted\s+old\.txt")
    assert sorted(p.name for p in work.iterdir()) == ["old.txt"]
    shell.keys("Enter")  # commit
    shell.wait_for(r"Committed 2 file\(s\) to the work dir")
    assert sorted(p.name for p in work.iterdir()) == ["new.txt"]

    shell.type("second")
    shell.keys("Enter")
    shell.wait_for(r"added\s+other\.txt")
    shell.keys("Down", "Enter")  # discard
    shell.wait_for(r"Discarded 1 file\(s\)")
    assert sorted(p.name for p in work.iterdir()) == ["new.txt"]
    shell.type("/exit")
    shell.keys("Enter")
    shell.wait_for("^EXIT=0$")


def test_undo_stops_the_background_tasks_first_and_says_so(tmux_shell: Shell):
    from tests.e2e.test_shell_tool import processes_running, unique_sleep

    duration = unique_sleep()
    shell = tmux_shell(
        "\n".join(
            [
                tool_call("w", "WriteFile", path="a.txt", content="x\n"),
                tool_call(
                    "b", "Shell", command=f"sleep {duration}", run_in_background=True, description="sleeper"
                ),
            ]
        ),
        "text: started",
        checkpoints={"enabled": True},
    )
    shell.start("--yolo")
    shell.ready()
    shell.type("start it")
    shell.keys("Enter")
    shell.wait_for("started")
    wait_for_file(lambda: bool(processes_running(duration)), "the background command to run")
    shell.type("/undo")
    shell.keys("Enter")
    shell.wait_for(r"Undo turn 1\?")
    shell.keys("Enter")
    shell.wait_for(  # (the line may wrap at the pane's width)
        r"Back to before turn 1: 1 file\(s\) restored, the conversation cut;\s+stopped\s+1\s+background\s+task\(s\)"
    )
    assert processes_running(duration) == []  # stopped before the rewind was done
    assert not (shell.sandbox.work / "a.txt").exists()
    shell.type("/exit")
    shell.keys("Enter")
    shell.wait_for("^EXIT=0$")
