"""Print mode: run prompts without a client and print the answer (spec §8.4).

Nobody is there to approve, so tool actions are auto-approved (afk). Exit codes: 0 success,
1 permanent failure (incl. max steps), 2 no usable model (LLM not set: a configuration
error), 75 retryable provider failure, 130 after
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
from soulwire.engine.soul import tool_message
from soulwire.llm.errors import ChatProviderError, LLMNotSet, LLMNotSupported
from soulwire.llm.message import Message
from soulwire.runtime.builder import Runtime, build_runtime
from soulwire.runtime.options import SessionOptions
from soulwire.wire.fold import joined_text
from soulwire.wire.messages import StatusUpdate, StepRetry, ToolResult
from soulwire.wire.types import TextPart, ThinkPart, ToolCall, UserInput, WireModel

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_RETRYABLE = 0, 1, 2, 75
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


class _Printer:
    """Turns the merged event stream into text or stream-json output."""

    def __init__(self, out: TextIO, output_format: str, final_message_only: bool) -> None:
        self.out = out
        self.json = output_format == "stream-json"
        self.final_only = final_message_only
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
        if self.final_only and self.last_text:
            if self.json:
                self._json({"role": "assistant", "content": self.last_text})
            else:
                self.write(self.last_text + "\n")
        self.write("", flush=True)

    def _json(self, record: dict[str, Any]) -> None:
        self.write(json.dumps(record, ensure_ascii=False) + "\n", flush=True)


def _prompts(prompt: str | None, input_format: str, stdin: TextIO) -> Iterator[UserInput]:
    if input_format == "stream-json":
        for line in stdin:
            if not line.strip():
                continue
            record = json.loads(line)
            if isinstance(record, dict) and record.get("role", "user") == "user":  # pyright: ignore[reportUnknownMemberType]
                yield record.get("content", "")  # pyright: ignore[reportUnknownMemberType]
        return
    text = prompt if prompt is not None else stdin.read()
    if text.strip():
        yield text


async def _run(runtime: Runtime, prompts: Iterator[UserInput], printer: _Printer) -> int:
    code = EXIT_FAILED
    interrupted = False

    async def run_prompts() -> None:
        nonlocal code
        code = await _run_prompts(runtime, prompts, printer)
        group.cancel_scope.cancel()

    async def stop_on_ctrl_c() -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                interrupted = True
                group.cancel_scope.cancel()  # the turn ends as a Wire `cancel` ends it

    async with runtime.running(wait_for_start=True), anyio.create_task_group() as group:
        printer.on_closed = group.cancel_scope.cancel
        group.start_soon(stop_on_ctrl_c)
        group.start_soon(run_prompts)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_BROKEN_PIPE if printer.closed else code


async def _run_prompts(runtime: Runtime, prompts: Iterator[UserInput], printer: _Printer) -> int:
    from soulwire.wire.types import user_input_adapter

    for user_input in prompts:
        try:
            outcome = await runtime.soul.run(user_input_adapter().validate_python(user_input))
        except LLMNotSet as exc:  # a configuration the person fixes: a usage error
            sys.stderr.write(f"soulwire: {exc}\n")
            return EXIT_CONFIG
        except LLMNotSupported as exc:
            sys.stderr.write(f"soulwire: {exc}\n")
            return EXIT_FAILED
        except ChatProviderError as exc:
            sys.stderr.write(f"soulwire: provider error: {exc}\n")
            return EXIT_RETRYABLE if exc.retryable else EXIT_FAILED
        if outcome.status == "max_steps_reached":
            printer.finish()
            sys.stderr.write(f"soulwire: stopped after the maximum of {outcome.steps} steps\n")
            return EXIT_FAILED
    printer.finish()
    return EXIT_OK


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
        code = anyio.run(_run, runtime, prompts, printer)
    except KeyboardInterrupt:  # before the Ctrl-C watch was set up, or during the shutdown
        code = EXIT_INTERRUPTED
    finally:
        runtime.close(exit_ok=True)
    return code
