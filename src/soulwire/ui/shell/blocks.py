"""Rich renderables for what the shell prints: tool calls and their outcomes, diffs, todo
lists, approvals. Pure functions of protocol values; no terminal I/O here."""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.text import Text

from soulwire.wire.types import (
    BriefDisplayBlock,
    DiffDisplayBlock,
    ShellDisplayBlock,
    TextPart,
    TodoDisplayBlock,
    ToolReturnValue,
)

OUTPUT_HEAD_LINES = 8
OUTPUT_TAIL_LINES = 4
SUMMARY_CHARS = 160
_TODO_MARKS = {"done": ("✔", "green"), "in_progress": ("◐", "yellow"), "pending": ("○", "dim")}


def _arguments(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _clip(text: str, limit: int = SUMMARY_CHARS) -> str:
    """One line, as written (a command's spacing is kept), cut at `limit`."""
    lines = text.strip().splitlines() or [""]
    text = lines[0] + (" …" if len(lines) > 1 else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_summary(name: str, raw_arguments: str | None) -> str:
    """What a tool call does, in one line: the command, the file, the pattern …"""
    args = _arguments(raw_arguments)
    pick = {
        "Shell": "command",
        "ReadFile": "path",
        "ReadMediaFile": "path",
        "WriteFile": "path",
        "StrReplaceFile": "path",
        "Glob": "pattern",
        "Grep": "pattern",
        "FetchURL": "url",
        "Agent": "description",
        "TaskOutput": "task_id",
        "TaskStop": "task_id",
    }.get(name)
    if pick and isinstance(args.get(pick), str):
        text = args[pick]
        if name == "Shell":
            text = "$ " + text + ("  (background)" if args.get("run_in_background") else "")
        elif name == "Grep" and isinstance(args.get("path"), str):
            text = f"{text} in {args['path']}"
        return _clip(text)
    questions = args.get("questions")
    if name == "AskUserQuestion" and isinstance(questions, list) and questions:
        first = questions[0]
        if isinstance(first, dict) and isinstance(first.get("question"), str):
            more = f"  (+{len(questions) - 1} more)" if len(questions) > 1 else ""
            return _clip(first["question"] + more)
    if name == "SetTodoList" and isinstance(args.get("todos"), list):
        return f"{len(args['todos'])} items"
    if not args:
        raw = (raw_arguments or "").strip()
        return "" if raw in ("", "{}", "null") else _clip(raw)
    return _clip(", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()))


def tool_call_line(name: str, summary: str) -> Text:
    line = Text("● ", style="cyan")
    line.append(name, style="bold")
    if summary:
        line.append("  " + summary)
    return line


def output_text(value: ToolReturnValue) -> str:
    """The textual output of a tool (media parts are named, not shown)."""
    if isinstance(value.output, str):
        return value.output
    pieces: list[str] = []
    for part in value.output:
        pieces.append(part.text if isinstance(part, TextPart) else f"[{part.type}]")
    return "\n".join(pieces)


def _indented(renderable: RenderableType, first: str = "  ⎿ ") -> RenderableType:
    """`renderable` in a column to the right of `first` (long lines wrap inside the column)."""
    from rich.table import Table

    grid = Table.grid()
    grid.add_column(width=len(first), no_wrap=True)
    grid.add_column()
    grid.add_row(first, renderable)
    return grid


def truncated_output(text: str, hint: str) -> Text:
    """Head and tail of a long output, with how to see it all."""
    lines = text.rstrip("\n").split("\n")
    out = Text(style="")
    if len(lines) <= OUTPUT_HEAD_LINES + OUTPUT_TAIL_LINES + 1:
        out.append("\n".join(lines))
        return out
    hidden = len(lines) - OUTPUT_HEAD_LINES - OUTPUT_TAIL_LINES
    out.append("\n".join(lines[:OUTPUT_HEAD_LINES]) + "\n")
    out.append(f"… {hidden} more lines ({hint} shows all) …\n", style="dim italic")
    out.append("\n".join(lines[-OUTPUT_TAIL_LINES:]))
    return out


def diff_renderable(block: DiffDisplayBlock) -> RenderableType:
    """A diff block: numbered lines, removals red, additions green, context dim."""
    header = Text(block.path, style="bold", overflow="fold")  # a long path wraps: its file name stays seen
    if block.is_summary:
        return Group(header, Text(f"{block.old_text} → {block.new_text}", style="dim"))
    old, new = block.old_text.split("\n"), block.new_text.split("\n")
    if block.old_text == "":
        old = []
    body = Text()
    width = len(str(max(block.old_start + len(old), block.new_start + len(new))))
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                body.append(f"{block.new_start + j1 + k:>{width}}   {old[i1 + k]}\n", style="dim")
            continue
        for k in range(i1, i2):
            body.append(f"{block.old_start + k:>{width}} - {old[k]}\n", style="red")
        for k in range(j1, j2):
            body.append(f"{block.new_start + k:>{width}} + {new[k]}\n", style="green")
    body.rstrip()
    return Group(header, body)


def todo_renderable(block: TodoDisplayBlock) -> Text:
    out = Text()
    for i, item in enumerate(block.items):
        mark, style = _TODO_MARKS.get(item.status, ("○", "dim"))
        out.append(f"{mark} ", style=style)
        out.append(item.title, style="strike dim" if item.status == "done" else "")
        if i < len(block.items) - 1:
            out.append("\n")
    return out


def display_renderables(display: list[Any], *, skip_diffs: bool = False) -> list[RenderableType]:
    out: list[RenderableType] = []
    for block in display:
        if isinstance(block, DiffDisplayBlock):
            if not skip_diffs:
                out.append(diff_renderable(block))
        elif isinstance(block, TodoDisplayBlock):
            out.append(todo_renderable(block))
        elif isinstance(block, BriefDisplayBlock) and block.text:
            out.append(Text(block.text, style="dim"))
        elif isinstance(block, ShellDisplayBlock):
            continue  # the command is already on the call line
    return out


def tool_result_renderable(
    name: str, value: ToolReturnValue, *, index: int, diff_shown: bool
) -> RenderableType:
    """The outcome of one tool call, indented under its call line."""
    parts: list[RenderableType] = []
    if value.is_error:
        message = value.message or output_text(value) or "failed"
        parts.append(_indented(Text(f"✗ {message}", style="red")))
        parts.extend(_indented(r) for r in display_renderables(value.display))
        return Group(*parts)
    text = output_text(value)
    extra = display_renderables(value.display, skip_diffs=diff_shown)
    if name in ("Shell", "Agent"):  # a command's output, a sub-agent's report: worth reading
        body = (
            truncated_output(text, f"/output {index}") if text.strip() else Text("(no output)", style="dim")
        )
        parts.append(_indented(body))
    elif extra:
        parts.append(_indented(Text(value.message or "done", style="dim")))
    else:
        lines = text.count("\n") + 1 if text else 0
        note = value.message or (f"{lines} lines of output" if lines else "done")
        parts.append(_indented(Text(f"{_clip(note)}  (/output {index})", style="dim")))
    parts.extend(_indented(r, first="    ") for r in extra)
    return Group(*parts)


# What a delegated ACP agent's tool kind (its approval's action is `acp:AGENT:KIND`, the key
# rules match) means to a person; the web UI's dialogs.js says the same.
_ACP_KINDS = {
    "read": "read files",
    "edit": "edit files",
    "delete": "delete files",
    "move": "move files",
    "search": "search",
    "execute": "run a command",
    "fetch": "fetch from the network",
}


def spoken_action(action: str) -> str:
    """An approval's action as a person reads it (`acp:kimi:edit` → `edit files (ACP)`)."""
    if action.startswith("acp:"):
        kind = action.rsplit(":", 1)[-1]
        return f"{_ACP_KINDS.get(kind, 'act')} (ACP)"
    return action


def approval_renderable(
    sender: str, action: str, description: str, display: list[Any], *, subagent: str | None = None
) -> RenderableType:
    head = Text("? ", style="bold yellow")
    head.append(f"{sender} wants to {spoken_action(action)}", style="bold")
    if subagent:
        head.append(f"  (asked by the {subagent} sub-agent)", style="dim")
    parts: list[RenderableType] = [head]
    for block in display:
        if isinstance(block, ShellDisplayBlock):
            parts.append(_indented(Text("$ " + block.command, style="bold"), first="    "))
    parts.extend(_indented(r, first="    ") for r in display_renderables(display))
    if description and not any(isinstance(b, ShellDisplayBlock | DiffDisplayBlock) for b in display):
        parts.append(_indented(Text(description), first="    "))
    return Group(*parts)


def plain(text: str) -> str:
    """Text safe for rich markup (used for user-provided strings in markup)."""
    return escape(text)
