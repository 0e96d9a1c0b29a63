"""OpenAI Responses API streaming (`openai_responses`). Requests are stateless (`store: false`);
reasoning comes back as encrypted items that are replayed on the next call."""

from __future__ import annotations

from typing import Any

from soulwire.config.model import ModelConfig, ProviderConfig
from soulwire.llm.convert import REASONING_TOKEN_SEP, responses_input, responses_tools
from soulwire.llm.errors import MalformedResponseError
from soulwire.llm.openai_chat import REASONING_EFFORT_ENV, OpenAIChatProvider, chat_settings
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.sse import EventData, post_events
from soulwire.llm.sse import as_dict as _dict
from soulwire.llm.sse import as_int as _int
from soulwire.llm.sse import as_str as _str
from soulwire.llm.transport import Attempt
from soulwire.wire.types import (
    FunctionCall,
    TextPart,
    ThinkPart,
    TokenUsage,
    ToolCall,
    ToolCallPart,
    WireModel,
)


def openai_responses_factory(
    provider: ProviderConfig, model: ModelConfig, env: dict[str, str]
) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(chat_settings("openai_legacy", provider, model, env))


def responses_usage(raw: Any) -> TokenUsage | None:
    """The `usage` object of a Responses event's `response`, as TokenUsage."""
    if not isinstance(raw, dict):
        return None
    usage = _dict(raw)
    total = _int(usage.get("input_tokens"))
    details = usage.get("input_tokens_details")
    cached = min(_int(_dict(details).get("cached_tokens")), total)
    output = _int(usage.get("output_tokens"))
    return TokenUsage(input_other=total - cached, output=output, input_cache_read=cached)


class _Events:
    """Per-attempt state: which function call is streaming, and whether it got its arguments."""

    def __init__(self) -> None:
        self.calls: dict[str, bool] = {}  # item id → arguments streamed
        self.current: str | None = None
        self.summary_parts: dict[str, int] = {}


class OpenAIResponsesProvider(OpenAIChatProvider):
    """A model behind the Responses API; shares settings, client and error mapping with Chat."""

    def request_body(self, request: ChatRequest) -> tuple[dict[str, Any], dict[str, Any]]:
        s = self.settings
        body: dict[str, Any] = {
            "model": s.model_name,
            "input": responses_input(request.history, model_name=s.model_name),
            "store": False,
        }
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            body["tools"] = responses_tools(request.tools)
        if "thinking" in s.capabilities:
            # Reasoning models: ask for the encrypted reasoning so it can be replayed statelessly.
            body["include"] = ["reasoning.encrypted_content"]
            if request.thinking:
                body["reasoning"] = {"effort": s.env.get(REASONING_EFFORT_ENV) or "medium", "summary": "auto"}
        return body, {}

    def _attempt(self, request: ChatRequest, result: StreamResult) -> Attempt:
        body, _ = self.request_body(request)
        state = _Events()

        async def open_stream(client: Any) -> EventData:
            return post_events(client, "/responses", body, self._stream_error)

        return Attempt(open=open_stream, parts=lambda event: self._event_parts(event, state, result))

    def _stream_error(self, data: Any) -> BaseException:
        """An `event: error` (`{"type": "error", "code", "message"}`) or an event with an
        `error` member, as the error it reports."""
        event = _dict(data)
        if "error" not in event:
            event = {"error": {"code": event.get("code"), "message": event.get("message")}}
        return self._errors().stream_error(event, fallback="the response failed")

    def _event_parts(self, data: Any, state: _Events, result: StreamResult) -> list[WireModel]:
        event = _dict(data)
        kind = event.get("type")
        if kind in ("response.created", "response.in_progress", "response.completed", "response.incomplete"):
            response = _dict(event.get("response"))
            response_id = response.get("id")
            if isinstance(response_id, str):
                result.message_id = response_id
            usage = responses_usage(response.get("usage"))
            if usage is not None:
                result.usage = usage
            return []
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = _str(event.get("delta"))
            return [TextPart(text=delta)] if delta else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = _str(event.get("delta"))
            return [ThinkPart(think=delta)] if delta else []
        if kind == "response.reasoning_summary_part.added":
            item_id = _str(event.get("item_id"))
            seen = state.summary_parts.get(item_id, 0)
            state.summary_parts[item_id] = seen + 1
            return [ThinkPart(think="\n\n")] if seen else []
        if kind == "response.output_item.added":
            item = _dict(event.get("item"))
            if item.get("type") != "function_call":
                return []
            arguments = _str(item.get("arguments"))
            item_id = _str(item.get("id"))
            state.calls[item_id] = bool(arguments)
            state.current = item_id
            function = FunctionCall(name=_str(item.get("name")), arguments=arguments or None)
            return [ToolCall(id=_str(item.get("call_id")), function=function)]
        if kind == "response.function_call_arguments.delta":
            item_id = _str(event.get("item_id"))
            if item_id != state.current:
                raise MalformedResponseError("the provider interleaved the arguments of parallel tool calls")
            state.calls[item_id] = True
            delta = _str(event.get("delta"))
            return [ToolCallPart(arguments_part=delta)] if delta else []
        if kind == "response.output_item.done":
            return self._item_done(_dict(event.get("item")), state)
        if kind == "response.failed":
            error = _dict(_dict(event.get("response")).get("error"))
            raise self._stream_error({"code": error.get("code"), "message": error.get("message")})
        if kind == "error":
            raise self._stream_error(event)
        return []

    def _item_done(self, item: dict[str, Any], state: _Events) -> list[WireModel]:
        kind, item_id = item.get("type"), _str(item.get("id"))
        encrypted = _str(item.get("encrypted_content"))
        if kind == "reasoning" and encrypted:
            # Closes the think run with what the next request must send back.
            return [ThinkPart(think="", encrypted=f"{item_id}{REASONING_TOKEN_SEP}{encrypted}")]
        arguments = _str(item.get("arguments"))
        if kind == "function_call" and not state.calls.get(item_id, True) and arguments:
            # Some servers send the arguments only with the finished item.
            state.calls[item_id] = True
            return [ToolCallPart(arguments_part=arguments)]
        return []
