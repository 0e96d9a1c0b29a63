"""The real engine (`soulwire --wire`, a subprocess) against a real HTTP server on 127.0.0.1 that
speaks each provider's streaming format: text, thinking, parallel tool calls with argument
deltas, usage, retries (429 + Retry-After, 500 x3, a stall mid-stream), a malformed chunk, 401,
and no secret anywhere the user or the disk can see.

One engine and one server per provider serve all the scenarios of this module, in order."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import PROVIDERS, Answer, Call, error_reply, expected_usage, stream_reply
from tests.wire_client import WireProcess, engine_env, event_types, payloads

# pytest-xdist (--dist loadgroup): one engine per provider (the module fixture rig) serves
# every test here, in order.
pytestmark = pytest.mark.xdist_group("providers")

API_KEY = "sk-test-0123456789abcdef-SECRET"
HEADER_SECRET = "hdr-secret-ABCDEF987654"
ENDPOINTS = {
    "kimi": "/v1/chat/completions",
    "openai_legacy": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic": "/v1/messages",
}
EXT_READ = {
    "name": "ext_read",
    "description": "Read a file of the client",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


@dataclass
class Rig:
    provider: str
    server: FakeLLMServer
    wire: WireProcess
    share: Path
    seen: list[dict[str, Any]] = field(default_factory=list)

    def prompt(self, text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        self.server.forget_requests()
        events, response = self.wire.prompt(text, answer=answer_tool_call, timeout=30)
        self.seen.extend([*events, response])
        return events, response

    def body(self, index: int = -1) -> dict[str, Any]:
        return self.server.requests[index].body


def answer_tool_call(message: dict[str, Any]) -> dict[str, Any]:
    payload = message["params"]["payload"]
    path = json.loads(payload["arguments"])["path"]
    return {
        "tool_call_id": payload["id"],
        "return_value": {"is_error": False, "output": f"contents of {path}", "message": "", "display": []},
    }


def provider_config(kind: str, url: str) -> dict[str, Any]:
    return {
        "default_model": "m",
        "models": {
            "m": {
                "provider": "p",
                "model": "test-model",
                "max_context_size": 100_000,
                "capabilities": ["thinking"],
            }
        },
        "providers": {
            "p": {
                "type": kind,
                "base_url": url if kind == "anthropic" else url + "/v1",
                "api_key": API_KEY,
                "custom_headers": {"X-Api-Secret": HEADER_SECRET, "X-Client": "soulwire-tests"},
            }
        },
        "loop_control": {"max_retries_per_step": 3},
    }


@pytest.fixture(scope="module", params=PROVIDERS)
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    kind: str = request.param
    root = tmp_path_factory.mktemp(kind)
    (root / "work").mkdir()
    with FakeLLMServer() as server:
        config = root / "config.json"
        config.write_text(json.dumps(provider_config(kind, server.url)))
        argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(config)]
        wire = WireProcess(
            [*argv, "--work-dir", str(root / "work"), "--thinking"], engine_env(root), root / "work"
        )
        response = wire.initialize(protocol_version="1.10", external_tools=[EXT_READ])  # 1.10: StepRetry
        assert response["result"]["external_tools"]["accepted"] == ["ext_read"]
        yield Rig(kind, server, wire, root / ".soulwire")
        wire.close()


def texts(events: list[dict[str, Any]], kind: str = "text") -> list[str]:
    return [p[kind] for p in payloads(events, "ContentPart") if p["type"] == kind]


def test_text_usage_and_message_id(rig: Rig):
    answer = Answer(
        "msg-text-1", text=["Hello", " world"], usage={"input_other": 120, "output": 7, "cache_read": 30}
    )
    rig.server.queue(stream_reply(rig.provider, answer))
    events, response = rig.prompt("hi")
    assert response["result"] == {"status": "finished"}
    assert event_types(events) == [
        "TurnBegin",
        "StepBegin",
        "ContentPart",
        "ContentPart",
        "StatusUpdate",
        "TurnEnd",
    ]
    assert texts(events) == ["Hello", " world"]
    status = payloads(events, "StatusUpdate")[0]
    assert status["token_usage"] == expected_usage(rig.provider, answer)
    assert status["message_id"] == "msg-text-1"
    assert status["context_tokens"] == 150 and status["max_context_tokens"] == 100_000

    request = rig.server.requests[0]
    assert request.path == ENDPOINTS[rig.provider]
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["x-client"] == "soulwire-tests"
    assert API_KEY in (headers.get("authorization", "") + headers.get("x-api-key", ""))
    body = request.body
    assert body["model"] == "test-model" and body["stream"] is True
    assert "hi" in json.dumps(body) and "You are Soulwire" in json.dumps(body)
    assert "ext_read" in json.dumps(body.get("tools"))


def test_thinking_and_parallel_tool_calls_with_argument_deltas(rig: Rig):
    first = Answer(
        "msg-tools-1",
        thinking=["Let me ", "read both."],
        signature="c2lnbmF0dXJlLW9mLXRoaW5raW5n",
        text=["Reading."],
        calls=[
            Call("call_a", "ext_read", ['{"pa', 'th": "a.txt"}']),
            Call("call_b", "ext_read", ['{"path"', ': "b.txt"}']),
        ],
    )
    second = Answer("msg-tools-2", text=["Both read."])
    rig.server.queue(stream_reply(rig.provider, first), stream_reply(rig.provider, second))
    events, response = rig.prompt("read a and b")
    assert response["result"] == {"status": "finished"}

    thinks = [p for p in payloads(events, "ContentPart") if p["type"] == "think"]
    assert "".join(p["think"] for p in thinks) == "Let me read both."
    signed = rig.provider in ("anthropic", "openai_responses")
    assert [p["encrypted"] for p in thinks if p["encrypted"]] == (
        ["rs_1|" + first.signature]
        if rig.provider == "openai_responses"
        else [first.signature]
        if signed
        else []
    )
    kinds = event_types(events)
    first_call = kinds.index("ToolCall")
    assert kinds[first_call : first_call + 6] == ["ToolCall", "ToolCallPart", "ToolCallPart"] * 2
    calls = payloads(events, "ToolCall")
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("call_a", "ext_read"),
        ("call_b", "ext_read"),
    ]
    requests = [m["params"]["payload"] for m in events if m.get("method") == "request"]
    assert [(r["id"], json.loads(r["arguments"])) for r in requests] == [
        ("call_a", {"path": "a.txt"}),
        ("call_b", {"path": "b.txt"}),
    ]
    assert [r["tool_call_id"] for r in payloads(events, "ToolResult")] == ["call_a", "call_b"]
    assert payloads(events, "StepBegin") == [{"n": 1}, {"n": 2}]
    assert texts(events)[-1] == "Both read."
    assert_history_carries_the_step(rig.provider, rig.body(1), first)


def assert_history_carries_the_step(provider: str, body: dict[str, Any], first: Answer) -> None:
    """The second request holds the first step exactly as each API wants it back."""
    args = ['{"path": "a.txt"}', '{"path": "b.txt"}']
    if provider in ("kimi", "openai_legacy"):
        assistant = [m for m in body["messages"] if m["role"] == "assistant"][-1]
        assert assistant["content"] == "Reading."
        assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == args
        # Kimi needs its reasoning back; a generic server without `reasoning_key` must not get it.
        assert assistant.get("reasoning_content") == ("Let me read both." if provider == "kimi" else None)
        tools = body["messages"][body["messages"].index(assistant) + 1 :]
        assert [(m["tool_call_id"], "contents of" in m["content"]) for m in tools] == [
            ("call_a", True),
            ("call_b", True),
        ]
        if provider == "kimi":
            assert body["thinking"] == {"type": "enabled"}
    elif provider == "openai_responses":
        items = body["input"][[i.get("role") for i in body["input"]].index("user", 2) :]
        reasoning = next(i for i in items if i.get("type") == "reasoning")
        assert reasoning == {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Let me read both."}],
            "encrypted_content": first.signature,
        }
        assert [i["arguments"] for i in items if i.get("type") == "function_call"] == args
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        assert [o["call_id"] for o in outputs] == ["call_a", "call_b"]
        assert body["reasoning"]["effort"] and body["include"] == ["reasoning.encrypted_content"]
        assert body["store"] is False
    else:
        assistant, results_message = body["messages"][-2:]
        assert assistant["role"] == "assistant"
        assert assistant["content"][0] == {
            "type": "thinking",
            "thinking": "Let me read both.",
            "signature": first.signature,
        }
        assert [b["input"] for b in assistant["content"] if b["type"] == "tool_use"] == [
            {"path": "a.txt"},
            {"path": "b.txt"},
        ]
        results = results_message["content"]
        assert [b["tool_use_id"] for b in results] == ["call_a", "call_b"]
        assert results[-1]["cache_control"] == {"type": "ephemeral"}
        assert body["thinking"]["type"] == "enabled"


def test_rate_limit_waits_for_retry_after_then_succeeds(rig: Rig):
    rig.server.queue(
        error_reply(rig.provider, 429, "slow down", headers={"retry-after": "1"}),
        stream_reply(rig.provider, Answer("msg-ok", text=["ok after retry"])),
    )
    events, response = rig.prompt("again")
    assert response["result"] == {"status": "finished"}
    assert event_types(events) == [
        "TurnBegin",
        "StepBegin",
        "StepRetry",
        "ContentPart",
        "StatusUpdate",
        "TurnEnd",
    ]
    retry = payloads(events, "StepRetry")[0]
    assert retry["status_code"] == 429 and retry["error_type"] == "APIStatusError"
    assert (retry["n"], retry["next_attempt"], retry["max_attempts"]) == (1, 2, 3)
    assert retry["wait_s"] >= 1.0  # Retry-After honoured
    assert len(rig.server.requests) == 2  # the SDK's own retries are off: only the engine retries


def test_server_errors_exhaust_the_retries(rig: Rig):
    rig.server.queue(*[error_reply(rig.provider, 500, "upstream exploded") for _ in range(3)])
    events, response = rig.prompt("fail please")
    assert event_types(events) == [
        "TurnBegin",
        "StepBegin",
        "StepRetry",
        "StepRetry",
        "StepInterrupted",
        "TurnEnd",
    ]
    assert [r["next_attempt"] for r in payloads(events, "StepRetry")] == [2, 3]
    error = response["error"]
    assert error["code"] == -32003
    assert "HTTP 500" in error["message"] and "upstream exploded" in error["message"]
    assert len(rig.server.requests) == 3


def test_stall_mid_stream_is_retried_and_its_output_discarded(rig: Rig):
    rig.server.queue(
        stream_reply(rig.provider, Answer("msg-stall", text=["partial ", "answer"], cut="stall")),
        stream_reply(rig.provider, Answer("msg-recovered", text=["recovered"])),
    )
    events, response = rig.prompt("slow one")
    assert response["result"] == {"status": "finished"}
    kinds = event_types(events)
    assert kinds[:5] == ["TurnBegin", "StepBegin", "ContentPart", "StepRetry", "ContentPart"]
    retry = payloads(events, "StepRetry")[0]
    assert retry["error_type"] == "APITimeoutError" and retry["status_code"] is None
    assert texts(events) == ["partial ", "recovered"]
    # The failed attempt's output never reached the context: the retry sent the same request,
    # and the session's context holds only the recovered answer.
    assert rig.body(0) == rig.body(1)
    rig.server.queue(stream_reply(rig.provider, Answer("msg-next", text=["next"])))
    rig.prompt("next")
    assert "recovered" in json.dumps(rig.body(0)) and "partial " not in json.dumps(rig.body(0))
    context = "".join(p.read_text() for p in rig.share.glob("sessions/*/*/context.jsonl"))
    assert "recovered" in context and "partial " not in context


def test_dropped_connection_and_empty_reply_are_retried(rig: Rig):
    rig.server.queue(
        stream_reply(rig.provider, Answer("msg-drop", text=["cut ", "off"], cut="drop")),
        stream_reply(rig.provider, Answer("msg-empty", thinking=["only thinking"])),
        stream_reply(rig.provider, Answer("msg-fine", text=["fine"])),
    )
    events, response = rig.prompt("flaky")
    assert response["result"] == {"status": "finished"}
    retries = payloads(events, "StepRetry")
    assert [r["error_type"] for r in retries] == ["APIConnectionError", "APIEmptyResponseError"]
    assert texts(events)[-1] == "fine" and len(rig.server.requests) == 3


def test_malformed_chunk_fails_the_step_without_retry(rig: Rig):
    rig.server.queue(stream_reply(rig.provider, Answer("msg-bad", text=["fine", "more"], cut="malformed")))
    events, response = rig.prompt("garbage")
    assert event_types(events) == ["TurnBegin", "StepBegin", "ContentPart", "StepInterrupted", "TurnEnd"]
    assert response["error"]["code"] == -32003
    assert "Malformed response" in response["error"]["message"]
    assert len(rig.server.requests) == 1


def test_unauthorized_is_a_clear_error_without_the_key(rig: Rig):
    rig.server.queue(error_reply(rig.provider, 401, f"Incorrect API key provided: {API_KEY}"))
    events, response = rig.prompt("who am i")
    assert event_types(events) == ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"]
    error = response["error"]
    assert error["code"] == -32003
    assert error["message"].startswith("Authentication failed (HTTP 401)")
    assert "Incorrect API key provided: ***" in error["message"]
    assert "api_key" in error["message"]  # says what to fix
    assert len(rig.server.requests) == 1


def test_secrets_appear_nowhere_the_user_or_the_disk_can_see(rig: Rig):
    sent = json.dumps(rig.server.requests[0].headers) if rig.server.requests else ""
    rig.server.queue(stream_reply(rig.provider, Answer("msg-last", text=["bye"])))
    rig.prompt("bye")
    sent = json.dumps(rig.server.requests[0].headers)
    assert API_KEY in sent and HEADER_SECRET in sent  # the secrets did travel, to the provider only
    visible = [json.dumps(rig.seen), "".join(rig.wire.stderr_lines)]
    visible += [p.read_text(errors="replace") for p in rig.share.rglob("*") if p.is_file()]
    assert rig.seen and any("sessions" in str(p) for p in rig.share.rglob("*.jsonl"))
    for text in visible:
        assert API_KEY not in text and HEADER_SECRET not in text
