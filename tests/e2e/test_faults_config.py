"""Bad configuration: the engine refuses to start — exit 2, one line on stderr naming the file
and the key — before it answers anything, in `--wire` (even with `initialize` and a prompt
already written) and in `--print` mode; and what only the full check can find gets an error
reply for every request instead of a silent exit. Never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.wire_client import Sandbox, scripted_config

INITIALIZE = {"jsonrpc": "2.0", "id": "i1", "method": "initialize", "params": {"protocol_version": "1.3"}}
PROMPT = {"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "hi"}}


def good_config(sandbox: Sandbox) -> dict[str, Any]:
    scripts = sandbox.root / "scripts.json"
    scripts.write_text(json.dumps(["text: hello"]), encoding="utf-8")
    return scripted_config(scripts)


def broken(sandbox: Sandbox, case: str) -> tuple[dict[str, Any], str]:
    """A config with one mistake, and the key the message must name."""
    config = good_config(sandbox)
    provider = config["providers"]["scripted_provider"]
    if case == "unknown default_model":
        config["default_model"] = "nope"
        return config, "default_model"
    if case == "missing provider":
        config["models"]["scripted"]["provider"] = "gone"
        return config, "models.scripted.provider"
    if case.startswith("max_steps_per_turn="):
        config["loop_control"] = {"max_steps_per_turn": int(case.split("=")[1])}
        return config, "loop_control.max_steps_per_turn"
    if case == "max_steps_per_turn as text":
        config["loop_control"] = {"max_steps_per_turn": "ten"}
        return config, "loop_control.max_steps_per_turn"
    if case == "missing scripts file":
        provider["env"]["KIMI_SCRIPTED_ECHO_SCRIPTS"] = str(sandbox.root / "nowhere.json")
        return config, "nowhere.json"
    if case == "scripts file not JSON":
        bad = sandbox.root / "bad-scripts.json"
        bad.write_text("text: not a JSON list", encoding="utf-8")
        provider["env"]["KIMI_SCRIPTED_ECHO_SCRIPTS"] = str(bad)
        return config, "bad-scripts.json"
    if case == "boolean as text":
        config["default_yolo"] = "no"
        return config, "default_yolo"
    if case == "models not a table":
        config["models"] = ["scripted"]
        return config, "models"
    if case == "context size as text":
        config["models"]["scripted"]["max_context_size"] = "big"
        return config, "models.scripted.max_context_size"
    raise AssertionError(case)


CASES = [
    "unknown default_model",
    "missing provider",
    "max_steps_per_turn=0",
    "max_steps_per_turn=-3",
    "max_steps_per_turn as text",
    "missing scripts file",
    "scripts file not JSON",
    "boolean as text",
    "models not a table",
    "context size as text",
]


def run(sandbox: Sandbox, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    sandbox.work.mkdir(parents=True, exist_ok=True)
    sandbox.home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "soulwire", *args, "--work-dir", str(sandbox.work)],
        input=stdin, capture_output=True, text=True, env=sandbox.env(), cwd=sandbox.work, timeout=60,
    )  # fmt: skip


def assert_refused(out: subprocess.CompletedProcess[str], origin: str, key: str) -> None:
    assert out.returncode == 2, out
    assert out.stdout == ""  # nothing answered, nothing printed
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("soulwire: ") and origin in lines[0] and key in lines[0]
    assert "Traceback" not in out.stderr


def write_config(sandbox: Sandbox, config: dict[str, Any], suffix: str = ".json") -> Path:
    path = sandbox.root / f"config{suffix}"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", CASES)
def test_wire_mode_refuses_before_answering_initialize(sandbox, case):
    config, key = broken(sandbox, case)
    path = write_config(sandbox, config)
    stdin = json.dumps(INITIALIZE) + "\n" + json.dumps(PROMPT) + "\n"
    assert_refused(run(sandbox, "--wire", "--config-file", str(path), stdin=stdin), str(path), key)


@pytest.mark.parametrize("case", CASES)
def test_print_mode_refuses_with_one_line(sandbox, case):
    config, key = broken(sandbox, case)
    out = run(sandbox, "--print", "-p", "hi", "--config", json.dumps(config))
    assert_refused(out, "--config", key)


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("config.toml", "default_model = = 1", "invalid TOML"),
        ("config.json", "{not json", "invalid JSON"),
        ("config.json", "[1, 2]", "table/object"),
        ("missing.toml", None, "does not exist"),
    ],
)
def test_a_config_file_that_is_missing_or_unparsable_is_refused(sandbox, name, text, problem):
    path = sandbox.root / name
    if text is not None:
        path.write_text(text, encoding="utf-8")
    for mode in (("--wire",), ("--print", "-p", "hi")):
        out = run(sandbox, *mode, "--config-file", str(path), stdin=json.dumps(INITIALIZE) + "\n")
        assert_refused(out, str(path), problem)


def test_a_problem_only_the_full_check_finds_gets_an_error_reply_for_every_request(sandbox):
    """`oauth` must be a table: the light check does not look, the typed schema does. The
    `initialize` reply went out early, so every request — the prompt included — is answered
    with the error, and the engine exits 2 when the client hangs up."""
    config = good_config(sandbox)
    config["providers"]["scripted_provider"]["oauth"] = "not-a-table"
    path = write_config(sandbox, config)
    requests = [INITIALIZE, PROMPT, {"jsonrpc": "2.0", "id": "c1", "method": "cancel"}]
    out = run(
        sandbox, "--wire", "--config-file", str(path), stdin="".join(json.dumps(r) + "\n" for r in requests)
    )
    replies = {m["id"]: m for m in map(json.loads, out.stdout.splitlines())}
    assert set(replies) == {"i1", "p1", "c1"}
    for rid in ("p1", "c1"):
        error = replies[rid]["error"]
        assert error["code"] == -32603 and "oauth" in error["message"] and str(path) in error["message"]
    assert out.returncode == 2
    [line] = out.stderr.splitlines()
    assert "oauth" in line and "Traceback" not in out.stderr
