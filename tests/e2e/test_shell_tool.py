"""The Shell tool in the real engine: results and messages, output caps, timeouts and
cancellation — which must take every process the command started with them."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from tests.tool_calls import call, one_step_each, results, run_turn
from tests.wire_client import event_types, payloads


def processes_running(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, limit: float = 10.0) -> list[int]:
    deadline = time.monotonic() + limit
    while (alive := processes_running(marker)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return alive


def unique_sleep() -> str:
    """A `sleep` duration nobody else uses, so its processes can be found in /proc. Longer
    than any test may take (pytest's timeout): a turn that waited for it could not pass."""
    return f"600.{uuid.uuid4().int % 10**6:06d}"


def test_results_messages_and_environment(engine, sandbox):
    wire = engine(
        *one_step_each(
            ("ok", "Shell", {"command": "pwd; echo out; echo err >&2"}),
            (
                "fail",
                "Shell",
                {"command": "for i in 1 2 3 4 5 6 7; do echo line$i; done; echo oops >&2; exit 3"},
            ),
            ("stdin", "Shell", {"command": "cat; echo read-nothing; echo $GIT_TERMINAL_PROMPT"}),
            ("quiet", "Shell", {"command": "true"}),
            ("signal", "Shell", {"command": "kill -KILL $$"}),
        ),
        args=("--yolo",),
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    values = results(messages)
    assert values["ok"]["output"] == f"{sandbox.work}\nout\nerr\n"
    assert values["ok"]["message"] == "Command executed successfully."
    fail = values["fail"]
    assert fail["is_error"] and fail["message"] == "Command failed with exit code: 3."
    assert fail["output"].endswith("line7\noops\n")
    assert fail["display"] == [
        {"type": "brief", "text": "Failed with exit code: 3\nline4\nline5\nline6\nline7\noops"}
    ]
    assert values["stdin"]["output"] == "read-nothing\n0\n"  # stdin closed, prompts disabled
    assert values["quiet"] == {
        "is_error": False,
        "output": "",
        "message": "Command executed successfully.",
        "display": [],
        "extras": None,
    }
    assert values["signal"]["is_error"] and "SIGKILL" in values["signal"]["message"]


def test_invalid_arguments_become_error_results(engine):
    wire = engine(
        *one_step_each(
            ("t0", "Shell", {"command": "echo x", "timeout": 0}),
            ("t1", "Shell", {"command": "echo x", "timeout": 301}),
            ("t2", "Shell", {}),
            ("t3", "Shell", "{not json"),
            ("t4", "Shell", {"command": "echo x", "run_in_background": True}),
            ("t5", "Shell", {"command": ["echo", "x"]}),
        ),
        args=("--yolo",),
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    values = results(messages)
    for key in ("t0", "t1", "t2", "t4", "t5"):
        assert values[key]["is_error"]
        assert values[key]["message"].startswith("Error validating JSON arguments: ")
        assert values[key]["display"] == [{"type": "brief", "text": "Invalid arguments"}]
    assert "timeout" in values["t1"]["message"] and "command" in values["t2"]["message"]
    assert values["t3"]["message"].startswith("Error parsing JSON arguments: ")
    assert values["t4"]["message"].endswith("description is required when run_in_background is true")
    assert event_types(messages).count("StepBegin") == 7  # every error let the turn go on


def test_a_failing_tool_is_an_error_result_not_a_crash(engine, sandbox):
    wire = engine(
        *one_step_each(
            ("remove", "Shell", {"command": f"cd / && rm -rf {sandbox.work}"}),
            ("after", "Shell", {"command": "echo unreachable"}),
        ),
        args=("--yolo",),
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    after = results(messages)["after"]
    assert after["is_error"] and after["message"].startswith("Error running tool: `Shell` stopped ")
    assert after["display"] == [{"type": "brief", "text": "Tool runtime error"}]
    # The model reads a sentence, not Python's: no exception text or type; the log has those.
    log = (sandbox.share / "logs" / "soulwire.log").read_text()
    [failure] = [line for line in log.splitlines() if "tool Shell failed: " in line]
    raised = failure.partition("tool Shell failed: ")[2]
    exc_type, _, exc_text = raised.partition(": ")
    assert exc_type and exc_text and "Traceback (most recent call last)" in log
    assert exc_type not in after["message"] and exc_text not in after["message"]


def test_long_output_is_clipped_in_the_middle(engine):
    wire = engine(
        *one_step_each(
            ("big", "Shell", {"command": "seq 1 200000"}),
            ("wide", "Shell", {"command": "head -c 5000 /dev/zero | tr '\\0' x; echo; echo end"}),
        ),
        args=("--yolo",),
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    big = values["big"]
    assert not big["is_error"]
    assert 40_000 < len(big["output"]) < 51_000
    assert big["output"].startswith("1\n2\n3\n") and big["output"].endswith("199999\n200000\n")
    assert "[… output omitted …]" in big["output"] and "1288895 bytes" in big["message"]
    wide_lines = values["wide"]["output"].splitlines()
    assert len(wide_lines[0]) < 2100 and wide_lines[0].startswith("x" * 2000) and wide_lines[1] == "end"
    assert "truncated" in values["wide"]["message"]


def test_timeout_kills_the_whole_process_group(engine):
    duration = unique_sleep()
    wire = engine(
        *one_step_each(
            (
                "t",
                "Shell",
                {"command": f"echo started; sleep {duration} & sleep {duration}; wait", "timeout": 1},
            )
        ),
        args=("--yolo",),
    )
    messages, _ = run_turn(wire, answer=None)  # (waiting out the sleep would time out)
    value = results(messages)["t"]
    assert value["is_error"] and value["message"] == "Command killed by timeout (1s)"
    assert value["output"] == "started\n"
    assert value["display"][0]["text"].startswith("Killed by timeout (1s)")
    assert wait_until_gone(duration) == []


def test_cancel_kills_the_command_and_its_children_promptly(engine):
    duration = unique_sleep()
    wire = engine(
        call("tc-1", "Shell", {"command": f"sleep {duration} & sleep {duration}; wait"}),
        "text: next turn ok",
        args=("--yolo",),
    )
    wire.initialize()
    rid = wire.request("prompt", {"user_input": "sleep"})
    deadline = time.monotonic() + 10
    while len(processes_running(duration)) < 2:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    wire.request("cancel")
    # How fast is measured by bench/cancel_bench.py; here, that the turn ends at all (the
    # sleeps would outlast the bound) and takes the whole process group with it.
    seen, response = wire.until_response(rid, timeout=30)
    assert response["result"] == {"status": "cancelled"}
    assert event_types(seen)[-2:] == ["ToolResult", "TurnEnd"]  # the call cut short says so
    assert payloads(seen, "ToolResult")[0]["return_value"]["message"].startswith("interrupted: ")
    assert wait_until_gone(duration, limit=10) == []
    messages, result = run_turn(wire, "after cancel", answer=None)
    assert result == {"status": "finished"}
    assert [m["params"]["payload"]["text"] for m in messages if m["params"]["type"] == "ContentPart"] == [
        "next turn ok"
    ]


def test_closing_stdin_during_a_command_leaves_nothing_behind(engine):
    duration = unique_sleep()
    wire = engine(call("tc-1", "Shell", {"command": f"sleep {duration}"}), args=("--yolo",))
    wire.request("prompt", {"user_input": "sleep"})
    deadline = time.monotonic() + 10
    while not processes_running(duration):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    assert wire.close() == 0
    assert wait_until_gone(duration, limit=10) == []
    assert Path("/proc/self").exists()  # the /proc scan above looked at a real /proc
