"""Every flag of `kimi` 1.49 that soulwire accepts has an effect (issue 13): `--verbose`
and `--debug` included; kimi's subcommands without a counterpart are refused with a reason."""

from __future__ import annotations

import pytest
from tests.e2e.test_cli import soulwire


def test_verbose_prints_what_the_session_is_made_of_on_stderr_only(sandbox):
    sandbox.scripts = ["text: hello"]
    out = soulwire(sandbox, "--print", "-p", "hi", "--verbose", "--config-file", str(sandbox.config_path))
    assert out.returncode == 0 and out.stdout == "hello\n"
    assert "model scripted; agent default" in out.stderr and "skill soulwire-help [builtin]" in out.stderr


def test_debug_writes_a_private_debug_log_in_the_share_dir(sandbox):
    sandbox.scripts = ["text: hello"]
    out = soulwire(sandbox, "--print", "-p", "hi", "--debug", "--config-file", str(sandbox.config_path))
    log = sandbox.share / "logs" / "soulwire.log"
    assert out.returncode == 0 and out.stdout == "hello\n" and out.stderr == f"soulwire: debug log: {log}\n"
    text = log.read_text()
    assert "DEBUG" in text and " on Python " in text and "model scripted" in text
    assert log.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("name", ["term"])
def test_kimi_subcommands_without_a_counterpart_are_refused_with_a_reason(sandbox, name):
    out = soulwire(sandbox, name)
    assert out.returncode == 2 and out.stdout == ""
    assert (
        out.stderr.startswith(f"soulwire: `{name}` is not provided: ") and len(out.stderr.splitlines()) == 1
    )


def test_agent_and_agent_file_are_exclusive(sandbox):
    out = soulwire(sandbox, "--print", "-p", "x", "--agent", "okabe", "--agent-file", "a.yaml")
    assert out.returncode == 2 and "not allowed with argument" in out.stderr
