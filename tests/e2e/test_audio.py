"""Audio content parts (`audio_url`) in a prompt: passed on to a model that takes audio, and
for any other model replaced by a clear note — never a refusal of the prompt. The real engine
against a real HTTP server speaking Chat Completions, so the request body is what we check."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, stream_reply
from tests.wire_client import WireProcess, engine_env

WAV = "data:audio/wav;base64," + base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()
PROMPT = [{"type": "text", "text": "what is said here?"}, {"type": "audio_url", "audio_url": {"url": WAV}}]


def engine_argv(tmp_path: Path, server: FakeLLMServer, capabilities: list[str], model: str) -> list[str]:
    """A `--wire` engine on a model of the fake server with these capabilities."""
    (tmp_path / "work").mkdir(exist_ok=True)
    config = {
        "default_model": "m",
        "models": {
            "m": {"provider": "p", "model": model, "max_context_size": 100_000, "capabilities": capabilities}
        },
        "providers": {"p": {"type": "openai_legacy", "base_url": server.url + "/v1", "api_key": "k"}},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(tmp_path / "config.json")]
    return [*argv, "--work-dir", str(tmp_path / "work")]


def prompt_once(tmp_path: Path, argv: list[str], prompt: Any) -> None:
    wire = WireProcess(argv, engine_env(tmp_path), tmp_path)
    try:
        wire.initialize(protocol_version="1.10", client={"name": "t"})
        _, response = wire.prompt(prompt, timeout=30)
    finally:
        wire.close()
    assert response.get("result") == {"status": "finished"}, response


def run_prompt(tmp_path: Path, capabilities: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with FakeLLMServer() as server:
        server.queue(stream_reply("openai_legacy", Answer("m1", text=["heard"])))
        prompt_once(tmp_path, engine_argv(tmp_path, server, capabilities, "ear-model"), PROMPT)
        [request] = server.requests
    [context] = tmp_path.glob(".soulwire/sessions/*/*/context.jsonl")
    records = [json.loads(line) for line in context.read_text().splitlines()]
    return request.body, records


def user_content(body: dict[str, Any]) -> list[dict[str, Any]]:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


@pytest.mark.parametrize("capabilities", [[], ["image_in"]])
def test_a_model_without_audio_gets_a_note_instead(tmp_path: Path, capabilities: list[str]):
    body, records = run_prompt(tmp_path, capabilities)
    content = user_content(body)
    assert content[0] == {"type": "text", "text": "what is said here?"}
    assert content[1]["type"] == "text" and "audio clip" in content[1]["text"]
    assert "ear-model" in content[1]["text"] and "does not take audio" in content[1]["text"]
    assert "audio" not in json.dumps([p for p in content if p["type"] != "text"])
    # The session keeps the audio itself (a later model that hears can have it).
    [user] = [r for r in records if r["role"] == "user"]
    assert user["content"][1] == {"type": "audio_url", "audio_url": {"url": WAV, "id": None}}


def test_a_model_with_audio_in_receives_the_audio(tmp_path: Path):
    body, _ = run_prompt(tmp_path, ["audio_in"])
    content = user_content(body)
    assert content[1]["type"] == "input_audio"
    assert content[1]["input_audio"]["format"] == "wav"
    assert content[1]["input_audio"]["data"] == WAV.split(",", 1)[1]


def test_a_resumed_session_with_audio_in_its_history_still_gets_the_note(tmp_path: Path):
    """The engine tracks whether its context holds audio as it loads it, not only as prompts
    come in: the audio of an earlier process's turn is replaced for a model without audio_in."""
    with FakeLLMServer() as server:
        server.queue(stream_reply("openai_legacy", Answer("m1", text=["heard"])))
        server.queue(stream_reply("openai_legacy", Answer("m2", text=["again"])))
        argv = [*engine_argv(tmp_path, server, [], "deaf-model"), "--session", "heard-once"]
        for prompt in (PROMPT, "and now?"):
            prompt_once(tmp_path, argv, prompt)  # a new engine process each time
        first, second = server.requests
    for body in (first.body, second.body):
        content = user_content(body)
        assert content[1]["type"] == "text" and "audio clip" in content[1]["text"]
        assert all(part["type"] == "text" for part in content)
