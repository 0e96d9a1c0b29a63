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
        for attr, key in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_creation", "cache_creation_input_tokens"),
        ):
            value = getattr(raw, key, None)
            if isinstance(value, int):
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
    sdk_resources = ("anthropic.resources.messages:AsyncMessages",)

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
        return Attempt(
            open=lambda client: client.messages.create(**body, stream=True),
            parts=lambda event: self._parts(event, usage, blocks, result),
        )

    def _parts(self, event: Any, usage: _Usage, blocks: _Blocks, result: StreamResult) -> list[WireModel]:
        kind = getattr(event, "type", "")
        if kind == "message_start":
            message = event.message
            result.message_id = getattr(message, "id", None)
            usage.update(getattr(message, "usage", None))
            result.usage = usage.token_usage()
        elif kind == "message_delta":
            usage.update(getattr(event, "usage", None))
            result.usage = usage.token_usage()
        elif kind == "content_block_start":
            return self._block_start(event.index, event.content_block, blocks)
        elif kind == "content_block_delta":
            return self._block_delta(event.index, event.delta, blocks)
        return []

    @staticmethod
    def _block_start(index: int, block: Any, blocks: _Blocks) -> list[WireModel]:
        kind = getattr(block, "type", "")
        if kind == "tool_use":
            blocks.tool_blocks.add(index)
            blocks.current_tool = index
            return [ToolCall(id=block.id, function=FunctionCall(name=block.name, arguments=None))]
        if kind == "redacted_thinking":
            return [ThinkPart(think="", encrypted=block.data)]
        if kind == "text" and getattr(block, "text", ""):
            return [TextPart(text=block.text)]
        if kind == "thinking" and getattr(block, "thinking", ""):
            return [ThinkPart(think=block.thinking)]
        return []

    @staticmethod
    def _block_delta(index: int, delta: Any, blocks: _Blocks) -> list[WireModel]:
        kind = getattr(delta, "type", "")
        if kind == "text_delta":
            return [TextPart(text=delta.text)] if delta.text else []
        if kind == "thinking_delta":
            return [ThinkPart(think=delta.thinking)] if delta.thinking else []
        if kind == "signature_delta":
            # Closes the thinking block: the signature must go back with it on the next call.
            return [ThinkPart(think="", encrypted=delta.signature)] if delta.signature else []
        if kind == "input_json_delta":
            if index != blocks.current_tool:
                raise MalformedResponseError("the provider interleaved the input of parallel tool calls")
            return [ToolCallPart(arguments_part=delta.partial_json)] if delta.partial_json else []
        return []
