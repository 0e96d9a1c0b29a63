"""What each provider sends on the wire, in the shapes recorded from the real APIs: one neutral
`Answer` (thinking, text, parallel tool calls with argument deltas, usage, message id) encoded
as an OpenAI Chat Completions stream (OpenAI and Moonshot flavours), an OpenAI Responses
stream or an Anthropic Messages stream, plus each API's error bodies."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from tests.fake_llm_server import Reply, Stall, json_reply, sse, sse_reply

T = TypeVar("T")

PROVIDERS = ("kimi", "openai_legacy", "openai_responses", "anthropic")
CREATED = 1_767_000_000


@dataclass
class Call:
    id: str
    name: str
    args: list[str]


@dataclass
class Answer:
    message_id: str
    thinking: list[str] = field(default_factory=list)
    signature: str = ""
    """Anthropic's thinking signature / the Responses API's encrypted reasoning."""
    text: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    usage: dict[str, int] = field(
        default_factory=lambda: {"input_other": 100, "output": 20, "cache_read": 50}
    )
    cut: str | None = None
    """Right after the first text delta: "stall" (stop sending, keep the connection open),
    "drop" (close the connection mid-body) or "malformed" (send an undecodable event)."""


def expected_usage(provider: str, answer: Answer) -> dict[str, int]:
    """The TokenUsage the engine must report. Only Anthropic reports cache writes; the OpenAI
    shapes count them as ordinary prompt tokens."""
    u = answer.usage
    creation = u.get("cache_creation", 0)
    if provider == "anthropic":
        return {
            "input_other": u["input_other"],
            "output": u["output"],
            "input_cache_read": u["cache_read"],
            "input_cache_creation": creation,
        }
    return {
        "input_other": u["input_other"] + creation,
        "output": u["output"],
        "input_cache_read": u["cache_read"],
        "input_cache_creation": 0,
    }


def _finish(events: list[bytes | Stall], content: list[bytes], answer: Answer, broken: bytes) -> None:
    marker = json.dumps(answer.text[0]).encode() if answer.text else None
    for event in content:
        events.append(event)
        if answer.cut and marker and marker in event:
            events.append({"stall": Stall(), "drop": Stall(0)}.get(answer.cut, broken))
            return


# ---------------------------------------------------------------- Chat Completions


def chat_stream(answer: Answer, *, moonshot: bool) -> Reply:
    """OpenAI: usage in a last chunk without choices. Moonshot: `reasoning_content` deltas and
    usage (with `cached_tokens`) inside the final choice."""
    u = answer.usage
    prompt = u["input_other"] + u["cache_read"] + u.get("cache_creation", 0)

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        choice.update(extra)
        body: dict[str, Any] = {
            "id": answer.message_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "test-model",
            "choices": [choice],
        }
        if not moonshot:
            body["system_fingerprint"] = "fp_test"
            body["usage"] = None
        return sse(body)

    content = [chunk({"role": "assistant", "content": ""})]
    content += [chunk({"reasoning_content": t}) for t in answer.thinking]
    content += [chunk({"content": t}) for t in answer.text]
    for index, call in enumerate(answer.calls):
        first = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        content.append(chunk({"tool_calls": [first]}))
        content += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": a}}]}) for a in call.args
        ]
    finish = "tool_calls" if answer.calls else "stop"
    cached = {"cached_tokens": u["cache_read"]}
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": u["output"],
        "total_tokens": prompt + u["output"],
    }
    if moonshot:
        content.append(chunk({}, finish, usage={**usage, **cached}))
    else:
        content.append(chunk({}, finish))
        tail = {
            "id": answer.message_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": "test-model",
        }
        tail.update(choices=[], usage={**usage, "prompt_tokens_details": cached})
        content.append(sse(tail))
    content.append(sse("[DONE]"))
    events: list[bytes | Stall] = []
    _finish(events, content, answer, b'data: {"id": "chatcmpl-x", "choices": [{"delta": \n\n')
    return sse_reply(events)


# ---------------------------------------------------------------- Responses


def responses_stream(answer: Answer) -> Reply:
    u = answer.usage
    seq = iter(range(10_000))
    response = {
        "id": answer.message_id,
        "object": "response",
        "created_at": CREATED,
        "status": "in_progress",
        "model": "test-model",
        "output": [],
        "usage": None,
    }

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

    content = [event("response.created", response=response), event("response.in_progress", response=response)]
    out = 0
    if answer.thinking or answer.signature:
        item = {"id": "rs_1", "type": "reasoning", "summary": []}
        content.append(event("response.output_item.added", output_index=out, item=item))
        content.append(
            event(
                "response.reasoning_summary_part.added",
                item_id="rs_1",
                output_index=out,
                summary_index=0,
                part={"type": "summary_text", "text": ""},
            )
        )
        content += [
            event(
                "response.reasoning_summary_text.delta",
                item_id="rs_1",
                output_index=out,
                summary_index=0,
                delta=t,
            )
            for t in answer.thinking
        ]
        done = {
            **item,
            "summary": [{"type": "summary_text", "text": "".join(answer.thinking)}],
            "encrypted_content": answer.signature,
        }
        content.append(event("response.output_item.done", output_index=out, item=done))
        out += 1
    if answer.text:
        item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        content.append(event("response.output_item.added", output_index=out, item=item))
        content += [
            event(
                "response.output_text.delta",
                item_id="msg_1",
                output_index=out,
                content_index=0,
                delta=t,
                logprobs=[],
            )
            for t in answer.text
        ]
        text = {"type": "output_text", "text": "".join(answer.text), "annotations": []}
        content.append(
            event(
                "response.output_item.done",
                output_index=out,
                item={**item, "status": "completed", "content": [text]},
            )
        )
        out += 1
    for call in answer.calls:
        item = {
            "id": f"fc_{call.id}",
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call.id,
            "name": call.name,
        }
        content.append(event("response.output_item.added", output_index=out, item=item))
        content += [
            event("response.function_call_arguments.delta", item_id=item["id"], output_index=out, delta=a)
            for a in call.args
        ]
        args = "".join(call.args)
        content.append(
            event(
                "response.function_call_arguments.done", item_id=item["id"], output_index=out, arguments=args
            )
        )
        content.append(
            event(
                "response.output_item.done",
                output_index=out,
                item={**item, "status": "completed", "arguments": args},
            )
        )
        out += 1
    usage = {
        "input_tokens": u["input_other"] + u["cache_read"] + u.get("cache_creation", 0),
        "input_tokens_details": {"cached_tokens": u["cache_read"]},
        "output_tokens": u["output"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
    content.append(event("response.completed", response={**response, "status": "completed", "usage": usage}))
    events: list[bytes | Stall] = []
    _finish(
        events, content, answer, b'event: response.output_text.delta\ndata: {"type": "response.output\n\n'
    )
    return sse_reply(events)


# ---------------------------------------------------------------- Anthropic


def anthropic_stream(answer: Answer) -> Reply:
    u = answer.usage

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, **fields}, event=kind)

    start_usage = {
        "input_tokens": u["input_other"],
        "cache_creation_input_tokens": u.get("cache_creation", 0),
        "cache_read_input_tokens": u["cache_read"],
        "output_tokens": 1,
    }
    message = {
        "id": answer.message_id,
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    content = [event("message_start", message=message), event("ping")]
    index = 0
    if answer.thinking:
        content.append(
            event(
                "content_block_start",
                index=index,
                content_block={"type": "thinking", "thinking": "", "signature": ""},
            )
        )
        content += [
            event("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": t})
            for t in answer.thinking
        ]
        content.append(
            event(
                "content_block_delta",
                index=index,
                delta={"type": "signature_delta", "signature": answer.signature},
            )
        )
        content.append(event("content_block_stop", index=index))
        index += 1
    if answer.text:
        content.append(event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
        content += [
            event("content_block_delta", index=index, delta={"type": "text_delta", "text": t})
            for t in answer.text
        ]
        content.append(event("content_block_stop", index=index))
        index += 1
    for call in answer.calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        content.append(event("content_block_start", index=index, content_block=block))
        content += [
            event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": a})
            for a in call.args
        ]
        content.append(event("content_block_stop", index=index))
        index += 1
    stop = "tool_use" if answer.calls else "end_turn"
    content.append(
        event(
            "message_delta",
            delta={"stop_reason": stop, "stop_sequence": None},
            usage={"output_tokens": u["output"]},
        )
    )
    content.append(event("message_stop"))
    events: list[bytes | Stall] = []
    _finish(events, content, answer, b'event: content_block_delta\ndata: {"type": "content_block_delta",\n\n')
    return sse_reply(events)


# ---------------------------------------------------------------- per provider


def stream_reply(provider: str, answer: Answer) -> Reply:
    if provider == "kimi":
        return chat_stream(answer, moonshot=True)
    if provider == "openai_legacy":
        return chat_stream(answer, moonshot=False)
    if provider == "openai_responses":
        return responses_stream(answer)
    return anthropic_stream(answer)


def error_reply(provider: str, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An HTTP error in the provider's documented body shape."""
    if provider == "anthropic":
        kinds = {
            401: "authentication_error",
            429: "rate_limit_error",
            500: "api_error",
            529: "overloaded_error",
        }
        body: Any = {
            "type": "error",
            "error": {"type": kinds.get(status, "invalid_request_error"), "message": message},
        }
    else:
        kinds = {401: "invalid_request_error", 429: "rate_limit_error", 500: "server_error"}
        body = {
            "error": {
                "message": message,
                "type": kinds.get(status, "invalid_request_error"),
                "param": None,
                "code": "invalid_api_key" if status == 401 else None,
            }
        }
    return json_reply(status, body, headers)


def run_then_close(provider: Any, body: Callable[[], Awaitable[T]]) -> T:
    """`anyio.run(body)`, and then `provider`'s connections closed in the same loop, as the
    session that owns a provider closes it when it ends."""

    async def run() -> T:
        try:
            return await body()
        finally:
            await provider.aclose()

    return anyio.run(run)
