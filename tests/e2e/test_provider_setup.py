"""Choosing a real model without a config file: environment variables alone, `--model`,
`--thinking`, the -32001 hint when nothing is set, and print mode's exit codes (spec §8.1)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, error_reply, stream_reply
from tests.wire_client import WireProcess, engine_env

KEY = "sk-env-only-SECRET-42"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[Callable[..., WireProcess]]:
    """Start `soulwire --wire` with no config file: `wire(env, *args)`."""
    started: list[WireProcess] = []

    def start(env: dict[str, str], *args: str) -> WireProcess:
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        argv = [sys.executable, "-m", "soulwire", "--wire", "--work-dir", str(work), *args]
        started.append(WireProcess(argv, {**engine_env(tmp_path), **env}, work))
        return started[-1]

    yield start
    for process in started:
        process.close()


@pytest.mark.parametrize(
    ("variables", "args", "provider", "model", "path"),
    [
        ({"KIMI_API_KEY": KEY}, (), "kimi", "kimi-k2.6", "/v1/chat/completions"),
        (
            {"OPENAI_API_KEY": KEY},
            ("--model", "my-local-model"),
            "openai_legacy",
            "my-local-model",
            "/v1/chat/completions",
        ),
    ],
)
def test_an_api_key_in_the_environment_is_enough(wire, server, variables, args, provider, model, path):
    base = "KIMI_BASE_URL" if provider == "kimi" else "OPENAI_BASE_URL"
    engine = wire({**variables, base: server.url + "/v1"}, *args)
    server.queue(stream_reply(provider, Answer("m-env", text=["hello from env"])))
    _, response = engine.prompt("hi")
    assert response["result"] == {"status": "finished"}, response
    request = server.requests[0]
    assert request.path == path and request.body["model"] == model
    assert {k.lower(): v for k, v in request.headers.items()}["authorization"] == f"Bearer {KEY}"
    if provider == "kimi":  # a thinking-capable default, off unless asked for
        assert request.body["thinking"] == {"type": "disabled"}


def test_thinking_flag_switches_kimi_thinking_on(wire, server):
    engine = wire({"KIMI_API_KEY": KEY, "KIMI_BASE_URL": server.url + "/v1"}, "--thinking")
    server.queue(stream_reply("kimi", Answer("m", thinking=["hm"], text=["ok"])))
    events, response = engine.prompt("think")
    assert response["result"] == {"status": "finished"}
    assert server.requests[0].body["thinking"] == {"type": "enabled"}
    assert [p["params"]["payload"]["type"] for p in events if p["params"]["type"] == "ContentPart"] == [
        "think",
        "text",
    ]


def test_nothing_configured_explains_how_to_configure(wire):
    engine = wire({})
    _, response = engine.prompt("hi")
    error = response["error"]
    assert error["code"] == -32001
    assert error["message"].startswith("LLM is not set")
    assert "OPENAI_API_KEY" in error["message"] and "config.toml" in error["message"]


def test_a_configured_provider_without_key_names_the_variable(wire):
    config = {
        "default_model": "k",
        "models": {"k": {"provider": "moon", "model": "kimi-k2.6"}},
        "providers": {"moon": {"type": "kimi"}},
    }
    engine = wire({}, "--config", json.dumps(config))
    _, response = engine.prompt("hi")
    assert response["error"]["code"] == -32001
    assert "KIMI_API_KEY" in response["error"]["message"]


def run_print(tmp_path: Path, server: FakeLLMServer) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {**engine_env(tmp_path), "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.url + "/v1"}
    argv = [sys.executable, "-m", "soulwire", "--print", "-p", "hi", "--work-dir", str(work)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_print_mode_exit_codes(tmp_path, server):
    server.queue(stream_reply("openai_legacy", Answer("m", text=["printed answer"])))
    done = run_print(tmp_path, server)
    assert (done.returncode, done.stdout.strip()) == (0, "printed answer"), done.stderr

    server.queue(*[error_reply("openai_legacy", 503, "busy") for _ in range(3)])
    done = run_print(tmp_path, server)
    assert done.returncode == 75, done.stderr  # retryable: worth running again later
    assert "HTTP 503" in done.stderr

    server.queue(error_reply("openai_legacy", 401, f"bad key {KEY}"))
    done = run_print(tmp_path, server)
    assert done.returncode == 1, done.stderr  # permanent
    assert "Authentication failed" in done.stderr and KEY not in done.stderr + done.stdout


def test_401_from_an_oauth_provider_is_an_expired_login(wire, server):
    config = {
        "default_model": "k",
        "models": {"k": {"provider": "moon", "model": "kimi-for-coding"}},
        "providers": {
            "moon": {"type": "kimi", "base_url": server.url + "/v1", "oauth": {"storage": "file", "key": "x"}}
        },
    }
    engine = wire({}, "--config", json.dumps(config))
    server.queue(error_reply("kimi", 401, "token expired"))
    _, response = engine.prompt("hi")
    assert response["error"] == {
        "code": -32004,
        "message": "Authentication failed. Your login session may have expired. "
        'Please run "/login" to sign in again.',
        "data": None,
    }


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_an_sdk_that_cannot_be_imported_is_a_clear_provider_error(tmp_path, server, sdk):
    """The engine sets the SDK up from start-up on (its preload); when the SDK's package is
    broken, that fails in the background and the prompt says what failed (-32003, the SDK's
    own ImportError), every time, instead of an internal error — and the engine lives on."""
    broken = tmp_path / "broken" / sdk
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(f'raise ImportError("the {sdk} package is broken here")\n')
    kind = "anthropic" if sdk == "anthropic" else "openai_legacy"
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "default_model": "m",
                "models": {"m": {"provider": "p", "model": "test-model", "max_context_size": 100_000}},
                "providers": {"p": {"type": kind, "base_url": server.url + "/v1", "api_key": KEY}},
            }
        )
    )
    (tmp_path / "work").mkdir()
    argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(config), "--work-dir"]
    env = {**engine_env(tmp_path), "PYTHONPATH": str(tmp_path / "broken")}
    engine = WireProcess([*argv, str(tmp_path / "work")], env, tmp_path / "work")
    try:
        assert "result" in engine.initialize()
        for _ in range(2):
            _, response = engine.prompt("hi", timeout=60)
            error = response["error"]
            assert error["code"] == -32003, error
            assert f"Cannot set up the {sdk!r} SDK for provider 'p'" in error["message"]
            assert f"the {sdk} package is broken here" in error["message"]
            assert KEY not in error["message"]
        assert not server.requests
    finally:
        assert engine.close() == 0
    assert "Traceback" not in "".join(engine.stderr_lines)
