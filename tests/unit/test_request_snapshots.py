"""The exact request body each adapter sends, pinned per case of one shared table (messages,
tool results, thinking with signatures, tools schema, thinking parameters, media), captured by
a real HTTP server from the real SDKs. Refresh after an intended change with
`SOULWIRE_UPDATE_SNAPSHOTS=1 pytest tests/unit/test_request_snapshots.py` and review the diff."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, run_then_close, stream_reply

from soulwire.config.model import Config
from soulwire.llm.errors import LLMNotSupported
from soulwire.llm.message import Message
from soulwire.llm.provider import ChatRequest, StreamResult, ToolSpec
from soulwire.llm.registry import resolve_model
from soulwire.wire.types import FunctionCall, ImageURLPart, MediaURL, TextPart, ThinkPart, ToolCall

SNAPSHOTS = Path(__file__).parent.parent / "snapshots" / "requests"
UPDATE = os.environ.get("SOULWIRE_UPDATE_SNAPSHOTS") == "1"
ADAPTERS = ("kimi", "openai_legacy", "openai_responses", "anthropic", "gemini")
STREAM_SHAPE = {"gemini": "openai_legacy"}  # Gemini's OpenAI endpoint streams Chat Completions
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAcCBlCwAAAABJRU5Er"
    "kJggg=="
)

SHELL = ToolSpec(
    "Shell",
    "Run a bash command.",
    {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "integer", "default": 60}},
        "required": ["command"],
    },
)
READ = ToolSpec(
    "ReadFile",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)

# pytest-xdist (--dist loadgroup): its module fixture (a fake provider server) is started once.
pytestmark = pytest.mark.xdist_group("request-snapshots")


def call(call_id: str, name: str, arguments: str | None) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def tool(call_id: str, *parts: Any) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=list(parts))


@dataclass
class Case:
    history: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    thinking: bool = False
    env: dict[str, str] = field(default_factory=dict)


CASES: dict[str, Case] = {
    "plain": Case([Message(role="user", content="hi")]),
    "tools_and_thinking": Case(
        [
            Message(role="user", content="list the files"),
            Message(
                role="assistant",
                content=[
                    ThinkPart(think="I should look.", encrypted="rs_9|ENCRYPTED-BLOB"),
                    TextPart(text="Looking."),
                ],
                tool_calls=[call("call_1", "Shell", '{"command": "ls"}'), call("call_2", "ReadFile", None)],
            ),
            tool(
                "call_1",
                TextPart(text="<system>Command executed successfully.</system>"),
                TextPart(text="a.txt\n"),
            ),
            tool(
                "call_2",
                TextPart(text="<system>ERROR: Error validating JSON arguments: 'path' is required</system>"),
            ),
            Message(role="user", content="thanks, go on"),
        ],
        tools=[SHELL, READ],
        thinking=True,
    ),
    "media": Case(
        [
            Message(
                role="user",
                content=[TextPart(text="what is this?"), ImageURLPart(image_url=MediaURL(url=PNG))],
            ),
            Message(
                role="assistant",
                content="Let me open the other one.",
                tool_calls=[call("call_3", "ReadMediaFile", '{"path": "b.png"}')],
            ),
            tool(
                "call_3",
                TextPart(text="<system>Tool returned non-text content.</system>"),
                ImageURLPart(image_url=MediaURL(url="https://example.com/b.png")),
            ),
        ],
        tools=[READ],
    ),
    "tool_media": Case(  # what ReadMediaFile returns, as the engine hands it to the model
        [
            Message(role="user", content="look at shot.png"),
            Message(
                role="assistant",
                content="",
                tool_calls=[call("call_4", "ReadMediaFile", '{"path": "shot.png"}')],
            ),
            tool(
                "call_4",
                TextPart(text="<system>Loaded image file `/w/shot.png` (image/png, 70 bytes).</system>"),
                TextPart(text='<image path="/w/shot.png">'),
                ImageURLPart(image_url=MediaURL(url=PNG)),
                TextPart(text="</image>"),
            ),
        ],
        tools=[READ],
    ),
    "system_note_and_generation_env": Case(
        [
            Message(role="user", content="hi"),
            Message(role="assistant", content=[ThinkPart(think="unsigned thought"), TextPart(text="hello")]),
            Message(role="system", content="AGENTS.md was updated."),
            Message(role="user", content="go on"),
        ],
        thinking=True,
        env={
            "KIMI_MODEL_TEMPERATURE": "0.6",
            "KIMI_MODEL_TOP_P": "0.95",
            "KIMI_MODEL_MAX_COMPLETION_TOKENS": "4096",
            "KIMI_MODEL_THINKING_KEEP": "all",
            "SOULWIRE_REASONING_EFFORT": "high",
            "SOULWIRE_MAX_TOKENS": "8192",
        },
    ),
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def config(kind: str, url: str, capabilities: list[str]) -> Config:
    return Config.model_validate(
        {
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": "test-model", "capabilities": capabilities}},
            "providers": {
                "p": {
                    "type": kind,
                    "base_url": url if kind == "anthropic" else url + "/v1",
                    "api_key": "sk-x",
                }
            },
        }
    )


def send(server: FakeLLMServer, kind: str, case: Case, capabilities: list[str]) -> list[Any]:
    model = resolve_model(
        config(kind, server.url, capabilities), model_alias=None, thinking=case.thinking, env=case.env
    )
    assert model is not None
    request = ChatRequest("You are a test.", case.history, case.tools, thinking=model.thinking)
    server.queue(stream_reply(STREAM_SHAPE.get(kind, kind), Answer("m", text=["ok"])))

    async def run() -> list[Any]:
        return [part async for part in model.provider.stream(request, StreamResult())]

    return run_then_close(model.provider, run)


@pytest.mark.parametrize("kind", ADAPTERS)
@pytest.mark.parametrize("case_name", list(CASES))
def test_request_body_matches_snapshot(server: FakeLLMServer, kind: str, case_name: str):
    server.forget_requests()
    parts = send(server, kind, CASES[case_name], ["thinking", "image_in"])
    assert [p.text for p in parts] == ["ok"]
    (recorded,) = server.requests
    actual = {"path": recorded.path, "body": recorded.body}
    path = SNAPSHOTS / f"{case_name}.{kind}.json"
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"new snapshot written: {path.name}; review it and run again")
    assert actual == json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("kind", ADAPTERS)
def test_media_the_model_cannot_take_is_refused_before_sending(server: FakeLLMServer, kind: str):
    server.forget_requests()
    with pytest.raises(LLMNotSupported, match="image_in"):
        send(server, kind, CASES["media"], ["thinking"])
    assert server.requests == []


@pytest.mark.parametrize("kind", ("openai_responses", "anthropic"))
def test_media_the_api_cannot_carry_is_refused_with_the_reason(server: FakeLLMServer, kind: str):
    from soulwire.wire.types import AudioURLPart

    server.forget_requests()
    case = Case(
        [
            Message(
                role="user", content=[AudioURLPart(audio_url=MediaURL(url="data:audio/wav;base64,UklGRg=="))]
            )
        ]
    )
    with pytest.raises(LLMNotSupported, match="cannot carry audio_url"):
        send(server, kind, case, ["audio_in"])
    assert server.requests == []


def test_chat_completions_carry_video_and_audio_in_the_shapes_kimi_and_vllm_accept():
    from soulwire.llm.convert import openai_chat_messages
    from soulwire.wire.types import AudioURLPart, VideoURLPart

    video = VideoURLPart(video_url=MediaURL(url="data:video/mp4;base64,AAAA"))
    audio = AudioURLPart(audio_url=MediaURL(url="data:audio/wav;base64,UklGRg=="))
    remote_audio = AudioURLPart(audio_url=MediaURL(url="https://example.com/a.ogg"))
    user = Message(role="user", content=[TextPart(text="watch"), video, audio, remote_audio])
    (message,) = openai_chat_messages("", [user], reasoning_key=None, model_name="m")
    assert message["content"][1:] == [
        {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "audio_url", "audio_url": {"url": "https://example.com/a.ogg"}},
    ]


def typed_call_body(server: FakeLLMServer, kind: str, case: Case) -> tuple[Any, dict[str, str]]:
    """What the SDK's typed `create(...)` sends for the adapter's body (its transform pass
    over every message and tool schema included): the reference the adapter must match."""
    model = resolve_model(
        config(kind, server.url, ["thinking", "image_in"]),
        model_alias=None,
        thinking=case.thinking,
        env=case.env,
    )
    assert model is not None
    provider: Any = model.provider
    request = ChatRequest("You are a test.", case.history, case.tools, thinking=model.thinking)
    built = provider.request_body(request)
    body, extra = built if isinstance(built, tuple) else (built, {})
    server.queue(stream_reply(kind, Answer("m", text=["ok"])))

    async def run() -> None:
        client = provider._client.get()
        if kind == "openai_responses":
            stream = await client.responses.create(**body, stream=True)
        elif kind == "anthropic":
            stream = await client.messages.create(**body, stream=True)
        else:
            stream = await client.chat.completions.create(**body, stream=True, extra_body=extra or None)
        async with stream:
            async for _ in stream:
                pass

    server.forget_requests()
    run_then_close(provider, run)
    (recorded,) = server.requests
    return recorded.body, recorded.headers


# Headers that differ between any two requests, whoever sends them.
VOLATILE_HEADERS = {"content-length", "x-stainless-retry-count", "x-stainless-read-timeout"}


@pytest.mark.parametrize("kind", ("kimi", "openai_legacy", "openai_responses", "anthropic"))
@pytest.mark.parametrize("case_name", list(CASES))
def test_the_body_sent_untransformed_is_what_the_typed_sdk_call_sends(
    server: FakeLLMServer, kind: str, case_name: str
):
    """The OpenAI and Anthropic adapters hand the SDK their body as it is (through the SDK's
    generic `post`), skipping its typed call's transform pass and typed stream; the server
    must receive the same JSON and headers as through the typed call."""
    case = CASES[case_name]
    server.reset()  # replies queued by the refusal tests above were never taken
    expected_body, expected_headers = typed_call_body(server, kind, case)
    server.forget_requests()
    parts = send(server, kind, case, ["thinking", "image_in"])
    assert [p.text for p in parts] == ["ok"]
    (recorded,) = server.requests
    assert recorded.body == expected_body
    assert len(json.dumps(recorded.body)) > 100  # a real body, not two empty ones
    strip = lambda headers: {k.lower(): v for k, v in headers.items() if k.lower() not in VOLATILE_HEADERS}  # noqa: E731
    sent = strip(recorded.headers)
    assert sent == strip(expected_headers)
    assert sent["authorization"] == "Bearer sk-x"
    assert kind != "anthropic" or sent["anthropic-version"]
