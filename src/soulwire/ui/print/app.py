"""Print mode: run prompts without a client and print the answer (spec §8.4).

Nobody is there to approve, so tool actions are auto-approved (afk). Exit codes: 0 success,
1 permanent failure (incl. max steps), 2 no usable model (LLM not set: a configuration
error), 3 a budget limit reached (`--budget-*`), 75 retryable provider failure, 130 after
Ctrl-C, 141 when the reader of stdout went away (`| head -1`). The last two stop the turn as a
Wire `cancel` does, so the session files hold every completed step; never a traceback."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import anyio

from soulwire.config.loader import ConfigError
from soulwire.config.process_env import startup_finished
from soulwire.engine.context import tool_message
from soulwire.errors import SoulwireError
from soulwire.llm.errors import LLMNotSet, LLMNotSupported, ProviderError
from soulwire.llm.message import Message
from soulwire.runtime.builder import Runtime, build_runtime
from soulwire.runtime.options import SessionOptions
from soulwire.wire.fold import joined_text
from soulwire.wire.messages import StatusUpdate, StepRetry, ToolResult
from soulwire.wire.types import TextPart, ThinkPart, TokenUsage, ToolCall, UserInput, WireModel

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BUDGET, EXIT_RETRYABLE = 0, 1, 2, 3, 75
EXIT_CONFIG = EXIT_USAGE  # a configuration the person fixes (no model, no key) is a usage error
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


class _Printer:
    """Turns the merged event stream into text or stream-json output."""

    def __init__(self, out: TextIO, output_format: str, final_message_only: bool) -> None:
        self.out = out
        self.document = output_format == "json"
        """One JSON document at the end (`--output-format json`), nothing while it runs."""
        self.json = output_format == "stream-json"
        self.final_only = final_message_only or self.document
        self.usage = TokenUsage()
        self.turns = 0
        self.reason = "finished"
        self.error: str | None = None
        self.parts: list[Any] = []
        self.calls: list[ToolCall] = []
        self.last_text = ""
        self.closed = False
        """The reader of our output went away."""
        self.on_closed: Callable[[], None] = lambda: None

    def write(self, text: str, *, flush: bool = False) -> None:
        if self.closed:
            return
        try:
            self.out.write(text)
            if flush:
                self.out.flush()
        except BrokenPipeError:
            self.closed = True
            try:  # whatever is still buffered goes nowhere, not into an error at exit
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.out.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass
            self.on_closed()

    def raw(self, message: WireModel) -> None:
        if not self.json and not self.final_only and type(message) is TextPart:
            self.write(message.text, flush=True)

    def merged(self, message: WireModel) -> None:
        if isinstance(message, StepRetry):
            self.parts, self.calls = [], []  # the failed attempt's output is void
        elif isinstance(message, ToolCall):
            self.calls.append(message)
            if not self.json and not self.final_only:
                self.write(f"\n• {message.function.name} {message.function.arguments or ''}\n")
        elif isinstance(message, StatusUpdate):
            if message.token_usage is not None:
                self.usage = _added(self.usage, message.token_usage)
            self._end_of_step()
        elif isinstance(message, ToolResult):
            if self.json and not self.final_only:
                self._json(tool_message(message.tool_call_id, message.return_value).to_record())
        elif isinstance(message, TextPart | ThinkPart):
            self.parts.append(message)

    def _end_of_step(self) -> None:
        if not self.parts and not self.calls:
            return
        text = joined_text(self.parts)
        if text:
            self.last_text = text
        if self.json and not self.final_only:
            self._json(
                Message(role="assistant", content=self.parts, tool_calls=self.calls or None).to_record()
            )
        elif not self.json and not self.final_only and text:
            self.write("\n")
        self.parts, self.calls = [], []

    def finish(self) -> None:
        self._end_of_step()
        if self.document:
            return
        if self.final_only and self.last_text:
            if self.json:
                self._json({"role": "assistant", "content": self.last_text})
            else:
                self.write(self.last_text + "\n")
        self.write("", flush=True)

    def _json(self, record: dict[str, Any]) -> None:
        self.write(json.dumps(record, ensure_ascii=False) + "\n", flush=True)

    def document_of(self, runtime: Runtime, code: int) -> dict[str, Any]:
        """The `--output-format json` document: the final message, usage, cost, session id
        and why it ended."""
        model = runtime.soul.model
        ledger = runtime.ledger
        price = ledger.price(model.model_name) if ledger is not None and model is not None else None
        return {
            "type": "result",
            "session_id": runtime.session.id,
            "exit_reason": self.reason,
            "exit_code": code,
            "is_error": code != EXIT_OK,
            "final_message": self.last_text,
            "turns": self.turns,
            "model": model.model_name if model is not None else None,
            "usage": {**self.usage.model_dump(), "total": self.usage.total},
            "cost_usd": None if price is None else round(price.cost(self.usage), 6),
            "budget": ledger.report().model_dump(mode="json") if ledger is not None else None,
            "error": self.error,
        }


def _added(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    return TokenUsage(
        input_other=a.input_other + b.input_other,
        output=a.output + b.output,
        input_cache_read=a.input_cache_read + b.input_cache_read,
        input_cache_creation=a.input_cache_creation + b.input_cache_creation,
    )


class StdinError(SoulwireError):
    """A stream-json input line that is not a user message (reported as a usage error)."""


def _prompts(prompt: str | None, input_format: str, stdin: TextIO) -> Iterator[UserInput]:
    if input_format == "stream-json":
        for number, line in enumerate(stdin, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise StdinError(f"stdin line {number} is not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise StdinError(f'stdin line {number}: expected {{"role": "user", "content": ...}}')
            if record.get("role", "user") == "user":
                yield record.get("content", "")
        return
    text = prompt if prompt is not None else stdin.read()
    if text.strip():
        yield text


async def _run(
    runtime: Runtime, prompts: Iterator[UserInput], printer: _Printer, wait_for_tasks: bool
) -> int:
    code = EXIT_FAILED
    stopped_by: int | None = None

    async def run_prompts() -> None:
        nonlocal code
        code = await _run_prompts(runtime, prompts, printer, wait_for_tasks)
        group.cancel_scope.cancel()

    async def stop_on_signal() -> None:
        # Ctrl-C, or SIGTERM from a supervisor: the turn ends as a Wire `cancel` ends it, so
        # the running command's process group is killed before the engine exits (left to
        # the default action, SIGTERM would end the engine at once and leave that to the
        # watchdog, which may not have heard of a command started microseconds before).
        nonlocal stopped_by
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                stopped_by = int(signum)
                group.cancel_scope.cancel()

    async with runtime.running(wait_for_start=True), anyio.create_task_group() as group:
        printer.on_closed = group.cancel_scope.cancel
        group.start_soon(stop_on_signal)
        group.start_soon(run_prompts)
    if stopped_by is not None:
        return EXIT_TERMINATED if stopped_by == signal.SIGTERM else EXIT_INTERRUPTED
    return EXIT_BROKEN_PIPE if printer.closed else code


async def _run_prompts(
    runtime: Runtime, prompts: Iterator[UserInput], printer: _Printer, wait_for_tasks: bool
) -> int:
    """Each prompt's turn; then (`wait_for_tasks`: one prompt from the command line or stdin,
    not a stream of them) the background tasks the turns left running."""
    from soulwire.wire.types import user_input_adapter

    try:
        for user_input in prompts:
            try:
                parsed = user_input_adapter().validate_python(user_input)
            except ValueError:
                raise StdinError("a stream-json message's content is not text or content parts") from None
            printer.turns += 1
            try:
                outcome = await runtime.soul.run(parsed)
            except LLMNotSet as exc:  # a configuration the person fixes: a usage error
                return _failed(printer, "error", str(exc), EXIT_CONFIG)
            except LLMNotSupported as exc:
                return _failed(printer, "error", str(exc), EXIT_FAILED)
            except ProviderError as exc:
                code = EXIT_RETRYABLE if exc.retryable else EXIT_FAILED
                return _failed(printer, "provider_error", f"provider error: {exc}", code)
            if outcome.status == "max_steps_reached":
                printer.finish()
                return _failed(
                    printer,
                    "max_steps_reached",
                    f"stopped after the maximum of {outcome.steps} steps",
                    EXIT_FAILED,
                )
            if outcome.status == "budget_exceeded":
                printer.finish()
                from soulwire.engine.budget_command import stopped_note

                how = f"Raise it (--budget-*) and continue with --session {runtime.session.id}."
                return _failed(printer, "budget_exceeded", stopped_note(runtime.ledger, how), EXIT_BUDGET)
    except StdinError as exc:
        return _failed(printer, "usage_error", str(exc), EXIT_USAGE)
    tasks = runtime.tasks
    if wait_for_tasks and tasks is not None and (tasks.running() or tasks.has_notices):
        from soulwire.ui.print.background import wait_for_background

        async def run_turn(text: str) -> None:
            printer.turns += 1
            await runtime.soul.run(text, internal=True)

        ceiling = runtime.config.background.print_wait_ceiling_s
        problem = await wait_for_background(tasks, ceiling, run_turn)
        if problem is not None:
            printer.finish()
            return _failed(printer, "background_timeout", problem, EXIT_FAILED)
    if tasks is not None and (kept := tasks.outliving()):
        # `keep_alive_on_exit`: the person is told what goes on without the engine, and where
        # its output goes (the session's end does not stop it).
        listed = "; ".join(f"{t.id} ({t.description}), output in {t.output_path}" for t in kept)
        count = f"{len(kept)} background command{'s' if len(kept) > 1 else ''}"
        sys.stderr.write(f"soulwire: left {count} running ([background] keep_alive_on_exit): {listed}\n")
    overlay = runtime.soul.overlay
    if overlay is not None and (pending := await overlay.pending()):  # `ask`: nobody to ask here
        sys.stderr.write(
            f"soulwire: {len(pending)} changed file(s) wait in the overlay, not in the work dir; "
            f"commit or discard them in `soulwire --session {runtime.session.id} --overlay ask` "
            "(/overlay)\n"
        )
    printer.finish()
    return EXIT_OK


def _failed(printer: _Printer, reason: str, problem: str, code: int) -> int:
    printer.reason, printer.error = reason, problem
    sys.stderr.write(f"soulwire: {problem}\n")
    return code


def run_print(
    options: SessionOptions,
    *,
    prompt: str | None,
    input_format: str,
    output_format: str,
    final_message_only: bool,
) -> int:
    """Run print mode to completion; returns the exit code."""
    try:
        runtime = build_runtime(options)
    except ConfigError as exc:
        sys.stderr.write(f"soulwire: error: {exc}\n")
        return 2
    startup_finished()
    printer = _Printer(sys.stdout, output_format, final_message_only)
    runtime.bus.subscribe(printer.raw)
    runtime.bus.subscribe(printer.merged, merged=True)
    try:
        prompts = _prompts(prompt, input_format, sys.stdin)
        # A stream of prompts is a conversation: one turn's tasks must not hold up the next.
        code = anyio.run(_run, runtime, prompts, printer, input_format != "stream-json")
    except KeyboardInterrupt:  # before the Ctrl-C watch was set up, or during the shutdown
        code = EXIT_INTERRUPTED
    finally:
        runtime.close(exit_ok=True)
    if printer.document and code != EXIT_BROKEN_PIPE:
        if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            printer.reason = "interrupted"
        printer.write(json.dumps(printer.document_of(runtime, code), ensure_ascii=False) + "\n", flush=True)
    return code
