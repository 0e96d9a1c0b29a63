"""`soulwire completion bash|zsh|fish`: each script parses in its shell, and completing in a
real bash offers the session ids of the work dir, the configured model names, subcommands,
flags and fixed choices (through the hidden `soulwire __complete`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.system_tools import require
from tests.wire_client import Sandbox

SOULWIRE = str(Path(sys.executable).with_name("soulwire"))


def script(sandbox: Sandbox, shell: str) -> str:
    out = subprocess.run([SOULWIRE, "completion", shell], capture_output=True, text=True, env=sandbox.env(),
                         timeout=30, check=True)  # fmt: skip
    return out.stdout


@pytest.mark.parametrize(
    ("shell", "check"), [("bash", ["bash", "-n"]), ("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])]
)
def test_each_script_is_valid_in_its_shell(sandbox: Sandbox, tmp_path: Path, shell: str, check: list[str]):
    require(check[0])
    path = tmp_path / f"soulwire.{shell}"
    path.write_text(script(sandbox, shell), encoding="utf-8")
    out = subprocess.run([*check, str(path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def complete_in_bash(sandbox: Sandbox, *words: str) -> list[str]:
    """COMPREPLY after pressing Tab with `words` typed (the last one being completed)."""
    program = (
        f"source {sandbox.root / 'soulwire.bash'}\n"
        f"COMP_WORDS=({' '.join(json.dumps(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_soulwire; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    env = {**sandbox.env(), "PATH": f"{Path(SOULWIRE).parent}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=env, cwd=sandbox.work,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line]


def test_bash_completes_sessions_models_commands_and_flags(sandbox: Sandbox):
    sandbox.scripts = ["text: one", "text: two"]
    sandbox.write()
    (sandbox.root / "soulwire.bash").write_text(script(sandbox, "bash"), encoding="utf-8")
    sandbox.share.mkdir(parents=True)
    config = json.loads(sandbox.config_path.read_text())
    config["models"]["claude"] = {"provider": "scripted_provider", "model": "x", "max_context_size": 1000}
    (sandbox.share / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for session in ("first-session", "second-session"):
        subprocess.run([SOULWIRE, "--print", "-p", "hi", "--session", session], env=sandbox.env(),
                       cwd=sandbox.work, capture_output=True, timeout=60, check=True)  # fmt: skip

    assert sorted(complete_in_bash(sandbox, "soulwire", "--session", "")) == [
        "first-session",
        "second-session",
    ]
    assert complete_in_bash(sandbox, "soulwire", "-r", "fir") == ["first-session"]
    assert complete_in_bash(sandbox, "soulwire", "sessions", "show", "sec") == ["second-session"]
    assert complete_in_bash(sandbox, "soulwire", "--model", "") == ["scripted", "claude"]
    assert complete_in_bash(sandbox, "soulwire", "se") == ["sessions", "serve"]
    assert complete_in_bash(sandbox, "soulwire", "--sandbox", "") == ["off", "read-only", "workspace-write"]
    assert complete_in_bash(sandbox, "soulwire", "--max-s") == ["--max-steps-per-turn"]
    assert complete_in_bash(sandbox, "soulwire", "doctor", "--of") == ["--offline"]


def test_complete_lists_nothing_for_a_fresh_work_dir_and_refuses_an_unknown_kind(sandbox: Sandbox):
    sandbox.write()
    listed = subprocess.run([SOULWIRE, "__complete", "sessions"], capture_output=True, text=True,
                            env=sandbox.env(), cwd=sandbox.work, timeout=30)  # fmt: skip
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "", "")
    bad = subprocess.run([SOULWIRE, "__complete", "colours"], capture_output=True, text=True,
                         env=sandbox.env(), timeout=30)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_fish_completes_choices_commands_sessions_and_flags(sandbox: Sandbox):
    require("fish")
    sandbox.scripts = ["text: one"]
    sandbox.write()
    path = sandbox.root / "soulwire.fish"
    path.write_text(script(sandbox, "fish"), encoding="utf-8")
    subprocess.run([SOULWIRE, "--print", "-p", "hi", "--config-file", str(sandbox.config_path), "--session",
                    "only-session"], env=sandbox.env(), cwd=sandbox.work, capture_output=True, timeout=60,
                   check=True)  # fmt: skip
    env = {**sandbox.env(), "PATH": f"{Path(SOULWIRE).parent}{os.pathsep}{os.environ['PATH']}"}

    def complete(line: str) -> list[str]:
        program = f"source {path}; complete -C {json.dumps(line)}"
        out = subprocess.run(["fish", "--no-config", "-c", program], capture_output=True, text=True, env=env,
                             cwd=sandbox.work, timeout=60)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return [row.split("\t")[0] for row in out.stdout.splitlines()]

    assert complete("soulwire --sandbox ") == ["off", "read-only", "workspace-write"]
    assert complete("soulwire se") == ["serve", "sessions"]
    assert complete("soulwire --session ") == ["only-session"]
    assert complete("soulwire sessions show ") == ["only-session"]
    assert complete("soulwire doctor --of") == ["--offline"]
