"""The conversation view: engine events in, finished blocks out to the scrollback, and the
live part (the paragraph being written, running tools with spinners) for the prompt area.

Text streams into a buffer that is printed one finished Markdown block at a time (a block
ends at a blank line outside a code fence), so long answers land in the terminal's own
scrollback while they are written and only the unfinished block is redrawn."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.text import Text

from soulwire.sessions.interrupted import CANCELLED, interruption
from soulwire.ui.shell import blocks
from soulwire.ui.shell.screen import Screen
from soulwire.wire.messages import (
    ApprovalResponse,
    CompactionBegin,
    CompactionEnd,
    HookResolved,
    MCPLoadingBegin,
    MCPLoadingEnd,
    Notification,
    PlanDisplay,
    StatusUpdate,
    SteerInput,
    StepInterrupted,
    StepRetry,
    SubagentEvent,
    ToolResult,
    TurnBegin,
    TurnEnd,
)
from soulwire.wire.types import TextPart, ThinkPart, ToolCall, WireModel, user_input_text

if TYPE_CHECKING:
    from soulwire.config.model import Config

LIVE_MAX_LINES = 12


class BlockSplitter:
    """Cuts streamed Markdown into finished blocks: text up to a blank line outside a fence."""

    def __init__(self) -> None:
        self.pending = ""
        self._scanned = 0
        self._fence: str | None = None

    def feed(self, text: str) -> list[str]:
        self.pending += text
        done: list[str] = []
        while True:
            end = self.pending.find("\n", self._scanned)
            if end < 0:
                return done
            line = self.pending[self._scanned : end].strip()
            self._scanned = end + 1
            marker = line[:3]
            if marker in ("```", "~~~"):
                if self._fence is None:
                    self._fence = marker
                elif marker == self._fence and line.strip("`~ ") == "":
                    self._fence = None
            elif not line and self._fence is None:
                block, self.pending = self.pending[: self._scanned], self.pending[self._scanned :]
                self._scanned = 0
                if block.strip():
                    done.append(block.strip("\n"))

    def rest(self) -> str:
        text, self.pending, self._scanned, self._fence = self.pending, "", 0, None
        return text.strip("\n")


@dataclass
class RunningTool:
    name: str
    summary: str
    spinner_key: str
    started: float = field(default_factory=time.monotonic)


@dataclass
class StatusLine:
    model: str = ""
    context_usage: float | None = None
    tokens: int = 0
    plan_mode: bool = False


CODE_THEMES = {"dark": "monokai", "light": "friendly"}
"""The Pygments style of code blocks for each `theme`: a dark background would stand out as a
slab on a light terminal. Everything else uses the terminal's own palette (named colours)."""


class ConversationView:
    """Turns the engine's events into printed blocks and a live area."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self.status = StatusLine()
        self._splitter = BlockSplitter()
        self._kind: str | None = None  # "text" or "think" while a run streams
        self._calls: dict[str, RunningTool] = {}
        self._names: dict[str, str] = {}
        self._diffs_shown: set[str] = set()
        self.outputs: list[tuple[str, str]] = []
        """(call line, full output) of every tool result, for /output."""
        self.activity = ""
        self._live_cache: tuple[tuple[int, int], str] | None = None
        self.turn_started: float | None = None
        self._spinners: dict[str, Any] = {}
        self._gapped = False
        self._unfinished: list[RunningTool] = []
        self.show_thinking = True
        """`show_thinking_stream` (config): False shows the label and, once the thinking ends,
        one line of how long it was instead of its text."""
        self._thought: tuple[float, int] | None = None  # (started, characters) while hidden
        self.replaying = False
        """Showing an earlier conversation (resume): how long a thinking took is not known."""
        self.code_theme = CODE_THEMES["dark"]
        """The colours of code blocks (their own background): `theme` in the configuration."""

    def configure(self, config: Config) -> None:
        """The configuration's keys for how the conversation is shown (the reference's):
        `show_thinking_stream` and `theme`."""
        self.show_thinking = config.show_thinking_stream
        self.code_theme = CODE_THEMES[config.theme]

    # -- event sinks ------------------------------------------------------------
    def on_raw(self, message: WireModel) -> None:
        """Streamed text and thinking, chunk by chunk."""
        if type(message) is TextPart:
            self._stream("text", message.text)
        elif type(message) is ThinkPart:
            self._stream("think", message.think)

    def on_merged(self, message: WireModel) -> None:
        """Everything else, once complete (tool calls with their whole arguments)."""
        if isinstance(message, TextPart | ThinkPart):
            return
        if isinstance(message, ToolCall):
            self.end_run()
            self._on_call(message)
        elif isinstance(message, ToolResult):
            self._on_result(message)
        elif isinstance(message, StatusUpdate):
            self._on_status(message)
        elif isinstance(message, TurnBegin):
            self.turn_started = time.monotonic()
        elif isinstance(message, TurnEnd):
            self.end_run()
            self._unfinished = list(self._calls.values())
            self._calls.clear()
            self._spinners.clear()
            self.activity = ""
            self.turn_started = None
        elif isinstance(message, SteerInput):
            self.end_run()
            self.print(Text("» " + user_input_text(message.user_input), style="bold magenta"))
        elif isinstance(message, PlanDisplay):
            self.end_run()
            self._on_plan(message)
        elif isinstance(message, ApprovalResponse):
            self._on_approval_response(message)
        elif isinstance(message, StepRetry):
            self.end_run()
            retry = (
                f"↻ {message.error_type}: retrying (attempt {message.next_attempt}/{message.max_attempts})"
            )
            self.print(Text(retry, style="yellow"))
        elif isinstance(message, StepInterrupted):
            self.end_run()
        elif isinstance(message, CompactionBegin):
            self.end_run()
            self.activity = "compacting the context"
        elif isinstance(message, CompactionEnd):
            self.activity = ""
            self.print(Text("✓ context compacted", style="dim"))
        elif isinstance(message, MCPLoadingBegin):
            self.activity = "connecting MCP servers"
        elif isinstance(message, MCPLoadingEnd):
            self.activity = ""
        elif isinstance(message, Notification):
            self.end_run()
            self.print(Text(f"🔔 {message.title}", style="cyan"))
        elif isinstance(message, SubagentEvent):
            self._on_subagent(message)
        elif isinstance(message, HookResolved) and message.action == "block":
            self.end_run()
            target = f" ({message.target})" if message.target else ""
            reason = f": {message.reason}" if message.reason else ""
            self.print(Text(f"⛔ {message.event} hook{target} blocked{reason}", style="yellow"))

    def replay_user(self, message: TurnBegin) -> None:
        """A user prompt of an earlier turn (resume), as the prompt showed it."""
        self.end_run()
        self.gap()
        text = user_input_text(message.user_input)
        self.print(Text("❯ " + text.replace("\n", "\n  "), style="bold"))

    # -- streaming text ---------------------------------------------------------
    def _stream(self, kind: str, text: str) -> None:
        if self._kind != kind:
            self.end_run()
            self._kind = kind
            self.gap()
            if kind == "think" and not self.show_thinking:
                self._thought = (time.monotonic(), 0)
            elif kind == "think":
                self.print(Text("∴ Thinking", style="dim italic bold"))
                self._gapped = True  # its first paragraph follows right under the label
        if kind == "think" and self._thought is not None:
            self._thought = (self._thought[0], self._thought[1] + len(text))
            return
        for block in self._splitter.feed(text):
            self._print_block(kind, block)

    def end_run(self) -> None:
        """The streamed run is over: print what is left of it."""
        if self._kind is None:
            return
        if self._thought is not None:
            started, characters = self._thought
            self._thought = None
            took = "" if self.replaying else f" for {time.monotonic() - started:.1f}s"
            self.print(Text(f"∴ Thought{took} ({characters:,} characters)", style="dim italic"))
            self._kind = None
            return
        rest = self._splitter.rest()
        if rest.strip():
            self._print_block(self._kind, rest)
        self._kind = None
        self._live_cache = None

    def _print_block(self, kind: str, block: str) -> None:
        self._live_cache = None
        self.gap()
        self.print(self._block_renderable(kind, block))

    def _block_renderable(self, kind: str, block: str) -> RenderableType:
        if kind == "think":
            return Text(block, style="dim italic")
        from rich.markdown import Markdown

        return Markdown(block, code_theme=self.code_theme, justify="default")  # no padding to the width

    # -- tools --------------------------------------------------------------
    def _on_call(self, call: ToolCall) -> None:
        name = call.function.name
        summary = blocks.call_summary(name, call.function.arguments)
        self._calls[call.id] = RunningTool(name, summary, call.id)
        self._names[call.id] = name
        self.gap()
        self.print(blocks.tool_call_line(name, summary))

    def _on_result(self, result: ToolResult) -> None:
        self.end_run()
        running = self._calls.pop(result.tool_call_id, None)
        self._spinners.pop(result.tool_call_id, None)
        name = running.name if running else self._names.get(result.tool_call_id, "tool")
        value = result.return_value
        if (why := interruption(value)) is not None:
            # a call the turn's end cut short (its result says so): shown as the interruption,
            # with its cause unless it is the person's own cancel
            cause = "" if why.startswith(CANCELLED) else ": " + why
            self.print(Text(f"  ⎿ ⏹ interrupted ({name}){cause}", style="yellow"))
            return
        label = f"{name}  {running.summary}" if running else name
        self.outputs.append((label, blocks.output_text(result.return_value)))
        self.print(
            blocks.tool_result_renderable(
                name,
                result.return_value,
                index=len(self.outputs),
                diff_shown=result.tool_call_id in self._diffs_shown,
            )
        )

    def interrupted(self) -> None:
        """The turn was cancelled: say so, naming the tools that were still running."""
        self.end_run()
        for tool in self._unfinished or list(self._calls.values()):
            self.print(Text(f"  ⎿ ⏹ interrupted ({tool.name})", style="yellow"))
        self._unfinished = []
        self._calls.clear()
        self.print(Text("⏹ Turn interrupted. Type your next message.", style="yellow"))

    def approval_shown(self, tool_call_id: str, has_diff: bool) -> None:
        if has_diff:
            self._diffs_shown.add(tool_call_id)

    def _on_approval_response(self, message: ApprovalResponse) -> None:
        if message.response == "approve":
            line = Text("  ✓ approved once", style="green")
        elif message.response == "approve_for_session":
            line = Text("  ✓ approved for this session", style="green")
        else:
            line = Text("  ✗ rejected" + (f": {message.feedback}" if message.feedback else ""), style="red")
        self.print(line)

    def _on_subagent(self, message: SubagentEvent) -> None:
        inner = message.event
        kind = inner.get("type")
        payload = inner.get("payload")
        if kind == "ToolCall" and isinstance(payload, dict):
            function = payload.get("function") or {}
            name = str(function.get("name", "tool"))
            summary = blocks.call_summary(name, function.get("arguments"))
            self.print(Text(f"    ↳ {message.subagent_type or 'agent'}: {name}  {summary}", style="dim"))
            self.activity = f"sub-agent: {name}"

    def _on_plan(self, message: PlanDisplay) -> None:
        from rich.markdown import Markdown
        from rich.panel import Panel

        self.print(Panel(Markdown(message.content), title="Plan", subtitle=message.file_path, expand=True))

    def _on_status(self, message: StatusUpdate) -> None:
        if message.context_usage is not None:
            self.status.context_usage = message.context_usage
        if message.token_usage is not None:
            self.status.tokens += message.token_usage.total
        if message.plan_mode is not None:
            self.status.plan_mode = message.plan_mode

    # -- output ---------------------------------------------------------------
    def print(self, renderable: RenderableType) -> None:
        self.screen.print(renderable)
        self._gapped = False

    def gap(self) -> None:
        """One empty line between sections (never two)."""
        if not self._gapped:
            self.screen.write("\n")
            self._gapped = True

    def note(self, text: str, style: str = "dim") -> None:
        """A message of the shell itself (not of the model)."""
        self.end_run()
        self.print(Text(text, style=style))

    def _spinner(self, key: str, label: Text) -> RenderableType:
        """A rich spinner that keeps its phase from frame to frame."""
        from rich.spinner import Spinner

        spinner = self._spinners.get(key)
        if spinner is None:
            spinner = self._spinners[key] = Spinner("dots", label, style="cyan")
        else:
            spinner.update(text=label)
        return spinner

    @property
    def busy_tools(self) -> list[RunningTool]:
        return list(self._calls.values())

    def live(self, width: int, max_lines: int = LIVE_MAX_LINES, *, spinners: bool = True) -> str:
        """ANSI text of the live area: the block being written and what is running."""
        pending = self._splitter.pending
        parts: list[str] = []
        if pending.strip() and self._kind is not None:
            key = (len(pending), width)
            if self._live_cache is None or self._live_cache[0] != key:
                rendered = self.screen.ansi(self._block_renderable(self._kind, pending), width)
                lines = rendered.rstrip("\n").split("\n")
                self._live_cache = (key, "\n".join(lines[-max_lines:]) + "\n")
            parts.append(self._live_cache[1])
        if not spinners:
            return "".join(parts)
        now = time.monotonic()
        spinner_lines: list[RenderableType] = []
        for tool in self._calls.values():
            label = Text(f"{tool.name}  {tool.summary[: max(10, width - 30)]}  ")
            label.append(f"{now - tool.started:.0f}s", style="dim")
            spinner_lines.append(self._spinner(tool.spinner_key, label))
        if not spinner_lines and self.turn_started is not None and not pending.strip():
            doing = "Thinking" if self._thought is not None else self.activity or "Working"
            label = Text(f"{doing}…  ")
            label.append(f"{now - self.turn_started:.0f}s  (Ctrl-C to interrupt)", style="dim")
            spinner_lines.append(self._spinner("turn", label))
        if spinner_lines:
            parts.append(self.screen.ansi(Group(*spinner_lines), width))
        return "".join(parts)
