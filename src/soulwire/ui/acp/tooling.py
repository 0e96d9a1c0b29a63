"""How a tool call looks in an editor: its title, ACP `kind`, the files it touches
(absolute `locations`) and the content of its result (text, diffs, a plan)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.schema import (
    ContentToolCallContent,
    FileEditToolCallContent,
    PlanEntry,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolKind,
)

from soulwire.wire.types import (
    BriefDisplayBlock,
    DiffDisplayBlock,
    TextPart,
    TodoDisplayBlock,
    ToolReturnValue,
)

ToolContent = ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent

_KINDS: dict[str, ToolKind] = {
    "Shell": "execute",
    "TaskStop": "execute",
    "ReadFile": "read",
    "ReadMediaFile": "read",
    "TaskOutput": "read",
    "TaskList": "read",
    "WriteFile": "edit",
    "StrReplaceFile": "edit",
    "Glob": "search",
    "Grep": "search",
    "FetchURL": "fetch",
    "SearchWeb": "fetch",
    "SetTodoList": "think",
    "Agent": "think",
    "EnterPlanMode": "switch_mode",
    "ExitPlanMode": "switch_mode",
}
NEVER_ASK = frozenset({"SetTodoList", "Agent", "TaskList", "TaskOutput", "FetchURL", "AskUserQuestion"})
"""Tools that never ask for approval: they are in progress as soon as the step's tools start."""

_PATH_ARGUMENT = {"ReadFile": "path", "ReadMediaFile": "path", "WriteFile": "path", "StrReplaceFile": "path"}
_SEARCH_ROOT = {"Glob": "directory", "Grep": "path"}
_TEXT_LIMIT = 20_000  # characters of a result shown in the editor (the model gets all of it)


@dataclass
class ToolView:
    """The presentation of one call, from its name and (possibly partial) arguments."""

    title: str
    kind: str
    locations: list[ToolCallLocation] = field(default_factory=list[ToolCallLocation])
    raw_input: Any = None


def tool_kind(name: str) -> ToolKind:
    return _KINDS.get(name, "other")


def _arguments(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _absolute(path: str, work_dir: Path) -> str:
    return os.path.normpath(os.path.join(work_dir, os.path.expanduser(path)))


def describe_call(name: str, raw_arguments: str | None, work_dir: Path) -> ToolView:
    """Title, kind and locations of a call; relative paths are made absolute."""
    args = _arguments(raw_arguments)
    kind = tool_kind(name)
    view = ToolView(title=name, kind=kind, raw_input=args or None)

    def text(key: str) -> str:
        value = args.get(key)
        return value if isinstance(value, str) else ""

    if name in _PATH_ARGUMENT and text("path"):
        path = _absolute(text("path"), work_dir)
        line = args.get("line_offset")
        line = line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else None
        view.locations = [ToolCallLocation(path=path, line=line)]
        verb = {"read": "Read", "edit": "Edit" if name == "StrReplaceFile" else "Write"}[kind]
        view.title = f"{verb} {text('path')}"
    elif name in _SEARCH_ROOT:
        root = text(_SEARCH_ROOT[name]) or "."
        view.locations = [ToolCallLocation(path=_absolute(root, work_dir))]
        view.title = f"{name} {text('pattern')}".strip()
    elif name == "Shell" and text("command"):
        view.title = text("command")
    elif name == "FetchURL" and text("url"):
        view.title = f"Fetch {text('url')}"
    elif name == "Agent" and text("description"):
        view.title = f"Agent: {text('description')}"
    elif name == "SetTodoList":
        view.title = "Update the plan"
    elif name in ("TaskOutput", "TaskStop") and text("task_id"):
        view.title = f"{name} {text('task_id')}"
    return view


def text_content(text: str) -> ContentToolCallContent:
    if len(text) > _TEXT_LIMIT:
        text = text[:_TEXT_LIMIT] + f"\n… ({len(text) - _TEXT_LIMIT} more characters)"
    return ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=text))


def _output_text(value: ToolReturnValue) -> str:
    if isinstance(value.output, str):
        return value.output
    return "".join(p.text for p in value.output if isinstance(p, TextPart))


def diff_content(block: DiffDisplayBlock, work_dir: Path) -> FileEditToolCallContent:
    """A diff hunk as ACP diff content (an empty old text means a new file)."""
    return FileEditToolCallContent(
        type="diff",
        path=_absolute(block.path, work_dir),
        old_text=block.old_text or None,
        new_text=block.new_text,
    )


def result_content(value: ToolReturnValue, *, work_dir: Path) -> list[ToolContent]:
    """What the editor shows for a result: diffs of edits, else the output (or the error)."""
    content: list[ToolContent] = [
        diff_content(b, work_dir)
        for b in value.display
        if isinstance(b, DiffDisplayBlock) and not b.is_summary
    ]
    if content and not value.is_error:
        return content
    text = _output_text(value)
    if value.is_error:
        brief = next((b.text for b in value.display if isinstance(b, BriefDisplayBlock)), "")
        text = "\n".join(t for t in (value.message or brief, text) if t)
    if text:
        content.append(text_content(text))
    return content


_PLAN_STATUS = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}


def plan_entries(value: ToolReturnValue) -> list[PlanEntry] | None:
    """The todo list a SetTodoList result shows, as ACP plan entries (None if it has none)."""
    for block in value.display:
        if isinstance(block, TodoDisplayBlock):
            return [
                PlanEntry(content=item.title, priority="medium", status=_PLAN_STATUS[item.status])  # pyright: ignore[reportArgumentType]
                for item in block.items
            ]
    return None
