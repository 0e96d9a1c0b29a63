"""How each adapter classifies what goes wrong, through the real SDKs over real HTTP: what the
engine retries, what fails at once, what asks for compaction, and errors reported inside an
HTTP 200 stream."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from tests.fake_llm_server import FakeLLMServer, Reply, sse, sse_reply
from tests.provider_streams import PROVIDERS, error_reply, run_then_close

from soulwire.config.model import Config
from soulwire.llm.errors import (
    APIConnectionError,
    APIStatusError,
    ContextLengthExceededError,
    ProviderError,
)
from soulwire.llm.message import Message
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.registry import resolve_model
from soulwire.wire.types import ThinkPart, ToolCall, ToolCallPart

# pytest-xdist (--dist loadgroup): its module fixture (a fake provider server) is started once.
pytestmark = pytest.mark.xdist_group("provider-errors")

OVERFLOW = {
    "kimi": "Invalid request: Your request exceeded model token limit: 262144",
    "openai_legacy": "This model's maximum context length is 8192 tokens, you requested 9000 tokens.",
    "openai_responses": "Your input exceeds the context window of this model.",
    "anthropic": "prompt is too long: 210000 tokens > 200000 maximum",
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def model_at(kind: str, base_url: str) -> Any:
    """The one model of a `kind` provider at `base_url` (2 s to read each answer)."""
    config = Config.model_validate(
        {
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": "test-model"}},
            "providers": {"p": {"type": kind, "base_url": base_url, "api_key": "sk-x"}},
        }
    )
    model = resolve_model(config, model_alias=None, thinking=None, env={"SOULWIRE_LLM_TIMEOUT": "2"})
    assert model is not None
    return model


def call(kind: str, base_url: str) -> ProviderError:
    model = model_at(kind, base_url)
    request = ChatRequest("sys", [Message(role="user", content="hi")])

    async def run() -> ProviderError:
        try:
            async for _ in model.provider.stream(request, StreamResult()):
                pass
        except ProviderError as exc:
            return exc
        raise AssertionError("the stream did not fail")

    return run_then_close(model.provider, run)


def base(server: FakeLLMServer, kind: str) -> str:
    return server.url if kind == "anthropic" else server.url + "/v1"


@pytest.mark.parametrize("kind", PROVIDERS)
def test_context_overflow_is_recognised_for_compaction(server: FakeLLMServer, kind: str):
    server.queue(error_reply(kind, 400, OVERFLOW[kind]))
    error = call(kind, base(server, kind))
    assert isinstance(error, ContextLengthExceededError) and not error.retryable
    server.queue(error_reply(kind, 400, "tools[0].name: invalid"))
    error = call(kind, base(server, kind))
    assert type(error) is APIStatusError and not error.retryable and "tools[0].name" in str(error)


@pytest.mark.parametrize("kind", PROVIDERS)
def test_connection_refused_is_retryable(kind: str):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the call: nothing listens there
    error = call(kind, f"http://127.0.0.1:{port}" + ("" if kind == "anthropic" else "/v1"))
    assert isinstance(error, APIConnectionError) and error.retryable
    assert "Could not reach provider 'p'" in str(error)


def mid_stream_error(kind: str) -> Reply:
    if kind == "anthropic":
        body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return sse_reply([sse({"type": "ping"}, event="ping"), sse(body, event="error")])
    if kind == "openai_responses":
        failed = {
            "id": "resp_1",
            "status": "failed",
            "error": {"code": "server_error", "message": "Overloaded"},
        }
        return sse_reply(
            [
                sse(
                    {"type": "response.failed", "sequence_number": 0, "response": failed},
                    event="response.failed",
                )
            ]
        )
    return sse_reply([sse({"error": {"message": "Overloaded", "code": 502}})])


@pytest.mark.parametrize("kind", PROVIDERS)
def test_an_error_inside_a_200_stream_keeps_its_meaning(server: FakeLLMServer, kind: str):
    server.queue(mid_stream_error(kind))
    error = call(kind, base(server, kind))
    assert isinstance(error, APIStatusError) and error.retryable, repr(error)
    assert "Overloaded" in str(error)


def test_anthropic_overloaded_status_is_retried(server: FakeLLMServer):
    server.queue(error_reply("anthropic", 529, "Overloaded"))
    error = call("anthropic", server.url)
    assert isinstance(error, APIStatusError) and error.status_code == 529 and error.retryable


def test_a_responses_error_event_keeps_its_meaning(server: FakeLLMServer):
    """The Responses API's own `error` event (code and message at its top level, not under
    `error`) is the provider's error, classified by its code."""
    created = {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1"}}
    error = {
        "type": "error",
        "sequence_number": 1,
        "code": "server_error",
        "message": "Overloaded",
        "param": None,
    }
    server.queue(sse_reply([sse(created, event="response.created"), sse(error, event="error")]))
    raised = call("openai_responses", server.url + "/v1")
    assert isinstance(raised, APIStatusError) and raised.retryable, repr(raised)
    assert "Overloaded" in str(raised)


def stream_parts(server: FakeLLMServer, kind: str, chunks: list[bytes]) -> list[object]:
    """The parts the `kind` adapter makes of these SSE chunks, served as one reply."""
    server.queue(sse_reply(list(chunks)))
    model = model_at(kind, server.url if kind == "anthropic" else server.url + "/v1")

    async def run() -> list[object]:
        request = ChatRequest("sys", [Message(role="user", content="hi")])
        return [part async for part in model.provider.stream(request, StreamResult())]

    return run_then_close(model.provider, run)


def responses_parts(server: FakeLLMServer, events: list[dict[str, object]]) -> list[object]:
    """The parts the Responses adapter makes of these events (each sent as its own SSE)."""
    chunks = [sse({"sequence_number": n, **e}, event=str(e["type"])) for n, e in enumerate(events)]
    return stream_parts(server, "openai_responses", chunks)


def function_call(item_id: str, arguments: str = "") -> dict[str, object]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": f"call_{item_id}",
        "name": "Shell",
        "arguments": arguments,
    }


def test_responses_arguments_sent_only_with_the_finished_item_are_kept(server: FakeLLMServer):
    parts = responses_parts(
        server,
        [
            {"type": "response.output_item.added", "output_index": 0, "item": function_call("fc_1")},
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": function_call("fc_1", '{"a":1}'),
            },
            {"type": "response.completed", "response": {"id": "resp_1", "usage": None}},
        ],
    )
    call_part, arguments = parts
    assert isinstance(call_part, ToolCall) and call_part.id == "call_fc_1"
    assert isinstance(arguments, ToolCallPart) and arguments.arguments_part == '{"a":1}'


def test_responses_interleaved_tool_call_arguments_are_refused(server: FakeLLMServer):
    with pytest.raises(ProviderError, match="interleaved"):
        responses_parts(
            server,
            [
                {"type": "response.output_item.added", "output_index": 0, "item": function_call("fc_1")},
                {"type": "response.output_item.added", "output_index": 1, "item": function_call("fc_2")},
                {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{"},
            ],
        )


def anthropic_parts(server: FakeLLMServer, events: list[dict[str, object]]) -> list[object]:
    """The parts the Anthropic adapter makes of these events (each its own SSE, named by type)."""
    return stream_parts(server, "anthropic", [sse(e, event=str(e["type"])) for e in events])


def tool_use(index: int, call_id: str) -> dict[str, object]:
    block = {"type": "tool_use", "id": call_id, "name": "Shell", "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": block}


def test_anthropic_redacted_thinking_is_kept_to_send_back(server: FakeLLMServer):
    start = {
        "type": "message_start",
        "message": {"id": "msg_1", "usage": {"input_tokens": 3, "output_tokens": 0}},
    }
    redacted = {"type": "redacted_thinking", "data": "opaque-blob"}
    parts = anthropic_parts(
        server,
        [
            start,
            {"type": "content_block_start", "index": 0, "content_block": redacted},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_stop"},
        ],
    )
    (part,) = parts
    assert isinstance(part, ThinkPart) and part.think == "" and part.encrypted == "opaque-blob"


def test_anthropic_interleaved_tool_inputs_are_refused(server: FakeLLMServer):
    delta = {"type": "input_json_delta", "partial_json": "{"}
    with pytest.raises(ProviderError, match="interleaved"):
        anthropic_parts(
            server,
            [
                tool_use(0, "toolu_1"),
                tool_use(1, "toolu_2"),
                {"type": "content_block_delta", "index": 0, "delta": delta},
            ],
        )
