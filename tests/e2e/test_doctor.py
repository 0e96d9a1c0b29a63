"""`soulwire doctor` against real files, a real MCP server and a real HTTP endpoint standing in
for a provider: each check reports what it found, each problem its fix, `--fix` repairs the
session store and `--json` is one object a machine can read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.wire_client import Sandbox

SOULWIRE = str(Path(sys.executable).with_name("soulwire"))
TINY_SERVER = str(Path(__file__).resolve().parents[1] / "mcp_servers" / "tiny_server.py")


def doctor(
    sandbox: Sandbox, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SOULWIRE, "doctor", *args], capture_output=True, text=True,
                          env={**sandbox.env(), **(env or {})}, cwd=sandbox.work, timeout=90)  # fmt: skip


def checks(sandbox: Sandbox, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = doctor(sandbox, "--json", *args, env=env)
    assert out.stderr == "", out.stderr
    return json.loads(out.stdout)


def test_config_values_say_where_they_came_from(sandbox: Sandbox):
    sandbox.write()
    sandbox.share.mkdir(parents=True)
    sandbox.share.chmod(0o700)
    (sandbox.share / "config.toml").write_text(
        'default_model = "m"\n[models.m]\nprovider = "p"\nmodel = "x"\n'
        '[providers.p]\ntype = "_echo"\napi_key = "sk-secret-value-1234"\n',
        encoding="utf-8",
    )
    found = checks(sandbox, "--offline", env={"SOULWIRE_MODEL_NAME": "other"})
    config = found["config"]
    assert config["ok"] and config["detail"] == str(sandbox.share / "config.toml")
    rows = {row["key"]: row for row in config["data"]}
    assert rows["default_model"] == {
        "key": "default_model",
        "value": "m",
        "from": str(sandbox.share / "config.toml"),
    }
    assert rows["providers.p.api_key"]["value"] == "set (20 characters)"  # never the key itself
    assert rows["SOULWIRE_MODEL_NAME"] == {
        "key": "SOULWIRE_MODEL_NAME",
        "value": "other",
        "from": "environment",
    }
    assert found["model"]["status"] == "ok" and "offline, no key needed" in found["model"]["detail"]
    assert "sk-secret-value-1234" not in json.dumps(found)


def test_a_broken_config_fails_with_its_fix(sandbox: Sandbox):
    sandbox.write()
    bad = sandbox.root / "bad.toml"
    bad.write_text('default_model = "nope"\n', encoding="utf-8")
    out = doctor(sandbox, "--offline", "--config-file", str(bad))
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert f"FAIL  config: {bad}: default_model: 'nope' is not a key of [models]" in lines
    assert f"      fix: edit {bad}: the message names the key" in lines
    assert lines[-1].endswith("problems found") or lines[-1].endswith("problem found")


def test_no_model_says_how_to_configure_one(sandbox: Sandbox):
    sandbox.write()
    found = checks(sandbox, "--offline")
    assert found["model"]["status"] == "fail"
    assert found["model"]["fix"].startswith("Export an API key (KIMI_API_KEY")


class _Models(BaseHTTPRequestHandler):
    accepted = "sk-good-key-000"
    seen: list[dict[str, str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization", "")})
        ok = self.headers.get("Authorization") == f"Bearer {self.accepted}"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"data": []}' if ok else b'{"error": "bad key"}')


@pytest.fixture
def models_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_the_key_is_tried_with_one_cheap_call_unless_offline(sandbox: Sandbox, models_endpoint: str):
    sandbox.write()
    _Models.seen.clear()
    env = {"OPENAI_BASE_URL": models_endpoint, "OPENAI_API_KEY": "sk-good-key-000"}
    good = checks(sandbox, env=env)["model"]
    assert good["status"] == "ok" and good["detail"].endswith("the provider accepted the key")
    assert _Models.seen == [{"path": "/v1/models", "auth": "Bearer sk-good-key-000"}]
    bad = checks(sandbox, env={**env, "OPENAI_API_KEY": "sk-revoked-key-1"})["model"]
    assert bad["status"] == "fail" and "HTTP 401" in bad["detail"] and "replace it" in bad["fix"]
    offline = checks(sandbox, "--offline", env=env)["model"]
    assert offline["status"] == "skip" and len(_Models.seen) == 2  # no call


def _session(sandbox: Sandbox, name: str) -> Path:
    directory = sandbox.share / "sessions" / "0123abcd" / name
    directory.mkdir(parents=True)
    return directory


def test_the_session_store_is_checked_and_repaired_with_fix(sandbox: Sandbox):
    sandbox.write()
    healthy = _session(sandbox, "healthy")
    (healthy / "context.jsonl").write_text('{"role": "user", "content": "a"}\n', encoding="utf-8")
    torn = _session(sandbox, "torn")
    good = '{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n'
    (torn / "context.jsonl").write_text(good + '{"role": "assis', encoding="utf-8")
    (torn / "wire.jsonl").write_text('{"a": 1}\nnot json\n{"b": 2}\n', encoding="utf-8")
    (torn / "state.json").write_text("{", encoding="utf-8")

    found = checks(sandbox, "--offline")["sessions"]
    assert found["status"] == "warn" and found["detail"].startswith("3 damaged files in 2 sessions")
    assert found["fix"].startswith("run soulwire doctor --fix")
    assert (torn / "context.jsonl").read_text(encoding="utf-8").endswith('{"role": "assis')  # untouched

    fixed = checks(sandbox, "--offline", "--fix")["sessions"]
    assert fixed["status"] == "ok" and fixed["detail"].startswith("repaired 3 files")
    assert (torn / "context.jsonl").read_text(encoding="utf-8") == good
    assert (torn / "wire.jsonl").read_text(encoding="utf-8") == '{"a": 1}\n{"b": 2}\n'
    assert (torn / "context.jsonl.damaged").read_text(encoding="utf-8") == good + '{"role": "assis'
    assert not (torn / "state.json").exists() and (torn / "state.json.damaged").read_text() == "{"
    assert checks(sandbox, "--offline")["sessions"]["detail"] == "2 sessions, no damaged files"


def test_mcp_servers_are_started_and_their_tools_listed(sandbox: Sandbox):
    sandbox.write()
    sandbox.share.mkdir(parents=True)
    servers = {
        "tiny": {"command": sys.executable, "args": [TINY_SERVER, "tiny"]},
        "broken": {"command": str(sandbox.root / "no-such-server")},
    }
    (sandbox.share / "mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    out = doctor(sandbox, "--json", "--offline")
    found = json.loads(out.stdout)["mcp"]
    by_name = {s["name"]: s for s in found["data"]}
    assert by_name["tiny"]["status"] == "connected" and "shout" in by_name["tiny"]["tools"]
    assert by_name["broken"]["status"] == "failed" and by_name["broken"]["error"]
    assert found["status"] == "fail" and found["detail"].startswith("broken: ")
    assert "mcp.json" in found["fix"]


def test_tools_extras_and_terminal_are_reported(sandbox: Sandbox):
    sandbox.write()
    found = checks(sandbox, "--offline", env={"NO_COLOR": "1"})
    assert found["ripgrep"]["ok"] and Path(found["ripgrep"]["detail"]).name == "rg"
    assert "dev" not in found["extras"]["data"]  # the extras a user would install, not ours
    assert found["terminal"]["data"]["tty"] is False and found["terminal"]["data"]["no_color"] is True
    text = doctor(sandbox, "--offline").stdout
    assert "\x1b[" not in text  # not a terminal: no colour codes
    assert text.splitlines()[0].startswith(("ok    config:", "FAIL  config:"))


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_colour_only_in_a_terminal_without_no_color(sandbox: Sandbox, no_color: bool):
    import os
    import pty

    sandbox.write()
    leader, follower = pty.openpty()
    env = {**sandbox.env(), "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    if no_color:
        env["NO_COLOR"] = "1"
    with os.fdopen(leader, "rb", buffering=0) as screen:
        proc = subprocess.Popen([SOULWIRE, "doctor", "--offline"], stdout=follower, stderr=subprocess.PIPE,
                                env=env, cwd=sandbox.work)  # fmt: skip
        os.close(follower)
        output = b""
        while True:
            try:
                chunk = screen.read(4096)
            except OSError:  # the terminal closed: the process is done writing
                break
            if not chunk:
                break
            output += chunk
        proc.wait(timeout=60)
    text = output.decode()
    assert "config:" in text and "terminal: a terminal" in text
    assert ("\x1b[" in text) is not no_color


@pytest.mark.usefixtures("bwrap")
def test_the_overlay_is_reported_with_its_fallback_in_one_line(sandbox: Sandbox, tmp_path: Path):
    sandbox.config_extra = {"checkpoints": {"enabled": True}}
    sandbox.write()
    config = ("--config-file", str(sandbox.config_path))
    found = checks(sandbox, "--offline", *config)["overlay"]
    assert found["status"] == "ok" and found["data"]["available"] is True, found
    assert found["data"]["bwrap"] and found["data"]["nsenter"] and found["data"]["fallback"] is None
    assert "--overlay ask|commit|discard" in found["detail"]

    bin_dir = tmp_path / "bin"  # bubblewrap but no nsenter: the sandbox works, the overlay cannot
    bin_dir.mkdir()
    for tool in ("bwrap", "true", "sh"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    env = {"PATH": str(bin_dir)}
    found = checks(sandbox, "--offline", *config, env=env)["overlay"]
    assert found["status"] == "warn" and found["ok"] and found["data"]["fallback"] == "checkpoints"
    lines = doctor(sandbox, "--offline", *config, env=env).stdout.splitlines()
    assert [line for line in lines if line.startswith("WARN  overlay:")] == [
        "WARN  overlay: not available: `nsenter` (util-linux) is not installed; --overlay falls back to "
        "checkpoints: turns write the work dir directly, each recorded (rewind works)"
    ]
