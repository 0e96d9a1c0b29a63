"""Anthropic Messages API streaming (`anthropic`): thinking blocks with their signatures,
redacted thinking, parallel tool use and prompt-caching usage. The `anthropic` SDK is imported
at the first request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from soulwire.config.model import ModelConfig, ProviderConfig
from soulwire.llm.convert import anthropic_messages, anthropic_system, anthropic_tools
from soulwire.llm.errors import MalformedResponseError
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.sse import EventData, post_events
from soulwire.llm.sse import as_dict as _dict
from soulwire.llm.sse import as_str as _str
from soulwire.llm.transport import AdapterSettings, Attempt, SDKAdapter, env_float
from soulwire.wire.types import (
    FunctionCall,
    TextPart,
    ThinkPart,
    TokenUsage,
    ToolCall,
    ToolCallPart,
    WireModel,
)

MAX_TOKENS_ENV = "SOULWIRE_MAX_TOKENS"
THINKING_BUDGET_ENV = "SOULWIRE_THINKING_BUDGET"
DEFAULT_MAX_TOKENS = 32_000
MIN_THINKING_BUDGET = 1024  # the API's floor


def anthropic_factory(provider: ProviderConfig, model: ModelConfig, env: dict[str, str]) -> AnthropicProvider:
    return AnthropicProvider(AdapterSettings.resolve("anthropic", provider, model, env))


@dataclass
class _Usage:
    """Anthropic splits usage between `message_start` (input) and `message_delta` (output)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0

    def update(self, raw: Any) -> None:
        usage = _dict(raw)
        for attr, key in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_creation", "cache_creation_input_tokens"),
        ):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, attr, value)

    def token_usage(self) -> TokenUsage:
        return TokenUsage(
            input_other=self.input,
            output=self.output,
            input_cache_read=self.cache_read,
            input_cache_creation=self.cache_creation,
        )


class _Blocks:
    """Which content block is a tool call, so JSON deltas reach the right ToolCall."""

    def __init__(self) -> None:
        self.tool_blocks: set[int] = set()
        self.current_tool: int | None = None


class AnthropicProvider(SDKAdapter[AdapterSettings]):
    """A Claude model, streamed."""

    sdk_module = "anthropic"
    client_class = "AsyncAnthropic"

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        s = self.settings
        max_tokens = int(env_float(s.env, MAX_TOKENS_ENV) or DEFAULT_MAX_TOKENS)
        body: dict[str, Any] = {
            "model": s.model_name,
            "max_tokens": max_tokens,
            "messages": anthropic_messages(request.history, model_name=s.model_name),
        }
        system = anthropic_system(request.system_prompt)
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = anthropic_tools(request.tools)
        if request.thinking and "thinking" in s.capabilities:
            budget = int(env_float(s.env, THINKING_BUDGET_ENV) or max_tokens // 2)
            budget = max(MIN_THINKING_BUDGET, min(budget, max_tokens - 1))
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        return body

    def _attempt(self, request: ChatRequest, result: StreamResult) -> Attempt:
        body = self.request_body(request)
        usage, blocks = _Usage(), _Blocks()

        async def open_stream(client: Any) -> EventData:
            # An `event: error` raises through `_stream_error`, as the SDK's stream raises its
            # status error.
            return post_events(client, "/v1/messages", body, self._stream_error)

        return Attempt(open=open_stream, parts=lambda event: self._parts(event, usage, blocks, result))

    def _parts(self, data: Any, usage: _Usage, blocks: _Blocks, result: StreamResult) -> list[WireModel]:
        event = _dict(data)
        kind = event.get("type")
        if kind == "message_start":
            message = _dict(event.get("message"))
            message_id = message.get("id")
            result.message_id = message_id if isinstance(message_id, str) else None
            usage.update(message.get("usage"))
            result.usage = usage.token_usage()
        elif kind == "message_delta":
            usage.update(event.get("usage"))
            result.usage = usage.token_usage()
        elif kind == "content_block_start":
            return self._block_start(_index(event), _dict(event.get("content_block")), blocks)
        elif kind == "content_block_delta":
            return self._block_delta(_index(event), _dict(event.get("delta")), blocks)
        return []

    @staticmethod
    def _block_start(index: int, block: dict[str, Any], blocks: _Blocks) -> list[WireModel]:
        kind = block.get("type")
        if kind == "tool_use":
            blocks.tool_blocks.add(index)
            blocks.current_tool = index
            call = FunctionCall(name=_str(block.get("name")), arguments=None)
            return [ToolCall(id=_str(block.get("id")), function=call)]
        if kind == "redacted_thinking":
            return [ThinkPart(think="", encrypted=_str(block.get("data")))]
        if kind == "text" and _str(block.get("text")):
            return [TextPart(text=block["text"])]
        if kind == "thinking" and _str(block.get("thinking")):
            return [ThinkPart(think=block["thinking"])]
        return []

    @staticmethod
    def _block_delta(index: int, delta: dict[str, Any], blocks: _Blocks) -> list[WireModel]:
        kind = delta.get("type")
        if kind == "text_delta":
            text = _str(delta.get("text"))
            return [TextPart(text=text)] if text else []
        if kind == "thinking_delta":
            thinking = _str(delta.get("thinking"))
            return [ThinkPart(think=thinking)] if thinking else []
        if kind == "signature_delta":
            # Closes the thinking block: the signature must go back with it on the next call.
            signature = _str(delta.get("signature"))
            return [ThinkPart(think="", encrypted=signature)] if signature else []
        if kind == "input_json_delta":
            if index != blocks.current_tool:
                raise MalformedResponseError("the provider interleaved the input of parallel tool calls")
            partial = _str(delta.get("partial_json"))
            return [ToolCallPart(arguments_part=partial)] if partial else []
        return []


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else -1
