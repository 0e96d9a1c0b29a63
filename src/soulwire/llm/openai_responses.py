"""OpenAI Responses API streaming (`openai_responses`). Requests are stateless (`store: false`);
reasoning comes back as encrypted items that are replayed on the next call."""

from __future__ import annotations

from typing import Any

from soulwire.config.model import ModelConfig, ProviderConfig
from soulwire.llm.convert import REASONING_TOKEN_SEP, responses_input, responses_tools
from soulwire.llm.errors import MalformedResponseError
from soulwire.llm.openai_chat import REASONING_EFFORT_ENV, OpenAIChatProvider, as_extra_body, chat_settings
from soulwire.llm.provider import ChatRequest, StreamResult
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
    if raw is None:
        return None
    total = getattr(raw, "input_tokens", 0) or 0
    details = getattr(raw, "input_tokens_details", None)
    cached = min(getattr(details, "cached_tokens", 0) or 0, total)
    return TokenUsage(
        input_other=total - cached, output=getattr(raw, "output_tokens", 0) or 0, input_cache_read=cached
    )


class _Events:
    """Per-attempt state: which function call is streaming, and whether it got its arguments."""

    def __init__(self) -> None:
        self.calls: dict[str, bool] = {}  # item id → arguments streamed
        self.current: str | None = None
        self.summary_parts: dict[str, int] = {}


class OpenAIResponsesProvider(OpenAIChatProvider):
    """A model behind the Responses API; shares settings, client and error mapping with Chat."""

    sdk_resources = ("openai.resources.responses:AsyncResponses",)

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
        return Attempt(
            open=lambda client: client.responses.create(**as_extra_body(body), stream=True),
            parts=lambda event: self._event_parts(event, state, result),
        )

    def _event_parts(self, event: Any, state: _Events, result: StreamResult) -> list[WireModel]:
        kind = getattr(event, "type", "")
        if kind in ("response.created", "response.in_progress", "response.completed", "response.incomplete"):
            response = getattr(event, "response", None)
            if isinstance(getattr(response, "id", None), str):
                result.message_id = response.id  # type: ignore[union-attr]
            usage = responses_usage(getattr(response, "usage", None))
            if usage is not None:
                result.usage = usage
            return []
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            return [TextPart(text=event.delta)] if event.delta else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [ThinkPart(think=event.delta)] if event.delta else []
        if kind == "response.reasoning_summary_part.added":
            seen = state.summary_parts.get(event.item_id, 0)
            state.summary_parts[event.item_id] = seen + 1
            return [ThinkPart(think="\n\n")] if seen else []
        if kind == "response.output_item.added" and getattr(event.item, "type", "") == "function_call":
            item = event.item
            state.calls[item.id] = bool(item.arguments)
            state.current = item.id
            call = ToolCall(
                id=item.call_id, function=FunctionCall(name=item.name, arguments=item.arguments or None)
            )
            return [call]
        if kind == "response.function_call_arguments.delta":
            if event.item_id != state.current:
                raise MalformedResponseError("the provider interleaved the arguments of parallel tool calls")
            state.calls[event.item_id] = True
            return [ToolCallPart(arguments_part=event.delta)] if event.delta else []
        if kind == "response.output_item.done":
            return self._item_done(event.item, state)
        if kind in ("response.failed", "error"):
            error = (
                getattr(getattr(event, "response", None), "error", None)
                if kind == "response.failed"
                else event
            )
            body = {
                "error": {"code": getattr(error, "code", None), "message": getattr(error, "message", None)}
            }
            raise self._errors().stream_error(body, fallback="the response failed")
        return []

    def _item_done(self, item: Any, state: _Events) -> list[WireModel]:
        kind = getattr(item, "type", "")
        if kind == "reasoning" and getattr(item, "encrypted_content", None):
            # Closes the think run with what the next request must send back.
            return [ThinkPart(think="", encrypted=f"{item.id}{REASONING_TOKEN_SEP}{item.encrypted_content}")]
        if kind == "function_call" and not state.calls.get(item.id, True) and item.arguments:
            # Some servers send the arguments only with the finished item.
            state.calls[item.id] = True
            return [ToolCallPart(arguments_part=item.arguments)]
        return []
