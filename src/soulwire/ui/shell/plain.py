"""Plain line mode, for TERM=dumb and for input that is not a terminal: one line is one
prompt, output is plain text (no colours, no cursor movement), approvals and questions are
answered on a line of their own."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from soulwire.engine.client import ClientRequestError
from soulwire.runtime.options import SessionOptions
from soulwire.ui.shell.screen import Screen
from soulwire.ui.shell.view import ConversationView

if TYPE_CHECKING:
    from soulwire.runtime.builder import Runtime

_APPROVAL_KEYS = {"": "approve", "y": "approve", "a": "approve_for_session", "n": "reject"}


class PlainShell:
    def __init__(self, options: SessionOptions) -> None:
        self.options = options
        screen = Screen()
        screen.colors = None
        self.view = ConversationView(screen)

    async def _line(self, prompt: str) -> str | None:
        def read() -> str | None:
            sys.stdout.write(prompt)
            sys.stdout.flush()
            line = sys.stdin.readline()
            if line == "":  # end of input (Ctrl-D): leave the terminal on a fresh line
                sys.stdout.write("\n")
                return None
            return line.rstrip("\n")

        return await anyio.to_thread.run_sync(read)

    async def request(self, message: Any) -> Any:
        from soulwire.ui.shell.blocks import approval_renderable
        from soulwire.wire.messages import ApprovalRequest, QuestionRequest

        if isinstance(message, ApprovalRequest):
            self.view.end_run()
            self.view.print(
                approval_renderable(message.sender, message.action, message.description, message.display)
            )
            while True:
                answer = await self._line("Approve? [y]es / [a]lways this session / [n]o: ")
                if answer is None:
                    return {"request_id": message.id, "response": "reject"}
                response = _APPROVAL_KEYS.get(answer.strip().lower()[:1])
                if response is not None:
                    feedback = ""
                    if response == "reject":
                        feedback = await self._line("Reason (optional): ") or ""
                    return {"request_id": message.id, "response": response, "feedback": feedback}
        if isinstance(message, QuestionRequest):
            answers: dict[str, str] = {}
            for item in message.questions:
                self.view.note(item.question, "")
                for i, option in enumerate(item.options, 1):
                    self.view.note(f"  {i}. {option.label}", "")
                answer = await self._line("Number or text (empty dismisses): ")
                if not answer:
                    return {"request_id": message.id, "answers": {}}
                if answer.isdigit() and 1 <= int(answer) <= len(item.options):
                    answer = item.options[int(answer) - 1].label
                answers[item.question] = answer
            return {"request_id": message.id, "answers": answers}
        raise ClientRequestError("not supported in line mode", unsupported=True)

    async def main(self, first_prompt: str | None) -> int:
        from soulwire.config.loader import ConfigError
        from soulwire.config.process_env import startup_finished
        from soulwire.runtime.builder import build_runtime

        try:
            runtime = build_runtime(self.options)
        except ConfigError as exc:  # a configuration the person fixes: exit 2, as the other modes
            sys.stderr.write(f"soulwire: error: {exc}\n")
            return 2
        startup_finished()
        self.view.configure(runtime.config)
        runtime.attach_client(self)
        runtime.apply_client(supports_question=True, supports_plan_mode=True, hook_subscriptions=[])
        runtime.bus.subscribe(self.view.on_raw)
        runtime.bus.subscribe(self.view.on_merged, merged=True)
        try:
            async with runtime.running(wait_for_start=True):
                return await self._converse(runtime, first_prompt)
        finally:
            runtime.close(exit_ok=True)

    async def _converse(self, runtime: Runtime, first_prompt: str | None) -> int:
        """Read lines and run them as turns until /exit or the end of input."""
        from soulwire.llm.errors import LLMNotSet, LLMNotSupported, ProviderError

        pending = first_prompt
        while True:
            text = pending if pending is not None else await self._line("> ")
            pending = None
            if text is None or text.strip() in ("/exit", "/quit"):
                return 0
            if not text.strip():
                continue
            try:
                await runtime.soul.run(text)
            except (LLMNotSet, LLMNotSupported) as exc:
                self.view.note(f"error: {exc}", "")
            except ProviderError as exc:
                self.view.note(f"provider error: {exc}", "")
            self.view.end_run()


def run_plain(options: SessionOptions, *, first_prompt: str | None = None) -> int:
    shell = PlainShell(options)
    try:
        return anyio.run(shell.main, first_prompt)
    except KeyboardInterrupt:
        return 130
