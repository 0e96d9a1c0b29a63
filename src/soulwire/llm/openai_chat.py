"""OpenAI Chat Completions streaming, for `kimi` (Moonshot), `openai_legacy` (OpenAI and every
compatible server: vLLM, llama.cpp, Ollama, OpenRouter, DeepSeek …) and `gemini` (Google's
OpenAI-compatible endpoint). The `openai` SDK is imported at the first request."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from soulwire.config.model import ModelConfig, ProviderConfig
from soulwire.ids import uuid4_hex
from soulwire.llm.convert import openai_chat_messages, openai_chat_tools
from soulwire.llm.errors import MalformedResponseError
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.sse import EventData, post_events
from soulwire.llm.sse import as_int as _int
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

Flavor = Literal["kimi", "openai_legacy", "gemini"]
REASONING_EFFORT_ENV = "SOULWIRE_REASONING_EFFORT"
_AUTO_REASONING_KEYS = ("reasoning_content", "reasoning")


@dataclass(kw_only=True)
class ChatSettings(AdapterSettings):
    """The common settings, plus what the OpenAI-style wire formats need."""

    flavor: Flavor
    configured_capabilities: frozenset[str]
    reasoning_key: str | None
    """Where thinking travels: parsed from deltas and sent back in history. None: parsed
    from `reasoning_content`/`reasoning`, never sent back (some servers reject it)."""


def chat_settings(
    flavor: Flavor, provider: ProviderConfig, model: ModelConfig, env: Mapping[str, str]
) -> ChatSettings:
    reasoning_key = "reasoning_content" if flavor == "kimi" else provider.reasoning_key
    return ChatSettings.resolve(
        flavor,
        provider,
        model,
        env,
        flavor=flavor,
        configured_capabilities=frozenset(model.capabilities),
        reasoning_key=reasoning_key,
    )


def kimi_factory(provider: ProviderConfig, model: ModelConfig, env: dict[str, str]) -> OpenAIChatProvider:
    return OpenAIChatProvider(chat_settings("kimi", provider, model, env))


def openai_legacy_factory(
    provider: ProviderConfig, model: ModelConfig, env: dict[str, str]
) -> OpenAIChatProvider:
    return OpenAIChatProvider(chat_settings("openai_legacy", provider, model, env))


def gemini_factory(provider: ProviderConfig, model: ModelConfig, env: dict[str, str]) -> OpenAIChatProvider:
    return OpenAIChatProvider(chat_settings("gemini", provider, model, env))


def _dicts(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (nothing for anything else)."""
    if not isinstance(value, list):
        return []
    return [cast(dict[str, Any], v) for v in cast(list[Any], value) if isinstance(v, dict)]


def chat_usage(raw: Any) -> TokenUsage | None:
    """Usage from an OpenAI-style `usage` object; cached prompt tokens are reported as
    `prompt_tokens_details.cached_tokens` (OpenAI), `cached_tokens` (Moonshot) or
    `prompt_cache_hit_tokens` (DeepSeek)."""
    if raw is None:
        return None
    get = raw.get if isinstance(raw, dict) else lambda key: getattr(raw, key, None)  # pyright: ignore[reportUnknownLambdaType]
    prompt = _int(get("prompt_tokens"))
    details = get("prompt_tokens_details")
    cached = _int(
        details.get("cached_tokens") if isinstance(details, dict) else getattr(details, "cached_tokens", 0)
    )
    cached = cached or _int(get("cached_tokens")) or _int(get("prompt_cache_hit_tokens"))
    cached = min(cached, prompt)
    return TokenUsage(
        input_other=prompt - cached, output=_int(get("completion_tokens")), input_cache_read=cached
    )


class _ToolCalls:
    """Tool-call deltas (keyed by `index`) → ToolCall, then ToolCallParts for the same call."""

    def __init__(self) -> None:
        self.started: dict[int, str] = {}
        self.pending: dict[int, dict[str, Any]] = {}
        self.current: int | None = None

    def feed(self, delta: dict[str, Any]) -> list[WireModel]:
        index = _int(delta.get("index", 0))
        function = delta.get("function")
        function = cast(dict[str, Any], function) if isinstance(function, dict) else {}
        name = function.get("name")
        arguments = function.get("arguments")
        arguments = arguments if isinstance(arguments, str) and arguments else None
        if index in self.started:
            if index != self.current:
                raise MalformedResponseError("the provider interleaved the arguments of parallel tool calls")
            return [ToolCallPart(arguments_part=arguments)] if arguments else []
        slot = self.pending.setdefault(index, {"id": None, "name": "", "args": [], "extra": None})
        call_id = delta.get("id")
        if isinstance(call_id, str) and call_id:
            slot["id"] = call_id
        if isinstance(name, str) and name:
            slot["name"] += name
        if arguments:
            slot["args"].append(arguments)
        extra = delta.get("extra_content")
        if extra is not None:
            slot["extra"] = extra
        if not slot["name"]:
            return []  # the name comes first in every known server; wait for it
        del self.pending[index]
        call_id = slot["id"] or f"call_{uuid4_hex()[:24]}"
        self.started[index] = call_id
        self.current = index
        extras = {"extra_content": slot["extra"]} if isinstance(slot["extra"], dict) else None
        args = "".join(slot["args"]) or None
        return [ToolCall(id=call_id, function=FunctionCall(name=slot["name"], arguments=args), extras=extras)]


class OpenAIChatProvider(SDKAdapter[ChatSettings]):
    """A Chat Completions model, streamed."""

    sdk_module = "openai"
    client_class = "AsyncOpenAI"
    platform_in_headers = True

    def request_body(self, request: ChatRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        """(SDK keyword arguments, extra body fields) for one request."""
        s = self.settings
        body: dict[str, Any] = {
            "model": s.model_name,
            "messages": openai_chat_messages(
                request.system_prompt,
                request.history,
                reasoning_key=s.reasoning_key or None,
                model_name=s.model_name,
            ),
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = openai_chat_tools(request.tools)
        extra: dict[str, Any] = {}
        if s.flavor == "kimi":
            self._kimi_options(request, body, extra)
        elif request.thinking and "thinking" in s.configured_capabilities:
            # Only models configured as thinking get the parameter: many compatible servers reject it.
            body["reasoning_effort"] = s.env.get(REASONING_EFFORT_ENV) or "medium"
        return body, extra

    def _kimi_options(self, request: ChatRequest, body: dict[str, Any], extra: dict[str, Any]) -> None:
        env = self.settings.env
        if "thinking" in self.settings.capabilities:
            thinking: dict[str, Any] = {"type": "enabled" if request.thinking else "disabled"}
            keep = env.get("KIMI_MODEL_THINKING_KEEP", "").strip()
            if request.thinking and keep:
                thinking["keep"] = keep
            extra["thinking"] = thinking
        temperature = env_float(env, "KIMI_MODEL_TEMPERATURE")
        if temperature is not None:
            body["temperature"] = temperature
        top_p = env_float(env, "KIMI_MODEL_TOP_P")
        if top_p is not None:
            body["top_p"] = top_p
        max_tokens = env_float(env, "KIMI_MODEL_MAX_COMPLETION_TOKENS", "KIMI_MODEL_MAX_TOKENS")
        if max_tokens is not None and max_tokens > 0:
            body["max_completion_tokens"] = int(max_tokens)

    def _attempt(self, request: ChatRequest, result: StreamResult) -> Attempt:
        body, extra = self.request_body(request)
        calls = _ToolCalls()

        async def open_stream(client: Any) -> EventData:
            return post_events(client, "/chat/completions", {**body, **extra}, self._stream_error)

        return Attempt(open=open_stream, parts=lambda chunk: self._parts(chunk, calls, result))

    def _parts(self, chunk: Any, calls: _ToolCalls, result: StreamResult) -> list[WireModel]:
        if not isinstance(chunk, dict):
            return []
        data = cast(dict[str, Any], chunk)
        chunk_id = data.get("id")
        if result.message_id is None and isinstance(chunk_id, str) and chunk_id:
            result.message_id = chunk_id
        usage = chat_usage(data.get("usage"))
        parts: list[WireModel] = []
        for choice in _dicts(data.get("choices")):
            # Moonshot reports usage inside the last choice instead of at the top level.
            usage = usage or chat_usage(choice.get("usage"))
            delta = choice.get("delta")
            if not isinstance(delta, dict) or _int(choice.get("index", 0)) != 0:
                continue
            delta = cast(dict[str, Any], delta)
            thinking = self._reasoning(delta)
            if thinking:
                parts.append(ThinkPart(think=thinking))
            content = delta.get("content")
            if isinstance(content, str) and content:
                parts.append(TextPart(text=content))
            for call in _dicts(delta.get("tool_calls")):
                parts.extend(calls.feed(call))
        if usage is not None:
            result.usage = usage
        return parts

    def _reasoning(self, delta: dict[str, Any]) -> str:
        key = self.settings.reasoning_key
        keys = _AUTO_REASONING_KEYS if key is None else ((key,) if key else ())
        for name in keys:
            value = delta.get(name)
            if isinstance(value, str) and value:
                return value
        return ""
