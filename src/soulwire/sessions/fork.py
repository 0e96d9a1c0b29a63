"""Forking a session: a new session holding a copy of another's history, whole or up to the
end of one of its turns (the CLI's `sessions fork`, the server's fork route, the SDK).

The file store copies the session's directory (`fork_session`); another store (PostgreSQL)
copies the records through the store protocol into a new session of the same store
(`fork_stored`); `fork_from_store` picks the way for a session's store.

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
from typing import Any, Protocol, runtime_checkable

from soulwire.errors import SoulwireError
from soulwire.sessions.jsonl import encode_record, iter_lines
from soulwire.sessions.listing import prompt_title, summarise_session
from soulwire.sessions.paths import CONTEXT_FILE, WIRE_FILE, session_dir
from soulwire.sessions.store import FileSessionStore, SessionStore, new_session_id, read_state

WORK_DIR_KEY = "work_dir"
"""state.json: the work dir a session belongs to (the server lists sessions by it)."""


class ForkError(SoulwireError, ValueError):
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


def turn_starts(messages: list[dict[str, Any]]) -> list[int]:
    """Indexes of the top-level TurnBegin messages (nested turns belong to their outer one)."""
    starts: list[int] = []
    depth = 0
    for index, message in enumerate(messages):
        kind = message.get("type")
        if kind == "TurnBegin":
            if depth == 0:
                starts.append(index)
            depth += 1
        elif kind == "TurnEnd":
            depth = max(depth - 1, 0)
    return starts


def text_of(content: Any) -> str:
    """A user input or a user message's content as comparable text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "\n".join(str(t) for t in texts)
    return ""


def context_cut(records: list[dict[str, Any]], inputs: list[Any], keep: int) -> int:
    """How many context records belong to the first `keep` turns."""
    wanted = [text_of(i) for i in inputs]
    next_turn = 0
    for index, record in enumerate(records):
        if record.get("role") != "user":
            continue
        text = text_of(record.get("content"))
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
    cut = context_cut(records, inputs, turns)
    context.write_text("".join(encode_record(r) + "\n" for r in records[:cut]), "utf-8")
    with wire.open("r+b") as handle:
        handle.truncate(offsets[turns])
        os.fsync(handle.fileno())


def _copy(source: str, target: str) -> None:
    """Checkpoint packs never change once written: the fork shares them (a hard link)."""
    if f"{os.sep}packs{os.sep}" in source:
        try:
            os.link(source, target)
            return
        except OSError:
            pass
    shutil.copy2(source, target)


def fork_session(
    share: Path, work_dir: str, source: Path, *, turns: int | None = None, title: str | None = None
) -> tuple[str, Path]:
    """Copy the session in `source` to a new session of `work_dir`, keeping its first
    `turns` turns (None: all); returns (new id, its directory). The source is not changed."""
    if turns is not None and turns < 0:
        raise ForkError(f"turns must be >= 0, not {turns}")
    new_id = new_session_id()
    target = session_dir(share, work_dir, new_id)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("tasks", ".*"), copy_function=_copy)
    try:
        if turns is not None:
            _truncate(target, turns)
            from soulwire.sessions.checkpoints.forking import cut_log  # its checkpoints too

            cut_log(target, turns)
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


@runtime_checkable
class SiblingStores(Protocol):
    """A store that opens another session of the same store (PostgreSQL's)."""

    def sibling(self, session_id: str, work_dir: str) -> SessionStore: ...


def fork_stored(
    source: SessionStore,
    target: SessionStore,
    *,
    work_dir: str,
    turns: int | None = None,
    title: str | None = None,
) -> None:
    """Copy the session in `source` into the empty `target` through the store protocol,
    keeping its first `turns` turns (None: all) and its checkpoints up to their end; the
    checkpoints' objects are the store's, shared by its sessions, so none is copied."""
    from soulwire.sessions.checkpoints.book import records_through
    from soulwire.sessions.transfer import copy_session

    if turns is not None and turns < 0:
        raise ForkError(f"turns must be >= 0, not {turns}")
    messages = list(source.wire_records())
    starts = turn_starts(messages)
    inputs = [messages[i].get("payload", {}).get("user_input") for i in starts]
    if turns is not None and turns > len(starts):
        raise ForkError(f"the session has {len(starts)} turns; cannot fork after turn {turns}")
    checkpoints = list(source.checkpoint_records())
    if turns is None or turns == len(starts):
        copy_session(source, target)
    else:
        if source.archived_contexts():
            raise ForkError("the session's context was compacted or cleared: it can only be forked whole")
        context = list(source.load_context())
        target.append_context(context[: context_cut(context, inputs, turns)])
        for message in messages[: starts[turns]]:
            target.record_wire(message)
        checkpoints = records_through(checkpoints, turns)
    for record in checkpoints:
        target.append_checkpoint(record)
    state = source.load_state()
    old_title = state.get("custom_title") or prompt_title(inputs[0] if inputs else None)
    state["custom_title"] = title or f"Fork of {old_title or source.session_id}"
    state[WORK_DIR_KEY] = work_dir
    target.save_state(state)
    target.sync()


def fork_from_store(
    store: SessionStore,
    work_dir: str,
    *,
    turns: int | None = None,
    title: str | None = None,
    share: Path | None = None,
    source: Path | None = None,
) -> str:
    """Fork the session `store` holds into a new session of `work_dir` in the same store;
    returns its id. The file store copies the directory (`source`: the session's, when not the
    store's own; `share`: likewise), a store with siblings copies the records."""
    if not isinstance(store, SiblingStores):
        if share is None or source is None:
            assert isinstance(store, FileSessionStore)  # the directory is the file store's
            share, source = share or store.share, source or store.dir
        new_id, _ = fork_session(share, work_dir, source, turns=turns, title=title)
        return new_id
    new_id = new_session_id()
    target = store.sibling(new_id, work_dir)
    try:
        fork_stored(store, target, work_dir=work_dir, turns=turns, title=title)
    except BaseException:
        target.delete()
        raise
    return new_id


__all__ = [
    "WORK_DIR_KEY",
    "ForkError",
    "context_cut",
    "fork_from_store",
    "fork_session",
    "fork_stored",
    "text_of",
    "turn_starts",
]
