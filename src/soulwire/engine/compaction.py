"""Context compaction (spec §4.7): when the context nears the model's window, the older
history is summarised by the model and replaced by that summary, keeping the most recent
messages verbatim.

The model call comes first and the context is rewritten only after it succeeded, in one
atomic file swap: a failed or interrupted compaction leaves the context as it was."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import anyio

from soulwire.config.model import LoopControl
from soulwire.engine import hook_points
from soulwire.engine.budget import Meter
from soulwire.engine.bus import EventBus
from soulwire.engine.context import Context, estimate_tokens
from soulwire.engine.hooks import HookEngine
from soulwire.llm.errors import APIEmptyResponseError, LLMNotSet, ProviderError
from soulwire.llm.message import Message
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.registry import ResolvedModel
from soulwire.wire.messages import CompactionBegin, CompactionEnd
from soulwire.wire.types import TextPart

PRESERVED_MESSAGES = 2
"""The most recent user/assistant messages kept verbatim (with everything after them)."""

SUMMARY_HEADER = "<system>Previous context has been compacted. Here is the compaction output:</system>"

COMPACTION_SYSTEM_PROMPT = (
    "You condense the history of a coding session so that work can continue without it. "
    "You see the conversation so far and write a faithful summary of it; you never call tools."
)

COMPACTION_INSTRUCTION = """\
Summarise the conversation above so that the assistant can continue the work from the summary \
alone. Keep:
- the user's goals, requests and constraints, in their own terms where it matters;
- decisions taken and the reasons for them;
- files, functions, commands and identifiers that were read, changed or created, with the \
essential details (paths, names, error messages);
- what has been done, what is in progress and what remains to do.
Leave out pleasantries, repeated tool output and anything superseded. Write concise Markdown."""

_RETRY_INITIAL_S = 0.3
_RETRY_MAX_S = 5.0
_RETRY_JITTER_S = 0.5


def compaction_due(token_count: int, max_context_size: int, loop: LoopControl) -> bool:
    """The 1.49 trigger: the ratio of the window is reached, or the reserve no longer fits."""
    if max_context_size <= 0:
        return False
    return (
        token_count >= max_context_size * loop.compaction_trigger_ratio
        or token_count + loop.reserved_context_size >= max_context_size
    )


def split_history(history: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(older messages to summarise, recent messages to keep)."""
    talk = [i for i, m in enumerate(history) if m.role in ("user", "assistant")]
    if len(talk) < PRESERVED_MESSAGES:
        return [], list(history)
    cut = talk[-PRESERVED_MESSAGES]
    return list(history[:cut]), list(history[cut:])


def _content_text(message: Message) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p.text for p in message.content if isinstance(p, TextPart))


def compaction_request(older: Sequence[Message], focus: str | None) -> ChatRequest:
    """One user message listing the older messages, then the instruction."""
    sections = [
        f"## Message {index}\nRole: {message.role}\nContent:\n{_content_text(message)}"
        for index, message in enumerate(older, start=1)
    ]
    instruction = COMPACTION_INSTRUCTION
    if focus:
        instruction += f"\n\nThe user asks the summary to focus on: {focus}"
    prompt = "\n\n".join([*sections, instruction])
    return ChatRequest(system_prompt=COMPACTION_SYSTEM_PROMPT, history=[Message(role="user", content=prompt)])


async def summarise(
    model: ResolvedModel, request: ChatRequest, attempts: int, meter: Meter | None = None
) -> tuple[list[Any], int]:
    """The model's summary (text parts; thinking dropped) and its size in tokens. Retries
    like a step does, without StepRetry events (the call is not streamed to the client).
    Every attempt's usage is charged to `meter`: compaction spends like any model call, and
    like any it is not made when a limit is reached (BudgetStop). Its input is a new text, not
    the context the provider counted, so no more is known of it before the call."""
    attempt = 1
    while True:
        result = StreamResult()
        chunks: list[str] = []
        if meter is not None:
            meter.check_call(0, model.model_name)
        try:
            try:
                async for part in model.provider.stream(request, result):
                    if isinstance(part, TextPart):  # thinking, media and stray tool calls are dropped
                        chunks.append(part.text)
            finally:
                if meter is not None and result.usage is not None:
                    meter.charge_aside(result.usage, model.model_name)
            summary = "".join(chunks).strip()
            if not summary:
                raise APIEmptyResponseError("The model returned an empty compaction summary.")
            tokens = result.usage.output if result.usage else len(summary) // 4
            return [TextPart(text=summary)], tokens
        except ProviderError as exc:
            if not exc.retryable or attempt >= attempts:
                raise
            wait = min(_RETRY_MAX_S, _RETRY_INITIAL_S * 2 ** (attempt - 1)) + random.uniform(
                0, _RETRY_JITTER_S
            )
            await anyio.sleep(wait)
            attempt += 1


async def compact(
    context: Context,
    model: ResolvedModel | None,
    bus: EventBus,
    *,
    max_attempts: int,
    focus: str | None = None,
    hooks: HookEngine | None = None,
    trigger: str = "manual",
    meter: Meter | None = None,
) -> None:
    """Compact `context`, bracketed by CompactionBegin/CompactionEnd (and the PreCompact /
    PostCompact hooks, `trigger` being `auto`, `manual` or `manual-with-prompt`; the call
    charged to `meter`, the budget of the soul that compacts). Without
    older messages no model call is made; the rewrite still happens. Raises
    ProviderError, LLMNotSet or BudgetStop with the context untouched."""
    older, preserved = split_history(context.history)
    await hook_points.compaction(hooks, "Pre", trigger, context.token_count)
    bus.emit(CompactionBegin())
    try:
        summary: list[Message] = []
        tokens = 0
        if older:
            if model is None:
                raise LLMNotSet("LLM is not set")
            parts, tokens = await summarise(model, compaction_request(older, focus), max_attempts, meter)
            summary = [Message(role="user", content=[TextPart(text=SUMMARY_HEADER), *parts])]
        # Synchronous from here on: a cancellation cannot land between the file swap and memory.
        context.replace_history([*summary, *preserved], token_count=tokens + estimate_tokens(preserved))
    finally:
        bus.emit(CompactionEnd())
    await hook_points.compaction(hooks, "Post", trigger, context.token_count)


async def compact_if_due(
    context: Context,
    model: ResolvedModel,
    bus: EventBus,
    loop: LoopControl,
    hooks: HookEngine | None = None,
    meter: Meter | None = None,
) -> bool:
    """Auto-compaction at the start of a step (after StepBegin, before the checkpoint)."""
    if context.is_empty or not compaction_due(context.token_count, model.max_context_size, loop):
        return False
    attempts = loop.max_retries_per_step
    await compact(context, model, bus, max_attempts=attempts, hooks=hooks, trigger="auto", meter=meter)
    return True
