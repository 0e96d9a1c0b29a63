"""Forking a session: a new session holding a copy of another's history, whole or up to the
end of one of its turns (the CLI's `sessions fork`, the server's fork route, the SDK).

A turn is a top-level `TurnBegin` … `TurnEnd` of wire.jsonl (nested ones, from `/init` or
flows, belong to their outer turn). Cutting the model-visible context at the same place
finds each turn's user message in context.jsonl by its text, in order; a steer's message
does not match a turn's input and stays inside its turn. A context that was compacted or
cleared no longer holds the early turns, so such a session can only be forked whole."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from soulwire.sessions.jsonl import encode_record, iter_lines
from soulwire.sessions.listing import summarise_session
from soulwire.sessions.paths import CONTEXT_FILE, WIRE_FILE, session_dir
from soulwire.sessions.store import FileSessionStore, new_session_id, read_state

WORK_DIR_KEY = "work_dir"
"""state.json: the work dir a session belongs to (the server lists sessions by it)."""


class ForkError(ValueError):
    """The session cannot be forked at that turn."""


def _turn_inputs(wire: Path) -> tuple[list[Any], list[int]]:
    """(user input of each top-level turn, byte offset of each top-level TurnBegin line)."""
    inputs: list[Any] = []
    offsets: list[int] = []
    depth = 0
    offset = 0
    for _, line in iter_lines(wire):
        here, offset = offset, offset + len(line) + 1
        if b'"TurnBegin"' not in line and b'"TurnEnd"' not in line:
            continue
        try:
            message = json.loads(line)["message"]
            kind = message["type"]
        except (ValueError, KeyError, TypeError):
            continue
        if kind == "TurnBegin":
            if depth == 0:
                inputs.append(message.get("payload", {}).get("user_input"))
                offsets.append(here)
            depth += 1
        elif kind == "TurnEnd":
            depth = max(depth - 1, 0)
    return inputs, offsets


def _text(content: Any) -> str:
    """A user input or a user message's content as comparable text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict)]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return "\n".join(str(t) for t in texts)  # pyright: ignore[reportUnknownVariableType]
    return ""


def _context_cut(records: list[dict[str, Any]], inputs: list[Any], keep: int) -> int:
    """How many context records belong to the first `keep` turns."""
    wanted = [_text(i) for i in inputs]
    next_turn = 0
    for index, record in enumerate(records):
        if record.get("role") != "user":
            continue
        text = _text(record.get("content"))
        match = next((t for t in range(next_turn, len(wanted)) if wanted[t] == text), None)
        if match is None:
            continue  # a steer, or a message a slash command added
        if match >= keep:
            cut = index
            while cut > 0 and records[cut - 1].get("role") == "_checkpoint":
                cut -= 1
            return cut
        next_turn = match + 1
    return len(records)


def _truncate(directory: Path, turns: int) -> None:
    wire = directory / WIRE_FILE
    inputs, offsets = _turn_inputs(wire)
    if turns > len(inputs):
        raise ForkError(f"the session has {len(inputs)} turns; cannot fork after turn {turns}")
    if turns == len(inputs):
        return
    if (directory / "context_1.jsonl").exists():
        raise ForkError("the session's context was compacted or cleared: it can only be forked whole")
    context = directory / CONTEXT_FILE
    records = [json.loads(line) for _, line in iter_lines(context) if line.strip()]
    cut = _context_cut(records, inputs, turns)
    context.write_text("".join(encode_record(r) + "\n" for r in records[:cut]), "utf-8")
    with wire.open("r+b") as handle:
        handle.truncate(offsets[turns])
        os.fsync(handle.fileno())


def fork_session(
    share: Path, work_dir: str, source: Path, *, turns: int | None = None, title: str | None = None
) -> tuple[str, Path]:
    """Copy the session in `source` to a new session of `work_dir`, keeping its first
    `turns` turns (None: all); returns (new id, its directory). The source is not changed."""
    if turns is not None and turns < 0:
        raise ForkError(f"turns must be >= 0, not {turns}")
    new_id = new_session_id()
    target = session_dir(share, work_dir, new_id)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("tasks", ".*"))
    try:
        if turns is not None:
            _truncate(target, turns)
        state = read_state(target)
        summary = summarise_session(source)
        old_title = state.get("custom_title") or (summary.title if summary else None)
        state["custom_title"] = title or f"Fork of {old_title or source.name}"
        state[WORK_DIR_KEY] = work_dir
        FileSessionStore(share, work_dir, new_id, protocol_version="").save_state(state)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return new_id, target


__all__ = ["WORK_DIR_KEY", "ForkError", "fork_session"]
