"""Every mistake a newcomer makes gets ONE line on stderr that says what is wrong and how to
fix it, exit 2 (usage or configuration) or 1 (runtime), nothing on stdout, never a traceback.
One table row per mistake, run against the real `soulwire` executable of the venv."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.wire_client import Sandbox

from soulwire.cli.completion import subcommands

SOULWIRE = str(Path(sys.executable).with_name("soulwire"))
NO_KEY_HINT = (
    "soulwire: LLM is not set: no model is configured. Export an API key (KIMI_API_KEY, OPENAI_API_KEY "
    "or ANTHROPIC_API_KEY; SOULWIRE_MODEL_NAME picks the model, SOULWIRE_BASE_URL the server), "
    "or add [providers.<name>] and [models.<alias>] with default_model to {share}/config.toml, or pass --config."
)


@dataclass
class Case:
    name: str
    args: Callable[[Sandbox], list[str]]
    line: str  # the exact line, with {root}, {share}, {work}, {port}, {toml_error}, {commands} filled in
    code: int = 2


def cfg(s: Sandbox) -> list[str]:
    return ["--config-file", str(s.config_path)]


CASES = [
    Case("unknown flag", lambda s: ["--wrok-dir", "x"],
         "soulwire: error: unrecognized arguments: --wrok-dir x (did you mean --work-dir?); see 'soulwire --help'"),
    Case("conflicting flags", lambda s: ["--wire", "--acp"],
         "soulwire: error: argument --acp: not allowed with argument --wire; see 'soulwire --help'"),
    Case("flag needing --print", lambda s: ["--wire", "--output-format", "text"],
         "soulwire: error: --input-format, --output-format and --final-message-only need --print; see 'soulwire --help'"),
    Case("bad number", lambda s: ["--wire", "--max-steps-per-turn", "0"],
         "soulwire: error: argument --max-steps-per-turn: must be ≥ 1, got 0; see 'soulwire --help'"),
    Case("bad choice", lambda s: ["--wire", "--sandbox", "on"],
         "soulwire: error: argument --sandbox: invalid choice 'on'; choose from off, read-only, workspace-write; see 'soulwire --help'"),
    Case("missing --agent-file", lambda s: ["--wire", *cfg(s), "--agent-file", f"{s.root}/agent.yaml"],
         "soulwire: error: --agent-file {root}/agent.yaml: no such file"),
    Case("missing --add-dir", lambda s: ["--wire", *cfg(s), "--add-dir", f"{s.root}/lib"],
         "soulwire: error: --add-dir {root}/lib: no such directory"),
    Case("missing --skills-dir", lambda s: ["--wire", *cfg(s), "--skills-dir", f"{s.root}/skills"],
         "soulwire: error: --skills-dir {root}/skills: no such directory"),
    Case("missing --work-dir", lambda s: ["--wire", "--work-dir", f"{s.root}/nowhere"],
         "soulwire: error: --work-dir does not exist or is not a directory: {root}/nowhere"),
    Case("missing --config-file", lambda s: ["--wire", "--config-file", f"{s.root}/config.toml"],
         "soulwire: error: config file does not exist: {root}/config.toml"),
    Case("unparsable --config", lambda s: ["--wire", "--config", "default_model = = 1"],
         "soulwire: error: --config: neither valid JSON nor valid TOML ({toml_error})"),
    Case("bad config value", lambda s: ["--wire", "--config", '{"loop_control": {"max_steps_per_turn": 0}}'],
         "soulwire: error: --config: loop_control.max_steps_per_turn: must be at least 1, not 0"),
    Case("missing scripts file", lambda s: ["--print", "-p", "hi", "--config", json.dumps({
        "default_model": "m", "models": {"m": {"provider": "p", "model": "x"}},
        "providers": {"p": {"type": "_scripted_echo", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": f"{s.root}/s.json"}}}})],
         "soulwire: error: --config: providers.p: cannot read scripts file {root}/s.json: No such file or directory"),
    Case("unknown model", lambda s: ["--print", "-p", "hi", *cfg(s), "--model", "gpt-9"],
         "soulwire: LLM is not set: --model 'gpt-9' is not a model alias of the configuration (aliases: scripted) "
         "and no API key in the environment says which provider serves it; use one of those aliases, or export "
         "the provider's API key (soulwire doctor lists them)"),
    Case("no API key", lambda s: ["--print", "-p", "hi"], NO_KEY_HINT),
    Case("--continue without a session", lambda s: ["--print", "-p", "hi", *cfg(s), "--continue"],
         "soulwire: error: No previous session found for the working directory; start one without --continue"),
    Case("--session without an id", lambda s: ["--print", "-p", "hi", "--session"],
         "soulwire: error: --session needs an ID outside the interactive shell; see 'soulwire --help'"),
    Case("subcommand: unknown flag", lambda s: ["doctor", "--jsn"],
         "soulwire doctor: error: unrecognized arguments: --jsn (did you mean --json?); see 'soulwire doctor --help'"),
    Case("subcommand: missing command", lambda s: ["sessions"],
         "soulwire sessions: error: the following arguments are required: COMMAND; see 'soulwire sessions --help'"),
    Case("unknown session", lambda s: ["sessions", "show", "nope"],
         "soulwire sessions: no session 'nope' in {work}", 1),
    Case("unknown shell", lambda s: ["completion", "tcsh"],
         "soulwire completion: error: argument shell: invalid choice 'tcsh'; choose from bash, zsh, fish; "
         "see 'soulwire completion --help'"),
    Case("mistyped command", lambda s: ["doctr"],
         "soulwire: error: unknown command 'doctr' (did you mean doctor?); see 'soulwire --help'"),
    Case("unknown command", lambda s: ["frobnicate"],
         "soulwire: error: unknown command 'frobnicate' (commands: {commands}; a prompt goes after -p); "
         "see 'soulwire --help'"),
    Case("mistyped subcommand", lambda s: ["sessions", "lst"],
         "soulwire sessions: error: argument COMMAND: invalid choice 'lst'; choose from list, show, delete, "
         "history, fork, checkpoints, changes, rewind, export, import "
         "(did you mean list?); see 'soulwire sessions --help'"),
    Case("missing tasks file", lambda s: ["fleet", "run", f"{s.root}/tasks.jsonl"],
         "soulwire fleet: {root}/tasks.jsonl: cannot read: No such file or directory"),
    Case("serve: bad --listen", lambda s: ["serve", "--listen", "localhost"],
         "soulwire serve: error: --listen wants HOST:PORT, got 'localhost'"),
    Case("serve: port in use", lambda s: ["serve", "--listen", "127.0.0.1:{port}"],
         "soulwire serve: error: cannot listen on 127.0.0.1:{port}: Address already in use; stop what uses it or "
         "pick another port (--listen HOST:0 takes any free one)", 1),
]  # fmt: skip


def fill_in(text: str, fill: dict[str, object]) -> str:
    for key, value in fill.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def toml_error(text: str) -> str:
    """This Python's own wording (it changes between versions)."""
    import tomllib

    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return str(exc)
    raise AssertionError("valid TOML")


@pytest.fixture
def busy_port():
    """A port something else is listening on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_mistake_gets_one_line_that_says_how_to_fix_it(sandbox: Sandbox, busy_port: int, case: Case):
    sandbox.scripts = ["text: hello"]
    sandbox.write()
    fill = {"root": sandbox.root, "share": sandbox.share, "work": sandbox.work, "port": busy_port,
            "toml_error": toml_error("default_model = = 1"), "commands": ", ".join(subcommands())}  # fmt: skip
    args = [fill_in(a, fill) for a in case.args(sandbox)]
    out = subprocess.run([SOULWIRE, *args], capture_output=True, text=True, env=sandbox.env(),
                         cwd=sandbox.work, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert (out.returncode, out.stderr) == (case.code, fill_in(case.line, fill) + "\n")
    assert out.stdout == ""


def test_every_subcommand_has_help_with_examples(sandbox: Sandbox):
    sandbox.write()
    listed = subprocess.run([SOULWIRE, "__complete", "commands"], capture_output=True, text=True,
                            env=sandbox.env(), timeout=30, check=True).stdout.split()  # fmt: skip
    assert {"acp", "sessions", "serve", "fleet", "doctor", "completion", "info", "schema", "demo"} <= set(
        listed
    )
    for command in ["", *listed]:
        argv = [SOULWIRE, *([command] if command else []), "--help"]
        out = subprocess.run(argv, capture_output=True, text=True, env=sandbox.env(), timeout=30)
        assert out.returncode == 0 and out.stderr == "", (command, out.stderr)
        assert "examples:" in out.stdout, command


def test_version(sandbox: Sandbox):
    out = subprocess.run(
        [SOULWIRE, "--version"], capture_output=True, text=True, env=sandbox.env(), timeout=30
    )
    assert out.returncode == 0 and out.stdout.startswith("soulwire, version ")


@pytest.mark.parametrize("args", [["schema"], ["completion", "bash"], ["sessions", "list"]])
def test_a_reader_that_goes_away_ends_quietly(sandbox: Sandbox, args: list[str]):
    """`soulwire … | head -0`: the reader closed before anything was written."""
    sandbox.scripts = ["text: hello"]
    sandbox.write()
    if args == ["sessions", "list"]:  # one session, so that the listing writes something
        subprocess.run([SOULWIRE, "--print", "-p", "hi", *cfg(sandbox)], env=sandbox.env(), cwd=sandbox.work,
                       capture_output=True, timeout=60, check=True)  # fmt: skip
    read, write = os.pipe()
    os.close(read)
    with open(write, "wb") as closed:  # noqa: PTH123  (a file descriptor, not a path)
        out = subprocess.run([SOULWIRE, *args], stdout=closed, stderr=subprocess.PIPE, text=True,
                             env=sandbox.env(), cwd=sandbox.work, timeout=60)  # fmt: skip
    assert out.stderr == ""
    assert out.returncode == 141
