"""The model-visible history of a session, mirrored to `context.jsonl` as it changes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from soulwire.llm.message import Message
from soulwire.sessions.store import SessionStore


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A rough token count (characters / 4 of the text) for messages the provider has not
    counted yet."""
    return sum(len(m.text()) for m in messages) // 4


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
        self._restore(store.load_context())

    def _restore(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            role = record.get("role")
            if role == "_system_prompt" and isinstance(record.get("content"), str):
                self.system_prompt = record["content"]
                self._started = True
            elif role == "_checkpoint":
                self._next_checkpoint = int(record.get("id", 0)) + 1
                self._started = True
            elif role == "_usage":
                self._counted_tokens = int(record.get("token_count", 0))
                self._uncounted = []
            elif isinstance(role, str) and not role.startswith("_"):
                try:
                    message = Message.model_validate(record)
                except ValidationError:
                    continue
                self.history.append(message)
                self._uncounted.append(message)

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

    def checkpoint(self) -> None:
        records: list[dict[str, Any]] = [{"role": "_checkpoint", "id": self._next_checkpoint}]
        self._start(records)
        self._next_checkpoint += 1
        self._store.append_context(records)

    def append(self, *messages: Message) -> None:
        records = [m.to_record() for m in messages]
        self._start(records)
        self.history.extend(messages)
        self._uncounted.extend(messages)
        self._store.append_context(records)

    def record_usage(self, token_count: int) -> None:
        self._counted_tokens = token_count
        self._uncounted = []
        self._store.append_context([{"role": "_usage", "token_count": token_count}])

    def clear(self) -> None:
        """Start over: rotate the file and keep only the system prompt."""
        self._store.rotate_context()
        self.history = []
        self._uncounted = []
        self._counted_tokens = 0
        self._next_checkpoint = 0
        self._started = False
        records: list[dict[str, Any]] = []
        self._start(records)
        self._store.append_context(records)

    def for_model(self) -> list[Message]:
        """The history as sent to the model: adjacent user messages merged into one."""
        out: list[Message] = []
        for message in self.history:
            if out and message.role == "user" and out[-1].role == "user" and not out[-1].tool_call_id:
                merged = out[-1].parts() + message.parts()
                out[-1] = Message(role="user", content=merged)
            else:
                out.append(message)
        return out
