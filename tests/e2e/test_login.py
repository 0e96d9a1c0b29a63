"""`soulwire login` / `logout` as a new user runs them, against a fake platform on 127.0.0.1:
the OAuth device flow (token file 0600, managed config), a real `--print` run with the login's
token, logout; and the guided API-key setup (the key checked with one call, a refused key
leaving the config alone, a missing answer when not in a terminal)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from tests.fake_services import FakePlatform
from tests.wire_client import WireProcess, payloads


def soulwire(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
    base.update({"HOME": str(home), "SOULWIRE_SHARE_DIR": str(home / "share"), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "soulwire", *args],
        env=base,
        cwd=home,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def test_device_flow_login_then_a_real_run_then_logout(tmp_path: Path):
    share = tmp_path / "share"
    share.mkdir()
    (share / "config.toml").write_text("# my settings\ndefault_yolo = false\n")
    with FakePlatform(pending_polls=1) as platform:
        env = {"SOULWIRE_OAUTH_HOST": platform.url, "SOULWIRE_CODE_BASE_URL": f"{platform.url}/v1"}
        login = soulwire(tmp_path, "login", "--json", "--no-browser", env=env)
        assert login.returncode == 0, login.stderr
        events = [json.loads(line) for line in login.stdout.splitlines()]
        assert [e["type"] for e in events] == ["info", "verification_url", "waiting", "success"]
        assert events[1]["data"] == {
            "verification_url": f"{platform.url}/device?user_code=ABCD-1234",
            "user_code": "ABCD-1234",
        }
        grants = [r.body["grant_type"] for r in platform.requests if r.path == "/api/oauth/token"]
        assert grants == ["urn:ietf:params:oauth:grant-type:device_code"] * 2  # pending, then approved
        assert platform.requests[0].headers["x-msh-device-id"] == (share / "device_id").read_text()

        token_file = share / "credentials" / "kimi-code.json"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert json.loads(token_file.read_text())["access_token"] == "access-1"
        text = (share / "config.toml").read_text()
        assert text.startswith("# my settings\n") and "access-1" not in text  # the token stays out
        config = tomllib.loads(text)
        assert config["default_model"] == "kimi-code/kimi-for-coding"
        assert config["providers"]["managed:kimi-code"]["oauth"] == {
            "storage": "file",
            "key": "oauth/kimi-code",
        }
        assert config["services"]["moonshot_search"]["base_url"] == f"{platform.url}/v1/search"

        run = soulwire(tmp_path, "--print", "-p", "hi", env=env)
        assert run.returncode == 0, run.stderr
        assert "hello, holder of access-1" in run.stdout

        logout = soulwire(tmp_path, "logout", "--json")
        assert logout.returncode == 0
        assert json.loads(logout.stdout) == {"type": "success", "message": "Logged out successfully."}
    assert not token_file.exists()
    config = tomllib.loads((share / "config.toml").read_text())
    assert config["default_model"] == "" and not config.get("models") and not config.get("services")
    assert config["default_yolo"] is False


def test_guided_setup_checks_the_key_and_writes_a_working_config(tmp_path: Path):
    share = tmp_path / "share"
    with FakePlatform() as platform:
        base = f"{platform.url}/v1"
        refused = soulwire(
            tmp_path,
            "login",
            "--provider",
            "openai-compatible",
            "--base-url",
            base,
            "--api-key",
            "sk-bad",
            "--model",
            "m1",
        )
        assert refused.returncode == 1
        assert "the key was refused" in refused.stderr and "Traceback" not in refused.stderr
        assert not (share / "config.toml").exists()

        no_model = soulwire(
            tmp_path, "login", "--provider", "openai-compatible", "--base-url", base, "--api-key", "sk-good"
        )
        assert no_model.returncode == 1 and "--model is needed" in no_model.stderr

        ok = soulwire(
            tmp_path,
            "login",
            "--provider",
            "openai-compatible",
            "--base-url",
            base,
            "--api-key",
            "sk-good",
            "--model",
            "kimi-for-coding",
        )
        assert ok.returncode == 0, ok.stderr
        models_calls = [r for r in platform.requests if r.path == "/v1/models"]
        assert [r.headers["authorization"] for r in models_calls] == [
            "Bearer sk-bad",
            "Bearer sk-good",
            "Bearer sk-good",
        ]
        config = tomllib.loads((share / "config.toml").read_text())
        assert config["default_model"] == "openai-compatible/kimi-for-coding"
        assert config["providers"]["openai-compatible"] == {
            "type": "openai_legacy",
            "api_key": "sk-good",
            "base_url": base,
        }
        assert config["models"]["openai-compatible/kimi-for-coding"]["max_context_size"] == 262144
        assert stat.S_IMODE((share / "config.toml").stat().st_mode) == 0o600

        run = soulwire(tmp_path, "--print", "-p", "hi")
        assert run.returncode == 0, run.stderr
        assert "hello, holder of sk-good" in run.stdout


def test_login_usage_errors_exit_2(tmp_path: Path):
    bad = soulwire(tmp_path, "login", "--provider", "nope")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    helped = soulwire(tmp_path, "login", "--help")
    assert helped.returncode == 0 and "--provider" in helped.stdout and "device flow" in helped.stdout


def test_a_running_session_follows_and_refreshes_the_login_token(tmp_path: Path):
    share = tmp_path / "share"
    with FakePlatform(pending_polls=0) as platform:
        env = {"SOULWIRE_OAUTH_HOST": platform.url, "SOULWIRE_CODE_BASE_URL": f"{platform.url}/v1"}
        assert soulwire(tmp_path, "login", "--json", "--no-browser", env=env).returncode == 0
        base = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
        base.update({"HOME": str(tmp_path), "SOULWIRE_SHARE_DIR": str(share), **env})
        wire = WireProcess(
            [sys.executable, "-m", "soulwire", "--wire", "--work-dir", str(tmp_path)], base, tmp_path
        )
        token_file = share / "credentials" / "kimi-code.json"
        try:

            def answer() -> str:
                messages, response = wire.prompt("hi", timeout=30)
                assert response.get("result") == {"status": "finished"}, response
                return "".join(
                    p["text"] for p in payloads(messages, "ContentPart") if p.get("type") == "text"
                )

            assert answer() == "hello, holder of access-1"
            # Another process refreshed the token meanwhile: the session picks the new one up.
            stored = json.loads(token_file.read_text())
            platform.issued = 2
            token_file.write_text(
                json.dumps({**stored, "access_token": "access-2", "refresh_token": "refresh-2"})
            )
            assert answer() == "hello, holder of access-2"
            # About to expire: the session refreshes it itself before the request.
            token_file.write_text(
                json.dumps(
                    {
                        **stored,
                        "access_token": "access-2",
                        "refresh_token": "refresh-2",
                        "expires_at": time.time() + 30,
                    }
                )
            )
            assert answer() == "hello, holder of access-3"
        finally:
            wire.close()
    assert json.loads(token_file.read_text())["access_token"] == "access-3"


def test_in_a_terminal_login_asks_for_provider_key_and_model(tmp_path: Path):
    import pty
    import select

    with FakePlatform() as platform:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
        env.update({"HOME": str(tmp_path), "SOULWIRE_SHARE_DIR": str(tmp_path / "share"), "TERM": "dumb"})
        master, slave = pty.openpty()
        child = subprocess.Popen(
            [sys.executable, "-m", "soulwire", "login"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=tmp_path,
        )
        os.close(slave)
        seen = b""
        answers = [
            (b"Provider [1]: ", b"7\n"),  # openai-compatible
            (b"Base URL of the API: ", f"{platform.url}/v1\n".encode()),
            (b"API key for openai-compatible: ", b"sk-good\n"),
            (b"Model (number or id): ", b"1\n"),
        ]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            if answers and answers[0][0] in seen.rsplit(b"\n", 1)[-1]:
                os.write(master, answers.pop(0)[1])
            if child.poll() is not None and not ready:
                break
        os.close(master)
        assert child.wait(timeout=30) == 0, seen.decode(errors="replace")
    text = seen.decode(errors="replace")
    assert "1. Kimi Code (log in with the browser)" in text and "1. kimi-for-coding" in text
    assert "sk-good" not in text  # the key is not echoed
    config = tomllib.loads((tmp_path / "share" / "config.toml").read_text())
    assert config["default_model"] == "openai-compatible/kimi-for-coding"
    assert config["providers"]["openai-compatible"]["api_key"] == "sk-good"
