"""The model-visible history of a session, mirrored to `context.jsonl` as it changes."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from soulwire.engine.audio import holds_audio
from soulwire.llm.message import Message
from soulwire.sessions.interrupted import interrupted_result
from soulwire.sessions.store import SessionStore, warn_stderr
from soulwire.wire.types import TextPart, ToolReturnValue


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A rough token count (characters / 4 of the text) for messages the provider has not
    counted yet."""
    return sum(len(m.text()) for m in messages) // 4


INTERRUPTED_NOTE = "<system>Interrupted: "
"""How the note that a request was cut short begins (the model reads it; `for_model` finds it)."""


def interrupted_note(why: str) -> Message:
    """The user-side note that the request before it was interrupted, and why."""
    text = (
        f"{INTERRUPTED_NOTE}{why} before the request above was finished. What it had not done yet "
        "was not done; do not carry it on unless the user asks you to.</system>"
    )
    return Message(role="user", content=[TextPart(text=text)])


def is_interrupted_note(message: Message) -> bool:
    """Whether a user message ends with that note (a lone text part is stored as a string)."""
    if message.role != "user" or not message.content:
        return False
    last = message.content if isinstance(message.content, str) else message.content[-1]
    if isinstance(last, TextPart):
        last = last.text
    return isinstance(last, str) and last.startswith(INTERRUPTED_NOTE)


def tool_message(tool_call_id: str, value: ToolReturnValue) -> Message:
    """How a tool result is shown to the model (spec §4.14)."""
    output: list[Any] = [TextPart(text=value.output)] if isinstance(value.output, str) else list(value.output)
    output = [p for p in output if not (isinstance(p, TextPart) and not p.text)]
    parts: list[Any] = []
    if value.is_error:
        parts.append(TextPart(text=f"<system>ERROR: {value.message}</system>"))
    else:
        if value.message:
            parts.append(TextPart(text=f"<system>{value.message}</system>"))
        if not output:
            parts.append(TextPart(text="<system>Tool output is empty.</system>"))
        elif not all(isinstance(p, TextPart) for p in output):
            parts.append(TextPart(text="<system>Tool returned non-text content.</system>"))
    parts.extend(output)
    return Message(role="tool", content=parts, tool_call_id=tool_call_id)


LARGE_HISTORY = 1000
"""Messages from which a restored history is frozen out of the cyclic GC's scans."""


class Context:
    """History + token accounting. Every change is appended to the store first-hand, so a
    killed process loses at most the step that was running."""

    def __init__(self, store: SessionStore, system_prompt: str) -> None:
        self._store = store
        self.system_prompt = system_prompt
        self.history: list[Message] = []
        self._next_checkpoint = 0
        self._counted_tokens = 0
        self._uncounted: list[Message] = []
        self._started = False
        self.mark_checkpoints = False
        """Add a `<system>CHECKPOINT n</system>` user message at each checkpoint (D-Mail)."""
        self.skipped_records = 0
        self.has_audio = False
        """Whether any message holds an audio part (kept up to date as messages come in, so
        that a step does not scan the whole history for them: engine/audio.py)."""
        # Tens of thousands of long-lived objects built in one go: with the cyclic GC on, it
        # rescans the growing heap again and again (that tripled the load of a 50 MB context).
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._restore(store.load_context())
        finally:
            if len(self.history) >= LARGE_HISTORY:
                # They are acyclic (freed by reference counting): later collections need not
                # walk them again.
                gc.freeze()
            if enabled:
                gc.enable()

    @property
    def store(self) -> SessionStore:
        return self._store

    def _restore(self, records: Iterable[dict[str, Any]]) -> None:
        validate = Message.model_validate
        for record in records:
            role = record.get("role")
            if role == "_system_prompt" and isinstance(record.get("content"), str):
                self.system_prompt = record["content"]
                self._started = True
            elif role == "_checkpoint":
                self._next_checkpoint = _int(record.get("id")) + 1
                self._started = True
            elif role == "_usage":
                self._counted_tokens = _int(record.get("token_count"))
                self._uncounted = []
            elif isinstance(role, str) and not role.startswith("_"):
                try:
                    message = validate(record)
                except ValidationError:
                    self.skipped_records += 1
                    continue
                self.history.append(message)
                self._uncounted.append(message)
                self.has_audio = self.has_audio or holds_audio(message)
        if self.skipped_records:
            warn_stderr(f"skipped {self.skipped_records} unreadable context record(s)")

    @property
    def token_count(self) -> int:
        return self._counted_tokens + estimate_tokens(self._uncounted)

    @property
    def is_empty(self) -> bool:
        return not self.history

    def _start(self, records: list[dict[str, Any]]) -> None:
        if not self._started:
            records.insert(0, {"role": "_system_prompt", "content": self.system_prompt})
            self._started = True

    @property
    def checkpoints(self) -> int:
        """How many checkpoints the current context file has (ids 0 … n-1)."""
        return self._next_checkpoint

    def checkpoint(self) -> None:
        records: list[dict[str, Any]] = [{"role": "_checkpoint", "id": self._next_checkpoint}]
        self._start(records)
        self._next_checkpoint += 1
        self._store.append_context(records)
        if self.mark_checkpoints:  # the model sees them (D-Mail names one)
            self.append(
                Message(
                    role="user", content=[TextPart(text=f"<system>CHECKPOINT {records[-1]['id']}</system>")]
                )
            )

    def revert_to(self, checkpoint_id: int) -> None:
        """Rewind to just before checkpoint `checkpoint_id`: the later records go to an
        archived context file (as after /clear) and the history is what it was then."""
        kept: list[dict[str, Any]] = []
        for record in self._store.load_context():
            if record.get("role") == "_checkpoint" and record.get("id") == checkpoint_id:
                break
            kept.append(record)
        else:
            raise ValueError(f"checkpoint {checkpoint_id} does not exist")
        self._store.replace_context(kept)
        self._reload(kept)

    def reload(self) -> None:
        """Read the history again from the store (a rewind of the session cut it)."""
        self._started = False
        self._reload(list(self._store.load_context()))

    def _reload(self, records: list[dict[str, Any]]) -> None:
        self.history, self._uncounted = [], []
        self._next_checkpoint = self._counted_tokens = 0
        self.has_audio = False
        self._restore(records)

    def append(self, *messages: Message) -> None:
        records = [m.to_record() for m in messages]
        self._start(records)
        self.history.extend(messages)
        self._uncounted.extend(messages)
        self.has_audio = self.has_audio or any(holds_audio(m) for m in messages)
        self._store.append_context(records)

    def unanswered_calls(self) -> list[str]:
        """Ids of the last assistant message's tool calls that have no tool message yet."""
        answered: set[str] = set()
        for message in reversed(self.history):
            if message.role == "tool" and message.tool_call_id:
                answered.add(message.tool_call_id)
            elif message.role == "assistant":
                return [c.id for c in message.tool_calls or () if c.id not in answered]
        return []

    def close_interrupted(self, why: str) -> None:
        """The request was cut short (`why`: "the engine stopped", "the user cancelled it"):
        every tool call left without a result gets one saying so, and a note tells the model
        the request was not finished — unless it had been answered already (the history ends
        with an assistant message without tool calls) or the note is there. Idempotent."""
        results = [tool_message(c, interrupted_result(why)) for c in self.unanswered_calls()]
        last = results[-1] if results else self.history[-1] if self.history else None
        if last is None or is_interrupted_note(last) or (last.role == "assistant" and not last.tool_calls):
            if results:
                self.append(*results)
            return
        self.append(*results, interrupted_note(why))

    def record_usage(self, token_count: int) -> None:
        self._counted_tokens = token_count
        self._uncounted = []
        self._store.append_context([{"role": "_usage", "token_count": token_count}])

    def clear(self) -> None:
        """Start over: archive the file and keep only the system prompt."""
        self._rewrite([], token_count=None)

    def replace_history(self, messages: Sequence[Message], *, token_count: int) -> None:
        """Swap the history for `messages` (compaction): the old file is archived and the new
        one starts with the system prompt and checkpoint 0."""
        self._rewrite(list(messages), token_count=token_count)

    def _rewrite(self, messages: list[Message], *, token_count: int | None) -> None:
        records: list[dict[str, Any]] = [{"role": "_system_prompt", "content": self.system_prompt}]
        if messages:
            records.append({"role": "_checkpoint", "id": 0})
            records.extend(m.to_record() for m in messages)
        if token_count is not None:
            records.append({"role": "_usage", "token_count": token_count})
        self._store.replace_context(records)  # first: if it fails, memory still matches the disk
        self._started = True
        self.history = messages
        self.has_audio = any(holds_audio(m) for m in messages)
        self._next_checkpoint = 1 if messages else 0
        self._counted_tokens = token_count or 0
        self._uncounted = []

    def for_model(self) -> list[Message]:
        """The history as sent to the model: adjacent user messages merged into one, except
        that nothing is merged into a request closed by an interruption note (the next
        prompt is a request of its own)."""
        out: list[Message] = []
        for message in self.history:
            if (
                out
                and message.role == "user"
                and out[-1].role == "user"
                and not out[-1].tool_call_id
                and not is_interrupted_note(out[-1])
            ):
                merged = out[-1].parts() + message.parts()
                out[-1] = Message(role="user", content=merged)
            else:
                out.append(message)
        return out


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
