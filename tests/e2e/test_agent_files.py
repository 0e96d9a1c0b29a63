"""Agent files over the real engine: `--agent-file` (system prompt and its arguments, tools and
excluded tools, sub-agents, `extend`), `--agent okabe` with its D-Mail, and every way a file
can be wrong: one line naming the file, exit 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.tool_calls import call, results
from tests.wire_client import Sandbox

BASE = """\
version: 1
agent:
  name: base
  system_prompt_path: ./base.md
  system_prompt_args: {ROLE: "You review code.", TONE: "plain"}
  tools: ["kimi_cli.tools.file:ReadFile", "Think", "Shell", "Agent"]
  exclude_tools: [Shell]
  subagents:
    checker: {path: ./checker.yaml, description: "Checks one file."}
"""
CHILD = """\
version: 1
agent:
  extend: ./base.yaml
  system_prompt_args: {TONE: "terse"}
"""
CHECKER = """\
version: 1
agent:
  system_prompt_path: ./checker.md
  tools: [ReadFile]
"""


def write_agents(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "base.yaml").write_text(BASE)
    (directory / "base.md").write_text(
        "You are a reviewer in ${KIMI_WORK_DIR}. ${ROLE} Tone: ${TONE}.\n"
        "{% if KIMI_OS == 'Windows' %}Use backslashes.{% endif %}Skills:\n${KIMI_SKILLS}"
    )
    (directory / "child.yaml").write_text(CHILD)
    (directory / "checker.yaml").write_text(CHECKER)
    (directory / "checker.md").write_text("You check files for ${KIMI_WORK_DIR}.")
    return directory / "child.yaml"


def context_records(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (directory / "context.jsonl").read_text().splitlines()]


def session_dir(sandbox: Sandbox) -> Path:
    [path] = sandbox.share.glob("sessions/*/*/context.jsonl")
    return path.parent


def test_an_agent_file_sets_the_prompt_the_tools_and_the_sub_agents(engine, sandbox):
    agent = write_agents(sandbox.root / "agents")
    (sandbox.work / "notes.txt").parent.mkdir(parents=True, exist_ok=True)
    (sandbox.work / "notes.txt").write_text("hello\n")
    wire = engine(
        call("t1", "Think", {"thought": "look first"})
        + "\n"
        + call("s1", "Shell", {"command": "echo no"})
        + "\n"
        + call("a1", "Agent", {"description": "check", "prompt": "check notes", "subagent_type": "checker"})
        + "\n"
        + call("a2", "Agent", {"description": "code", "prompt": "x", "subagent_type": "coder"}),
        call("r1", "ReadFile", {"path": "notes.txt"}),  # the sub-agent's steps
        "text: " + "notes.txt says hello. " * 12,
        "text: reviewed",
        args=("--agent-file", str(agent), "--yolo"),
    )
    wire.initialize(protocol_version="1.10", client={"name": "t"})
    events, response = wire.prompt("review", timeout=30)
    assert response["result"] == {"status": "finished"}
    values = results(events)
    assert values["t1"]["message"] == "Thought logged" and not values["t1"]["is_error"]
    assert values["s1"]["is_error"] and "not found" in values["s1"]["message"]  # excluded
    assert not values["a1"]["is_error"] and "actual_subagent_type: checker" in values["a1"]["output"]
    assert values["a2"]["is_error"] and "use one of checker" in values["a2"]["message"]
    wire.close()
    records = context_records(session_dir(sandbox))
    prompt = records[0]["content"]
    assert prompt.startswith(f"You are a reviewer in {sandbox.work}. You review code. Tone: terse.")
    assert "Use backslashes" not in prompt and "soulwire-help" in prompt
    [sub] = (session_dir(sandbox) / "subagents").iterdir()
    assert context_records(sub)[0]["content"] == f"You check files for {sandbox.work}."


def test_okabe_sends_a_d_mail_that_rewinds_the_context(engine, sandbox):
    (sandbox.work).mkdir(parents=True, exist_ok=True)
    (sandbox.work / "big.txt").write_text("noise\n" * 200 + "the answer is 42\n")
    wire = engine(
        call("r1", "ReadFile", {"path": "big.txt"}),
        call("d1", "SendDMail", {"checkpoint_id": 1, "message": "big.txt: the answer is 42"}),
        "text: the answer is 42",
        args=("--agent", "okabe", "--yolo"),
    )
    wire.initialize(protocol_version="1.10", client={"name": "t"})
    events, response = wire.prompt("what is the answer in big.txt?")
    assert response["result"] == {"status": "finished"}
    assert not results(events)["d1"]["is_error"]
    wire.close()
    directory = session_dir(sandbox)
    records = context_records(directory)
    text = json.dumps(records)
    assert "noise" not in text  # the detour is gone from the context …
    assert "big.txt: the answer is 42" in text and "D-Mail from your future self" in text
    assert "<system>CHECKPOINT 0</system>" in text and "<system>CHECKPOINT 1</system>" in text
    assert records[-1]["role"] == "assistant" and records[-1]["content"] == "the answer is 42"
    archived = (directory / "context_1.jsonl").read_text()
    assert "noise" in archived  # … and kept in the archived file


def test_okabe_refuses_a_d_mail_to_a_checkpoint_that_does_not_exist(engine, sandbox):
    wire = engine(
        call("d1", "SendDMail", {"checkpoint_id": 99, "message": "x"}),
        "text: ok",
        args=("--agent", "okabe"),
    )
    wire.initialize(protocol_version="1.10", client={"name": "t"})
    events, response = wire.prompt("go")
    assert response["result"] == {"status": "finished"}
    assert results(events)["d1"]["is_error"] and "no checkpoint 99" in results(events)["d1"]["message"]


BROKEN = {
    "missing.yaml": (None, "no such file"),
    "yaml.yaml": ("version: 1\nagent:\n  tools: [Shell\n", "invalid YAML at line"),
    "tool.yaml": (
        "version: 1\nagent:\n  extend: default\n  tools: [Shell, Teleport]\n",
        "unknown tool 'Teleport'",
    ),
    "key.yaml": ("version: 1\nagent:\n  extend: default\n  colour: red\n", "unknown key `agent.colour`"),
    "version.yaml": ("version: 3\nagent: {}\n", "unsupported version '3'"),
    "prompt.yaml": ("version: 1\nagent:\n  tools: [Shell]\n", "no system_prompt_path"),
    "arg.yaml": (
        "version: 1\nagent:\n  extend: default\n  system_prompt_path: ./arg.md\n",
        "no value for ${WHO}",
    ),
    "loop.yaml": ("version: 1\nagent:\n  extend: ./loop.yaml\n", "loops back to itself"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_agent_file_is_one_line_and_exit_2(sandbox, name):
    content, reason = BROKEN[name]
    directory = sandbox.root / "agents"
    directory.mkdir()
    (directory / "arg.md").write_text("Hello ${WHO}")
    if content is not None:
        (directory / name).write_text(content)
    sandbox.write()
    for mode in (("--wire",), ("--print", "-p", "hi")):
        argv = [a for a in sandbox.argv("--agent-file", str(directory / name)) if a != "--wire"]
        done = subprocess.run(
            [*argv, *mode], env=sandbox.env(), capture_output=True, text=True, timeout=30, input=""
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert str(directory) in lines[0] and reason in lines[0], lines[0]


def test_errors_about_the_config_name_the_config_file_not_the_agent_file(sandbox):
    """With `--agent-file`, a config without a model (or with a bad value) is still the
    config's problem: the message names the config file."""
    agent = sandbox.root / "a.yaml"
    agent.write_text("version: 1\nagent:\n  extend: default\n")
    sandbox.write()
    config = sandbox.root / "bare.json"
    for text, words in (('{"telemetry": false}', "LLM is not set"), ('{"loop_control": 5}', "loop_control")):
        config.write_text(text)
        argv = [a for a in sandbox.argv("--agent-file", str(agent)) if a != "--wire"]
        argv[argv.index(str(sandbox.config_path))] = str(config)
        done = subprocess.run(
            [*argv, "--print", "-p", "hi"], env=sandbox.env(), capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert words in line and str(config) in line and "a.yaml" not in line, line
