"""The interactive shell: a prompt that is always there, turns that run beside it.

The prompt is painted before the engine is loaded (typed text is kept; a prompt sent early
waits for the engine). While a turn runs, Enter steers it, Ctrl-C interrupts it; approvals
and questions open a picker above the input line. Finished blocks go to the scrollback."""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread
from prompt_toolkit.application import get_app_or_none
from prompt_toolkit.formatted_text import ANSI, AnyFormattedText

from soulwire.runtime.options import SessionOptions
from soulwire.ui.shell.prompt import Keys, ShellCompleter, build_session, history_path
from soulwire.ui.shell.screen import Screen

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from soulwire.runtime.builder import Runtime
    from soulwire.ui.shell.commands import UICommands
    from soulwire.ui.shell.modals import Picker
    from soulwire.ui.shell.view import ConversationView

# Nothing here imports pydantic, rich or the engine at module level: the prompt is painted
# first, and they load in a worker thread while the user starts typing.

PROMPT = "\x1b[1;36m❯\x1b[0m "
PROMPT_PLAIN = "❯ "
RESUME_TURNS = 10
EXIT_HINT = "Press Ctrl-C again or Ctrl-D to exit (or type /exit)."


class ShellApp(Keys):
    """One interactive session in the terminal."""

    def __init__(self, options: SessionOptions, *, first_prompt: str | None = None) -> None:
        self.options = options
        self.screen = Screen()
        self._view: ConversationView | None = None
        self._commands: UICommands | None = None
        self.runtime: Runtime | None = None
        self.ready = anyio.Event()
        self.exit_code: int | None = None
        self.first_prompt = first_prompt
        self._turn: anyio.CancelScope | None = None
        self._turn_running = False
        self._pickers: list[Picker] = []
        self._draft = ""
        self._steers: list[str] = []
        self._interrupted = False
        self._last_interrupt = 0.0
        self.hint = ""
        self._unsubscribe: list[Any] = []
        self._group: anyio.abc.TaskGroup | None = None
        self.session: PromptSession[str] | None = None

    @property
    def view(self) -> ConversationView:
        if self._view is None:
            from soulwire.ui.shell.view import ConversationView

            self._view = ConversationView(self.screen)
        return self._view

    @property
    def commands(self) -> UICommands:
        if self._commands is None:
            from soulwire.ui.shell.commands import UICommands

            self._commands = UICommands(self)
        return self._commands

    def _completions(self) -> list[tuple[str, str]]:
        return self.commands.completions()

    # -- Keys ---------------------------------------------------------------
    def picker(self) -> Picker | None:
        return self._pickers[0] if self._pickers else None

    def interrupt(self) -> None:
        """Ctrl-C: interrupt the turn, else clear the input, else (twice) leave."""
        picker = self.picker()
        if picker is not None:
            picker.cancel()
            if self._turn is None:
                return  # a picker of the shell's own (/sessions): closing it is enough
        if self._turn is not None:
            self._turn.cancel()
            self.hint = ""
            return
        if self._turn_running:
            return
        if self.session is not None and self.session.default_buffer.text:
            self.session.default_buffer.reset()
            return
        now = time.monotonic()
        if now - self._last_interrupt < 3:
            self.leave(0)
            return
        self._last_interrupt = now
        self.hint = EXIT_HINT
        self.invalidate()

    def rewind_picker(self) -> None:
        """Esc-Esc at an empty prompt: /rewind's picker (when no turn runs)."""
        if not self._turn_running:
            self.spawn(self.commands._rewind, "")

    def toggle_plan_mode(self) -> None:
        """Shift-Tab: plan mode on or off (the model explores and plans, changes nothing)."""
        if self.runtime is None:
            return
        enabled = self.runtime.set_plan_mode(not self.runtime.plan.enabled)
        self.runtime.save_state()
        if enabled:
            self.view.note("Plan mode is on: the model explores and plans, and changes nothing.", "cyan")
        else:
            self.view.note("Plan mode is off.", "cyan")

    def leave(self, code: int) -> None:
        self.exit_code = code
        app = get_app_or_none()
        if app is not None and app.is_running and not app.is_done:
            app.exit(result="")

    def invalidate(self) -> None:
        app = get_app_or_none()
        if app is not None and app.is_running:
            app.invalidate()

    # -- prompt area ----------------------------------------------------------
    def _message(self) -> AnyFormattedText:
        app = get_app_or_none()
        prompt = PROMPT_PLAIN if self.screen.plain else PROMPT
        if (app is not None and app.is_done) or self._view is None:
            return ANSI(prompt)
        width = self.screen.width()
        picker = self.picker()
        live = self.view.live(width, max_lines=max(3, self.screen.height() - 10), spinners=picker is None)
        if picker is not None:
            live += self.screen.ansi(picker.render(), width)
        if self.hint:
            live += self.screen.ansi(_dim(self.hint), width)
        return ANSI(live + prompt)

    def _toolbar(self) -> AnyFormattedText:
        runtime = self.runtime
        if runtime is None or self._view is None:
            return " starting… "
        status = self._view.status
        model = runtime.soul.model.model_name if runtime.soul.model else "no model configured"
        alias = self.options.model or runtime.config.default_model or ""
        parts = [f"{alias} ({model})" if alias and alias != model else model]
        if runtime.broker.yolo or runtime.broker.afk:
            parts.append("YOLO")
        if runtime.plan.enabled:
            parts.append("PLAN")
        if status.context_usage is not None:
            parts.append(f"context {status.context_usage * 100:.1f}%")
        parts.append(f"{_count(status.tokens)} tokens")
        ledger = runtime.ledger
        if ledger is not None and ledger.limited:
            from soulwire.engine.budget_command import closest_limit

            parts.append(closest_limit(ledger))
        if self._turn_running:
            parts.append("Ctrl-C interrupts")
        parts.append(_short_path(self.options.work_dir))
        return " " + " · ".join(parts) + " "

    # -- main loop ------------------------------------------------------------
    async def main(self) -> int:
        from soulwire import __version__

        # A line before the first prompt also keeps prompt_toolkit's first frame out of the
        # scrollback when the prompt starts on the top row.
        _banner(f"Soulwire {__version__} · /help lists commands · Ctrl-D exits")
        self.session = session = build_session(
            colors=self.screen.colors,
            history=history_path(self.options.share_dir, self.options.work_dir),
            message=self._message,
            toolbar=self._toolbar,
            completer=ShellCompleter(self._completions, self.options.work_dir),
            keys=self,
        )
        painted = anyio.Event()
        session.app.after_render += lambda _app: painted.set()  # pyright: ignore[reportUnknownLambdaType]
        loop_signals = _sigint_to(self.interrupt)
        code = 0
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                group.start_soon(self._load, painted)
                group.start_soon(self._tick)
                code = await self._prompt_loop(session)
                group.cancel_scope.cancel()
        finally:
            loop_signals()
            await self._close_runtime()
            self.screen.flush()
        return code

    async def _prompt_loop(self, session: PromptSession[str]) -> int:
        while self.exit_code is None:
            try:
                text = await session.prompt_async(handle_sigint=False)
            except EOFError:
                return 0
            if self.exit_code is not None:
                break
            self.hint = ""
            await self._submit(text)
        return self.exit_code

    async def _submit(self, text: str) -> None:
        if not text.strip():
            return
        if self._view is None:  # typed before the engine loaded: wait for it
            await self.ready.wait()
        stripped = text.strip()
        if stripped.startswith("/") and await self.commands.handle(stripped):
            return
        if self._turn_running:
            self._steer(text)
            return
        self.start_turn(text)

    def spawn(self, job: Any, *args: Any) -> None:
        """Run a coroutine function beside the prompt."""
        assert self._group is not None
        self._group.start_soon(job, *args)

    def start_turn(self, user_input: str) -> None:
        assert self._group is not None
        self._turn_running = True
        self._group.start_soon(self._run_turn, user_input)

    def _steer(self, text: str) -> None:
        runtime = self.runtime
        if runtime is None:
            return
        try:
            runtime.soul.steer(text)
        except Exception as exc:  # e.g. the model cannot take it
            self.view.note(f"✗ {exc}", "red")
            return
        self._steers.append(text)
        self.view.note("  (sent to the running turn; it joins at the next step)")

    async def _run_turn(self, user_input: str) -> None:
        from soulwire.llm.errors import LLMNotSet, LLMNotSupported, ProviderError

        try:
            if not self.ready.is_set():
                self.view.activity = "starting the engine"
                await self.ready.wait()
            runtime = self.runtime
            if runtime is None:
                return
            scope = anyio.CancelScope()
            self._turn = scope
            self._interrupted = False
            outcome = None
            with scope:
                outcome = await runtime.soul.run(user_input)
            if scope.cancelled_caught or outcome is None:
                self._interrupted = True
                self.view.interrupted()
            elif outcome.status == "max_steps_reached":
                self.view.note(f"Stopped after the maximum of {outcome.steps} steps.", "yellow")
            elif outcome.status == "budget_exceeded":
                from soulwire.engine.budget_command import stopped_note

                self.view.note(stopped_note(runtime.ledger), "yellow")
            if runtime.soul.overlay is not None and runtime.soul.overlay.policy == "ask":
                self.spawn(partial(self.commands.overlay_choice, after_turn=True), "")
        except (LLMNotSet, LLMNotSupported) as exc:
            self.view.note(f"✗ {exc}", "red")
        except ProviderError as exc:
            self.view.note(f"✗ provider error: {exc}", "red")
        except Exception as exc:  # the shell stays up whatever a turn does
            self.view.note(f"✗ internal error: {type(exc).__name__}: {exc}", "red")
        finally:
            self._turn = None
            self._turn_running = False
            self.view.turn_started = None
            self.invalidate()
        leftover, self._steers = self._steers, []
        if not leftover or self.exit_code is not None:
            return
        if self._interrupted:  # back into the input line, to send again or not
            if self.session is not None:
                self.session.default_buffer.insert_text("\n".join(leftover))
            return
        self.start_turn("\n".join(leftover))  # came too late for the turn: the next prompt

    async def _tick(self) -> None:
        """Spinners and elapsed times move while something runs."""
        while True:
            await anyio.sleep(0.1)
            if self._turn_running or (self._view is not None and self._view.busy_tools):
                self.invalidate()

    # -- engine ---------------------------------------------------------------
    async def _load(self, painted: anyio.Event) -> None:
        with anyio.move_on_after(1):
            await painted.wait()
        choose_session = self.options.session_id == ""
        if choose_session:
            self.options = replace(self.options, session_id=None)
        await self.switch(self.options, first=True)
        if choose_session and self.runtime is not None:
            from soulwire.sessions.listing import list_sessions

            sessions = list_sessions(self.options.share_dir, self.options.work_dir)
            if sessions:
                await self.commands.pick_session(sessions[:15])
        if self.first_prompt and self.exit_code is None:
            self.start_turn(self.first_prompt)

    async def switch(self, options: SessionOptions, *, first: bool = False) -> bool:
        """Open the session of `options` (the first one, or another: /sessions, /model, /new)."""
        from soulwire.config.loader import ConfigError

        if not first:
            await self._close_runtime()
            self.ready = anyio.Event()
        try:
            runtime = await anyio.to_thread.run_sync(_build, options)
        except ConfigError as exc:
            self.view.note(f"✗ {exc}", "red")
            if first:
                self.leave(1)
            return False
        self.options = options
        self.runtime = runtime
        self._apply_ui_settings(runtime)
        self.view.status.plan_mode = runtime.plan.enabled
        runtime.attach_client(self)
        runtime.apply_client(supports_question=True, supports_plan_mode=True, hook_subscriptions=[])
        self._unsubscribe = [
            runtime.bus.subscribe(self._on_raw),
            runtime.bus.subscribe(self._on_merged, merged=True),
        ]
        if runtime.session.resumed:
            self._show_history(runtime)
        soul = runtime.soul
        if soul.max_context_size:  # known from the start (0% for a new session)
            self.view.status.context_usage = soul.context.token_count / soul.max_context_size
        self.ready.set()
        self.invalidate()
        assert self._group is not None
        await runtime.start(self._group)
        return True

    def _apply_ui_settings(self, runtime: Runtime) -> None:
        """The configuration's keys for the terminal UI (the reference's): how the conversation
        is shown (`ConversationView.configure`) and the external editor."""
        config = runtime.config
        self.view.configure(config)
        if config.default_editor:
            # prompt_toolkit's Ctrl-X Ctrl-E runs `$VISUAL` first: the configured editor wins
            # over the environment's, as in the reference.
            os.environ["VISUAL"] = config.default_editor

    def _on_raw(self, message: Any) -> None:
        self.view.on_raw(message)
        self.invalidate()

    def _on_merged(self, message: Any) -> None:
        from soulwire.wire.messages import SteerInput

        if isinstance(message, SteerInput) and message.user_input in self._steers:
            self._steers.remove(message.user_input)  # it joined the turn: not to be sent again
        self.view.on_merged(message)
        self.invalidate()

    async def _close_runtime(self) -> None:
        runtime, self.runtime = self.runtime, None
        if runtime is None:
            return
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._tell_of_background_tasks(runtime)
        with anyio.CancelScope(shield=True):
            try:
                await runtime.stop()
            finally:
                runtime.close(exit_ok=True)

    def _tell_of_background_tasks(self, runtime: Runtime) -> None:
        """The session ends (exit, or another session): name the background tasks that end
        with it, and those `[background] keep_alive_on_exit` leaves running, with where their
        output goes. Without this a dev server started in the background vanished unsaid."""
        tasks = runtime.tasks
        if tasks is None:
            return
        stopping, kept = tasks.ending_with_session(), tasks.outliving()
        lines: list[str] = []
        if stopping:
            lines.append(f"Stopping {_tasks_count(len(stopping))} as the session ends:")
            lines += [f"  {t.id}  {t.description}" for t in stopping]
        if kept:
            lines.append(f"Left {_tasks_count(len(kept))} running ([background] keep_alive_on_exit):")
            lines += [f"  {t.id}  {t.description}  (output: {t.output_path})" for t in kept]
        if lines:  # not wrapped here: a path the terminal soft-wraps still copies as one line
            width = max(self.screen.width(), *(len(line) for line in lines))
            self.screen.write(self.screen.ansi(_dim("\n".join(lines)), width=width))

    def _show_history(self, runtime: Runtime) -> None:
        from soulwire.wire.messages import TurnBegin, parse_envelope
        from soulwire.wire.types import TextPart, ThinkPart

        turns: list[list[Any]] = []
        for record in runtime.session.store.wire_records():
            message = parse_envelope(str(record.get("type", "")), record.get("payload"))
            if isinstance(message, TurnBegin):
                turns.append([])
            if turns:
                turns[-1].append(message)
        shown = turns[-RESUME_TURNS:]
        self.view.note(
            f"── resumed session {runtime.session.id}: last {len(shown)} of {len(turns)} turns ──", "dim"
        )
        self.view.replaying = True
        try:
            for turn in shown:
                for message in turn:
                    if isinstance(message, TurnBegin):
                        self.view.replay_user(message)
                    elif isinstance(message, TextPart | ThinkPart):
                        self.view.on_raw(message)
                    else:
                        self.view.on_merged(message)
                self.view.end_run()
        finally:
            self.view.replaying = False
        self.view.note("── end of the earlier conversation ──", "dim")

    # -- the engine's requests (ClientChannel) ----------------------------------
    async def request(self, message: Any) -> Any:
        from soulwire.ui.shell.modals import answer_approval, answer_questions
        from soulwire.wire.messages import ApprovalRequest, QuestionRequest

        if isinstance(message, ApprovalRequest):
            return await answer_approval(message, self.pick, self.view)
        if isinstance(message, QuestionRequest):
            return await answer_questions(message, self.pick, self.view)
        from soulwire.engine.client import ClientRequestError

        raise ClientRequestError("the terminal shell does not serve this request", unsupported=True)

    async def pick(self, picker: Picker) -> Picker:
        buffer = self.session.default_buffer if self.session else None
        if buffer is not None and not self._pickers:
            self._draft = buffer.text
            buffer.reset()
        self._pickers.append(picker)
        self.invalidate()
        try:
            await picker.done.wait()
        finally:
            self._pickers.remove(picker)
            if buffer is not None and not self._pickers:
                buffer.reset()
                buffer.insert_text(self._draft)
                self._draft = ""
            self.invalidate()
        return picker


def _build(options: SessionOptions) -> Runtime:
    from soulwire.config.process_env import startup_finished
    from soulwire.runtime.builder import build_runtime

    runtime = build_runtime(options)
    # Loaded here, off the prompt's path, before the first answer needs them.
    import rich.markdown  # noqa: F401  # pyright: ignore[reportUnusedImport]

    import soulwire.ui.shell.commands  # pyright: ignore[reportUnusedImport]
    import soulwire.ui.shell.view  # noqa: F401  # pyright: ignore[reportUnusedImport]

    startup_finished()
    return runtime


def _sigint_to(handler: Any) -> Any:
    """SIGINT (Ctrl-C while the terminal is in cooked mode) does what the Ctrl-C key does."""
    import asyncio

    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError):
        return lambda: None
    return lambda: loop.remove_signal_handler(signal.SIGINT)


def _banner(text: str) -> None:
    """The first line: it replaces whatever the terminal echoed of keys typed before the shell
    took over (those keys are not lost: they wait for the input line)."""
    from prompt_toolkit.application.current import get_app_session
    from prompt_toolkit.formatted_text import FormattedText
    from prompt_toolkit.shortcuts import print_formatted_text

    output = get_app_session().output
    output.write_raw("\r")
    output.erase_end_of_line()
    print_formatted_text(FormattedText([("ansibrightblack", text)]), output=output, flush=True)


def _dim(text: str) -> Any:
    from rich.text import Text

    return Text(text, style="dim")


def _tasks_count(count: int) -> str:
    return f"{count} background task{'s' if count > 1 else ''}"


def _count(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


def _short_path(path: Path) -> str:
    home = Path.home()
    try:
        return "~/" + str(path.relative_to(home)) if path != home else "~"
    except ValueError:
        return str(path)


def run_app(options: SessionOptions, first_prompt: str | None = None) -> int:
    app = ShellApp(options, first_prompt=first_prompt)
    try:
        return anyio.run(app.main)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # prompt_toolkit has restored the terminal by now; no traceback
        sys.stderr.write(f"soulwire: internal error in the shell: {type(exc).__name__}: {exc}\n")
        return 1


__all__ = ["ShellApp", "run_app"]
