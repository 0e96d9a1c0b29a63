"""Offline providers driven by the echo DSL (spec §11): `_scripted_echo` pops one script per
model call from a file; `_echo` reads the script from the last user message.

Beyond the spec: a script with an `error:` line and a `usage:` line fails with that error
having reported that usage, as a provider that counted the failed call does (the engine
charges it against the budget)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any

from soulwire.config.scripts_file import ScriptsFileError, read_scripts, scripts_path
from soulwire.llm.errors import APIConnectionError, APITimeoutError, ProviderError, status_error
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.wire.types import (
    AudioURLPart,
    FunctionCall,
    ImageURLPart,
    MediaURL,
    TextPart,
    ThinkPart,
    TokenUsage,
    ToolCall,
    ToolCallPart,
    VideoURLPart,
    WireModel,
)

TRACE_ENV = ("SOULWIRE_SCRIPTED_ECHO_TRACE", "KIMI_SCRIPTED_ECHO_TRACE")
_CHECKPOINT_EVERY = 64  # parts between yields to the event loop: lets writers flush and cancel land
_TOKEN_SPLIT = re.compile(r"[\s,]+")


class ScriptError(ProviderError):
    """A script is malformed (never retried)."""


class Script:
    """One parsed script: the parts to stream, plus message id, usage or a simulated error."""

    __slots__ = ("error", "message_id", "parts", "usage")

    def __init__(self) -> None:
        self.parts: list[WireModel] = []
        self.message_id: str | None = None
        self.usage: TokenUsage | None = None
        self.error: ProviderError | None = None


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _key_values(payload: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for token in _TOKEN_SPLIT.split(payload.strip()):
        if not token:
            continue
        key, sep, value = token.partition("=")
        if not sep:
            raise ValueError(f"expected key=value, got {token!r}")
        out[key] = value
    return out


def _object(payload: str) -> dict[str, Any]:
    text = payload.strip()
    if text.startswith("{"):
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError("expected a JSON object")
        return value
    return _key_values(text)


def _media(payload: str) -> MediaURL:
    text = payload.strip()
    if text.startswith("{"):
        return MediaURL.model_validate(json.loads(text))
    return MediaURL(url=text)


def _tool_call(payload: str) -> ToolCall:
    obj = _object(payload)
    function: dict[str, Any] = obj.get("function") if isinstance(obj.get("function"), dict) else {}  # type: ignore[assignment]
    call_id = obj.get("id")
    name = obj.get("name", function.get("name"))
    arguments = obj.get("arguments", function.get("arguments"))
    if not isinstance(call_id, str) or not call_id:
        raise ValueError("tool_call needs a string `id`")
    if not isinstance(name, str) or not name:
        raise ValueError("tool_call needs a string `name`")
    if arguments is not None and not isinstance(arguments, str):
        raise ValueError("tool_call `arguments` must be a JSON string or null")
    extras = obj.get("extras")
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments), extras=extras)


def _tool_call_part(payload: str) -> ToolCallPart:
    text = payload.strip()
    if not text or text.lower() in ("null", "none"):
        return ToolCallPart(arguments_part=None)
    try:
        value = json.loads(text)
    except ValueError:
        return ToolCallPart(arguments_part=text)
    if isinstance(value, dict) and "arguments_part" in value:
        part = value["arguments_part"]
        return ToolCallPart(arguments_part=None if part is None else str(part))
    if isinstance(value, str):
        return ToolCallPart(arguments_part=value)
    return ToolCallPart(arguments_part=json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def _usage(payload: str) -> TokenUsage:
    obj = _object(payload)
    return TokenUsage(**{k: int(v) for k, v in obj.items() if k in TokenUsage.model_fields})


def _error(payload: str) -> ProviderError:
    head, _, rest = payload.strip().partition(" ")
    rest = rest.strip()
    if head.lower() == "connection":
        return APIConnectionError(rest or "Simulated connection error")
    if head.lower() == "timeout":
        return APITimeoutError(rest or "Simulated timeout error")
    if head.isdigit():
        return status_error(int(head), rest or f"Simulated {head} error")
    raise ValueError(f"unknown error kind {head!r}")


def _lines(script: str) -> Iterator[tuple[int, str]]:
    # Found one at a time: a huge script never becomes a huge list (or copy) of lines.
    start, number, size = 0, 0, len(script)
    while start < size:
        end = script.find("\n", start)
        if end < 0:
            end = size
        number += 1
        line = script[start:end].strip()
        start = end + 1
        if line and not line.startswith(("#", "```")) and line.lower() != "echo":
            yield number, line


def _parse_line(number: int, line: str, out: Script) -> WireModel | None:
    """Apply one DSL line: a streamable part is returned, id/usage/error go into `out`."""
    kind, sep, payload = line.partition(":")
    if not sep:
        raise ScriptError(f"Invalid echo DSL at line {number}: {line!r}")
    kind = kind.strip().lower()
    if payload.startswith(" "):
        payload = payload[1:]
    try:
        if kind == "text":
            return TextPart(text=_unquote(payload))
        if kind == "think":
            return ThinkPart(think=_unquote(payload))
        if kind == "image_url":
            return ImageURLPart(image_url=_media(payload))
        if kind == "audio_url":
            return AudioURLPart(audio_url=_media(payload))
        if kind == "video_url":
            return VideoURLPart(video_url=_media(payload))
        if kind == "tool_call":
            return _tool_call(payload)
        if kind == "tool_call_part":
            return _tool_call_part(payload)
        if kind == "id":
            out.message_id = payload.strip()
        elif kind == "usage":
            out.usage = _usage(payload)
        elif kind == "error":
            out.error = _error(payload)
        else:
            raise ScriptError(f"Unknown echo DSL kind {kind!r} at line {number}: {line!r}")
    except ScriptError:
        raise
    except (ValueError, TypeError) as exc:
        raise ScriptError(f"Invalid echo DSL at line {number}: {line!r} ({exc})") from None
    return None


def parse_script(script: str) -> Script:
    """Parse a whole script at once; malformed input raises ScriptError with the line."""
    out = Script()
    for number, line in _lines(script):
        part = _parse_line(number, line, out)
        if part is not None:
            out.parts.append(part)
    if out.error is None and not out.parts:
        raise ScriptError(NO_PARTS)
    return out


NO_PARTS = "Echo DSL produced no streamable parts."


_HEAD_LINE = re.compile(r"^[ \t]*(?:error|id|usage)[ \t]*:.*$", re.MULTILINE | re.IGNORECASE)


def _preflight(script: str) -> Script:
    """What must be known before the first part streams: a simulated error fails the call
    before any output, and id/usage belong to the whole step. One regex pass finds those
    lines, so the first part of a 100k-line script streams at once; other lines are checked
    as they stream."""
    head = Script()
    if "error" not in script.lower():
        return head  # id/usage lines are picked up while streaming
    for match in _HEAD_LINE.finditer(script):
        number = script.count("\n", 0, match.start()) + 1
        _parse_line(number, match.group(0).strip(), head)
    return head


def load_scripts(env: dict[str, str] | None = None) -> list[str]:
    """Read the scripts file named by the environment: a JSON list of strings, or text with
    scripts separated by lines of `---` (llm/scripts_file.py)."""
    try:
        return read_scripts(scripts_path(dict(os.environ) if env is None else env))
    except ScriptsFileError as exc:
        raise ScriptError(str(exc)) from None


async def _play(script: str, result: StreamResult) -> AsyncIterator[WireModel]:
    import anyio.lowlevel

    head = _preflight(script)
    if head.error is not None:  # with a `usage:` line, the failed call reports it (counted, so billed)
        result.message_id, result.usage = head.message_id, head.usage
        raise head.error
    result.message_id = head.message_id
    result.usage = head.usage
    streamed = 0
    for number, line in _lines(script):
        part = _parse_line(number, line, head)
        if part is None:
            result.message_id, result.usage = head.message_id, head.usage
            continue
        if streamed % _CHECKPOINT_EVERY == 0:
            await anyio.lowlevel.checkpoint()
        streamed += 1
        yield part
    if not streamed:
        raise ScriptError(NO_PARTS)


class _OfflineProvider:
    """What the offline providers share: declared capabilities, nothing to close."""

    def __init__(self, *, capabilities: frozenset[str] = frozenset()) -> None:
        self._capabilities = capabilities

    @property
    def capabilities(self) -> frozenset[str]:
        return self._capabilities

    async def aclose(self) -> None:
        """Nothing is held open."""


class ScriptedEchoProvider(_OfflineProvider):
    """`_scripted_echo`: every model call (steps, retries, compaction) pops the next script."""

    def __init__(
        self, scripts: list[str], *, capabilities: frozenset[str] = frozenset(), trace: bool = False
    ) -> None:
        super().__init__(capabilities=capabilities)
        self._scripts = deque(scripts)
        self._calls = 0
        self._trace = trace

    @property
    def model_name(self) -> str:
        return "scripted_echo"

    def stream(self, request: ChatRequest, result: StreamResult) -> AsyncIterator[WireModel]:
        self._calls += 1
        if not self._scripts:
            raise ProviderError(f"ScriptedEchoChatProvider exhausted at turn {self._calls}.")
        text = self._scripts.popleft()
        if self._trace:
            sys.stderr.write(f"[scripted_echo] call {self._calls}:\n{text}\n")
        return _play(text, result)


class EchoProvider(_OfflineProvider):
    """`_echo`: the last user message is the script."""

    @property
    def model_name(self) -> str:
        return "echo"

    def stream(self, request: ChatRequest, result: StreamResult) -> AsyncIterator[WireModel]:
        last = next((m for m in reversed(request.history) if m.role == "user"), None)
        return _play(last.text() if last else "", result)
