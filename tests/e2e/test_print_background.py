"""`--print` and background tasks, over the real engine with the scripted model: a one-shot
run waits for the background work its turn started and gives the model its result in one more
turn; at the wait's limit the work still running is stopped, the model is told, and the exit
code says the run did not finish."""

from __future__ import annotations

import json
import time

from tests.e2e.test_cli import soulwire
from tests.e2e.test_shell_tool import unique_sleep, wait_until_gone
from tests.tool_calls import call
from tests.wire_client import Sandbox


def background(command: str, description: str) -> str:
    arguments = {"command": command, "run_in_background": True, "description": description}
    return call("bg1", "Shell", arguments)


def user_messages(sandbox: Sandbox) -> list[str]:
    """The text of every user message in the session's context, in order."""
    [context] = sandbox.share.glob("sessions/*/*/context.jsonl")
    found: list[str] = []
    for line in context.read_text().splitlines():
        record = json.loads(line)
        if record.get("role") == "user":
            content = record.get("content")
            found.append(content if isinstance(content, str) else json.dumps(content))
    return found


def test_print_waits_for_a_background_command_and_the_model_gets_its_result(sandbox: Sandbox):
    sandbox.scripts = [
        background("sleep 0.5; echo written > out.txt", "write out.txt"),
        "text: started it",
        "text: the background command wrote out.txt",
    ]
    out = soulwire(sandbox, "--print", "-p", "go", "--yolo", "--config-file", str(sandbox.config_path))
    assert out.returncode == 0, out.stderr
    assert (sandbox.work / "out.txt").read_text() == "written\n"  # not killed with the engine
    assert out.stdout.rstrip().endswith("the background command wrote out.txt")
    said = user_messages(sandbox)
    assert said[:2] == [
        "go",
        "<system-reminder>Background tasks have completed. Process their results.</system-reminder>",
    ]
    assert "write out.txt" in said[2] and "completed" in said[2]  # the task's notice, at the step


def test_print_stops_background_work_still_running_at_the_wait_limit(sandbox: Sandbox):
    sleep = unique_sleep()
    sandbox.config_extra = {"background": {"print_wait_ceiling_s": 1}}
    sandbox.scripts = [
        background(f"sleep {sleep}", "a long sleep"),
        "text: started it",
        "text: the sleep did not finish",
    ]
    # (soulwire() gives the run 30 s: far less than the command's sleep or the default's hour)
    out = soulwire(sandbox, "--print", "-p", "go", "--yolo", "--config-file", str(sandbox.config_path))
    assert out.returncode == 1
    [line] = out.stderr.splitlines()
    assert line.startswith("soulwire: timed out waiting for background tasks (1s); stopped 1: ")
    assert line.endswith(" (a long sleep)")
    assert out.stdout.rstrip().endswith("the sleep did not finish")  # the model was told
    assert "were stopped" in user_messages(sandbox)[-1]
    assert not wait_until_gone(sleep)


def test_stream_json_input_does_not_wait_for_background_work(sandbox: Sandbox):
    """A stream of prompts is a conversation: one turn's background work must not hold up
    the end of the input (as the reference: only one-shot text input waits)."""
    sleep = unique_sleep()
    sandbox.scripts = [background(f"sleep {sleep}", "a long sleep"), "text: started it"]
    out = soulwire(  # (in 30 s: it cannot have waited for the sleep)
        sandbox, "--print", "--yolo", "--input-format", "stream-json", "--config-file",
        str(sandbox.config_path), stdin='{"role": "user", "content": "go"}\n',
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert not wait_until_gone(sleep)


def test_keep_alive_on_exit_does_not_wait_and_leaves_the_command_running(sandbox: Sandbox):
    """With `[background] keep_alive_on_exit = true` (a reference key) a one-shot run does
    not wait for its background command: it ends, says on stderr what it left running and
    where the output goes, and the command goes on to finish its work."""
    sandbox.config_extra = {"background": {"keep_alive_on_exit": True}}
    sandbox.scripts = [
        background("while [ ! -e go ]; do sleep 0.02; done; echo later > kept.txt", "write kept.txt"),
        "text: started it",
    ]
    out = soulwire(sandbox, "--print", "-p", "go", "--yolo", "--config-file", str(sandbox.config_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("started it")
    [line] = out.stderr.splitlines()
    assert line.startswith("soulwire: left 1 background command running ([background] keep_alive_on_exit): ")
    assert "(write kept.txt), output in " in line and line.endswith("output.log")
    assert not (sandbox.work / "kept.txt").exists()
    (sandbox.work / "go").touch()  # the engine has exited: only a command that outlived it writes
    deadline = time.monotonic() + 10
    while not (sandbox.work / "kept.txt").exists() or not (sandbox.work / "kept.txt").read_text():
        assert time.monotonic() < deadline, "the background command did not outlive the run"
        time.sleep(0.02)
    assert (sandbox.work / "kept.txt").read_text() == "later\n"
