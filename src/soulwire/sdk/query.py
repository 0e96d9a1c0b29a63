"""`query()`: one prompt in a fresh session, as an async iterator of typed messages.

    async for message in query("fix the failing test", Options(work_dir=".", max_turns=20)):
        match message:
            case AssistantText(text=text): print(text)
            case ResultMessage() as result: print(result.stop_reason, result.cost_usd)

The engine is started, asked, and closed when the iterator ends. The last message is always
a `ResultMessage`. An engine that cannot start raises (EngineNotFoundError, …); a failure
during the turn ends with `ResultMessage(stop_reason="error", error=...)`. With
`output_format`, the final answer is validated (`ResultMessage.structured_output`), and a
reply that does not match is sent back once with the validation error. Leaving the loop
early closes the engine once the iterator is closed: use `contextlib.aclosing(query(...))`
(or let it be garbage-collected)."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any

import anyio

from soulwire.sdk.approvals import Approval, to_decision
from soulwire.sdk.errors import SDKError
from soulwire.sdk.messages import Limit, Message, MessageFolder, ResultMessage
from soulwire.sdk.options import Options
from soulwire.sdk.pricing import price_for
from soulwire.sdk.session import Session
from soulwire.sdk.structured import OutputSpec, StructuredOutputError
from soulwire.sdk.turn import Turn
from soulwire.wire.types import TextPart, TokenUsage, UserInput


def make_options(options: Options | None, settings: dict[str, Any]) -> Options:
    """An `Options` object and/or keyword settings (keywords win), checked at once."""
    unknown = sorted(set(settings) - Options.field_names())
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(unknown)}")
    return replace(options, **settings) if options is not None else Options(**settings)


async def query(
    prompt: UserInput | Sequence[Any], options: Options | None = None, /, **settings: Any
) -> AsyncGenerator[Message, None]:
    """Run `prompt` in a fresh session; yield its messages, then a `ResultMessage`.
    Settings as for `Session` (an `Options`, keywords, or both)."""
    opts = make_options(options, settings)
    started = time.perf_counter()
    spec = None if opts.output_format is None else OutputSpec(opts.output_format)
    async with Session(opts) as session:
        user_input = prompt if spec is None else _with_instruction(prompt, spec.instruction())
        previous: ResultMessage | None = None
        while True:
            result: ResultMessage | None = None
            turns = 0 if previous is None else previous.num_turns
            async for message in run_turn(session, user_input, opts, started=started, turns_before=turns):
                if type(message) is ResultMessage:
                    result = message
                else:
                    yield message
            assert result is not None
            if previous is not None:
                result = _add(previous, result, opts)
            if spec is None or result.stop_reason != "finished":
                yield result
                return
            try:
                value = spec.parse(result.text)
            except StructuredOutputError as exc:
                if previous is not None:  # retried once already
                    yield replace(result, stop_reason="error", error=exc)
                    return
                previous, user_input = result, spec.retry_prompt(exc)
                continue
            yield replace(result, structured_output=value)
            return


def _with_instruction(prompt: UserInput | Sequence[Any], instruction: str) -> Any:
    if isinstance(prompt, str):
        return prompt + instruction
    return [*prompt, TextPart(text=instruction)]


def _add(first: ResultMessage, second: ResultMessage, opts: Options) -> ResultMessage:
    """The result of a retried run: the second turn's outcome, the totals of both."""
    a, b = first.usage, second.usage
    usage = TokenUsage(
        input_other=a.input_other + b.input_other,
        output=a.output + b.output,
        input_cache_read=a.input_cache_read + b.input_cache_read,
        input_cache_creation=a.input_cache_creation + b.input_cache_creation,
    )
    price = price_for(opts.model, opts.prices)
    return replace(
        second,
        usage=usage,
        cost_usd=None if price is None else price.cost(usage),
        num_steps=first.num_steps + second.num_steps,
    )


prompt = query
"""The Kimi Agent SDK's name for `query`."""


async def run_turn(
    session: Session,
    user_input: UserInput | Sequence[Any],
    opts: Options,
    *,
    started: float | None = None,
    turns_before: int = 0,
) -> AsyncGenerator[Message, None]:
    """One turn of a started session as messages, with the limits of `opts` applied."""
    t0 = time.perf_counter() if started is None else started
    turn = session.prompt(user_input, text_as_str=True)  # the messages carry the text
    try:
        folder = MessageFolder()
        default = None if opts.on_approval is not None else to_decision(opts.approval_default)
        deadline = None if opts.turn_timeout is None else anyio.current_time() + opts.turn_timeout
        limit: Limit | None = None
        error: BaseException | None = None
        while True:
            try:
                if deadline is not None and limit is None:
                    batch: list[Any] | None = None
                    with anyio.move_on_after(deadline - anyio.current_time()):
                        batch = await turn._batch()
                    if batch is None:  # the wait was cut: the turn is being cancelled
                        limit = "turn_timeout"
                        await turn.cancel(wait=False)
                        continue
                else:
                    batch = await turn._batch()
            except SDKError as exc:
                error = exc
                break
            if not batch:
                break

            def watch(item: Any) -> None:  # sees every event but the chunks that extend a run
                if default is not None and isinstance(item, Approval) and not item.answered:
                    item.answer(default)  # nobody to ask: the declared default, at once

            for message in folder.feed_many(batch, watch):
                yield message
        for message in folder.flush():
            yield message
        yield _result(session, turn, opts, limit, error, t0, turns_before)
    finally:
        if not turn.finished:  # the consumer left early: do not leave the turn running
            with anyio.CancelScope(shield=True):
                await turn.cancel(wait=False)


def _result(
    session: Session,
    turn: Turn,
    opts: Options,
    limit: Limit | None,
    error: BaseException | None,
    started: float,
    turns_before: int,
) -> ResultMessage:
    usage = turn.usage
    price = price_for(opts.model, opts.prices)
    if error is not None or turn.error is not None:
        status, text = "error", ""
        error = error or turn.error
        limit = None
    else:
        result = turn.result
        status, text = result.status, result.final_text
        if status == "max_steps_reached":
            limit = "max_steps"
        elif status == "budget_exceeded":  # the engine enforces budgets (Options.budget)
            limit = "max_budget_usd" if opts.max_budget_usd is not None else "budget"
        elif status != "cancelled":
            limit = None  # the turn ended on its own before the cancel landed
    return ResultMessage(
        session_id=session.id,
        stop_reason=status,
        text=text,
        usage=usage,
        cost_usd=None if price is None else price.cost(usage),
        duration_s=time.perf_counter() - started,
        num_steps=sum(1 for step in turn.steps if step.n > 0),
        num_turns=turns_before + 1,
        limit=limit,
        error=error,
    )


__all__ = ["make_options", "prompt", "query", "run_turn"]
