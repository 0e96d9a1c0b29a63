"""History → request bodies. One function per wire format; all of them pure (no SDK import),
so the exact bodies can be pinned by snapshot tests.

Formats: OpenAI Chat Completions (kimi, openai_legacy, gemini's OpenAI endpoint), OpenAI
Responses, Anthropic Messages. Media parts go to a model only when it declares the matching
capability; otherwise the request is refused with LLMNotSupported before anything is sent."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from soulwire.llm.errors import LLMNotSupported
from soulwire.llm.message import Message
from soulwire.llm.provider import ToolSpec
from soulwire.wire.types import (
    AudioURLPart,
    ImageURLPart,
    TextPart,
    ThinkPart,
    ToolCall,
    VideoURLPart,
)

_CAPABILITY_OF: dict[type, str] = {
    ImageURLPart: "image_in",
    VideoURLPart: "video_in",
    AudioURLPart: "audio_in",
}
_DATA_URL = re.compile(
    r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^,;]*)*?);base64,(?P<data>.*)$", re.S
)

# Responses API reasoning items need their id back; it travels with the encrypted content in
# ThinkPart.encrypted as "<item id>|<encrypted content>" (ids never contain "|").
REASONING_TOKEN_SEP = "|"


def check_media(history: Iterable[Message], capabilities: frozenset[str], model_name: str) -> None:
    """Refuse media the model cannot take (spec §4.1: the step is interrupted, -32002)."""
    missing: list[str] = []
    for message in history:
        for part in message.parts():
            need = _CAPABILITY_OF.get(type(part))
            if need and need not in capabilities and need not in missing:
                missing.append(need)
    if missing:
        raise LLMNotSupported(model_name, missing)


def parse_data_url(url: str) -> tuple[str, str] | None:
    """(mime type, base64 data) of a `data:` URL, or None for any other URL."""
    match = _DATA_URL.match(url)
    if match is None:
        return None
    return match.group("mime") or "application/octet-stream", match.group("data")


def tool_arguments(call: ToolCall) -> str:
    """The arguments as a JSON text; a call streamed without arguments means `{}`."""
    return call.function.arguments or "{}"


def tool_input(call: ToolCall) -> dict[str, Any]:
    """The arguments as an object (Anthropic wants one); unparsable arguments become `{}`
    (the tool already answered them with an argument error)."""
    try:
        value = json.loads(call.function.arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _texts(parts: Sequence[Any]) -> list[str]:
    return [p.text for p in parts if isinstance(p, TextPart) and p.text]


def _thinking(parts: Sequence[Any]) -> str:
    return "".join(p.think for p in parts if isinstance(p, ThinkPart))


def _unsupported(model_name: str, part: Any, api: str) -> LLMNotSupported:
    need = _CAPABILITY_OF.get(type(part), str(getattr(part, "type", "media")))
    error = LLMNotSupported(model_name, [need])
    error.args = (f"{error} ({api} cannot carry {getattr(part, 'type', 'this')} parts)",)
    return error


# ---------------------------------------------------------------- OpenAI Chat Completions


def _chat_media(part: Any, model_name: str) -> dict[str, Any]:
    if isinstance(part, ImageURLPart):
        return {"type": "image_url", "image_url": {"url": part.image_url.url}}
    if isinstance(part, VideoURLPart):
        # Not in OpenAI's schema, but the shape Kimi and vLLM accept.
        return {"type": "video_url", "video_url": {"url": part.video_url.url}}
    if isinstance(part, AudioURLPart):
        data = parse_data_url(part.audio_url.url)
        if data is not None and data[0] in ("audio/wav", "audio/x-wav", "audio/mpeg", "audio/mp3"):
            return {
                "type": "input_audio",
                "input_audio": {"data": data[1], "format": "wav" if "wav" in data[0] else "mp3"},
            }
        return {"type": "audio_url", "audio_url": {"url": part.audio_url.url}}
    raise _unsupported(model_name, part, "Chat Completions")


def _chat_content(parts: Sequence[Any], model_name: str) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts) and len(parts) <= 1:
        return parts[0].text if parts else ""
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        elif not isinstance(part, ThinkPart):
            out.append(_chat_media(part, model_name))
    return out


def openai_chat_messages(
    system_prompt: str, history: Sequence[Message], *, reasoning_key: str | None, model_name: str
) -> list[dict[str, Any]]:
    """Chat Completions messages. Thinking goes back under `reasoning_key` (Kimi needs it for
    multi-step tool use); tool messages carry text only, so media a tool returned follows the
    tool messages as a user message."""
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    pending_media: list[dict[str, Any]] = []

    def flush_media() -> None:
        if pending_media:
            intro = {"type": "text", "text": "<system>Media returned by the tool calls above.</system>"}
            messages.append({"role": "user", "content": [intro, *pending_media]})
            pending_media.clear()

    for message in history:
        parts = message.parts()
        if message.role == "tool":
            text_parts = [p for p in parts if isinstance(p, TextPart)]
            pending_media.extend(
                _chat_media(p, model_name) for p in parts if not isinstance(p, TextPart | ThinkPart)
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id or "",
                    "content": "\n".join(_texts(text_parts)),
                }
            )
            continue
        flush_media()
        if message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant"}
            text = "".join(_texts(parts))
            entry["content"] = text if text or not message.tool_calls else None
            thinking = _thinking(parts)
            if reasoning_key and thinking:
                entry[reasoning_key] = thinking
            if message.tool_calls:
                entry["tool_calls"] = [_chat_tool_call(c) for c in message.tool_calls]
            messages.append(entry)
        else:
            visible = [p for p in parts if not isinstance(p, ThinkPart)]
            messages.append({"role": message.role, "content": _chat_content(visible, model_name)})
    flush_media()
    return messages


def _chat_tool_call(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.function.name, "arguments": tool_arguments(call)},
    }
    # Provider data that must travel back with the call (e.g. Gemini's thought signatures).
    if call.extras and isinstance(call.extras.get("extra_content"), dict):
        out["extra_content"] = call.extras["extra_content"]
    return out


def openai_chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


# ---------------------------------------------------------------- OpenAI Responses


def _responses_media(part: Any, model_name: str) -> dict[str, Any]:
    if isinstance(part, ImageURLPart):
        return {"type": "input_image", "image_url": part.image_url.url, "detail": "auto"}
    raise _unsupported(model_name, part, "the Responses API")


def _responses_content(parts: Sequence[Any], model_name: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "input_text", "text": part.text})
        elif not isinstance(part, ThinkPart):
            out.append(_responses_media(part, model_name))
    return out


def responses_input(history: Sequence[Message], *, model_name: str) -> list[dict[str, Any]]:
    """Responses `input` items. Reasoning is passed back as encrypted items (the requests are
    stateless: `store` is false)."""
    items: list[dict[str, Any]] = []
    for message in history:
        parts = message.parts()
        if message.role == "tool":
            content = _responses_content(parts, model_name)
            only_text = all(c["type"] == "input_text" for c in content)
            output: Any = "\n".join(c["text"] for c in content) if only_text else content
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id or "", "output": output}
            )
        elif message.role == "assistant":
            for part in parts:
                if isinstance(part, ThinkPart) and part.encrypted and REASONING_TOKEN_SEP in part.encrypted:
                    item_id, _, encrypted = part.encrypted.partition(REASONING_TOKEN_SEP)
                    summary = [{"type": "summary_text", "text": part.think}] if part.think else []
                    items.append(
                        {
                            "type": "reasoning",
                            "id": item_id,
                            "summary": summary,
                            "encrypted_content": encrypted,
                        }
                    )
            text = "".join(_texts(parts))
            if text:
                items.append({"role": "assistant", "content": text})
            for call in message.tool_calls or []:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.function.name,
                        "arguments": tool_arguments(call),
                    }
                )
        else:
            role = "developer" if message.role == "system" else message.role
            items.append({"role": role, "content": _responses_content(parts, model_name)})
    return items


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "strict": False,
        }
        for t in tools
    ]


# ---------------------------------------------------------------- Anthropic Messages

_CACHE = {"type": "ephemeral"}


def _anthropic_media(part: Any, model_name: str) -> dict[str, Any]:
    if isinstance(part, ImageURLPart):
        data = parse_data_url(part.image_url.url)
        if data is not None:
            return {"type": "image", "source": {"type": "base64", "media_type": data[0], "data": data[1]}}
        return {"type": "image", "source": {"type": "url", "url": part.image_url.url}}
    raise _unsupported(model_name, part, "the Anthropic Messages API")


def _anthropic_blocks(parts: Sequence[Any], model_name: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            if part.text:  # the API rejects empty text blocks
                out.append({"type": "text", "text": part.text})
        elif not isinstance(part, ThinkPart):
            out.append(_anthropic_media(part, model_name))
    return out


def _anthropic_assistant(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts():
        if isinstance(part, ThinkPart):
            # Unsigned thinking (from another provider) would be rejected: it is left out.
            if part.encrypted and part.think:
                blocks.append({"type": "thinking", "thinking": part.think, "signature": part.encrypted})
            elif part.encrypted:
                blocks.append({"type": "redacted_thinking", "data": part.encrypted})
        elif isinstance(part, TextPart) and part.text:
            blocks.append({"type": "text", "text": part.text})
    for call in message.tool_calls or []:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.function.name, "input": tool_input(call)}
        )
    return blocks


def anthropic_messages(history: Sequence[Message], *, model_name: str) -> list[dict[str, Any]]:
    """Messages with strictly alternating roles: tool results (and any user text after them)
    share one user message; the last block is a prompt-cache breakpoint."""
    messages: list[dict[str, Any]] = []
    for message in history:
        if message.role == "assistant":
            role, blocks = "assistant", _anthropic_assistant(message)
        elif message.role == "tool":
            content = _anthropic_blocks(message.parts(), model_name)
            role = "user"
            blocks = [{"type": "tool_result", "tool_use_id": message.tool_call_id or "", "content": content}]
        else:
            role, blocks = "user", _anthropic_blocks(message.parts(), model_name)
            if message.role == "system":
                blocks = [{"type": "text", "text": f"<system>{message.text()}</system>"}]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    if messages and messages[-1]["role"] == "user":
        messages[-1]["content"][-1] = {**messages[-1]["content"][-1], "cache_control": _CACHE}
    return messages


def anthropic_system(system_prompt: str) -> list[dict[str, Any]]:
    """The system prompt as a cached block: tools and system form a stable cache prefix."""
    return [{"type": "text", "text": system_prompt, "cache_control": _CACHE}] if system_prompt else []


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
