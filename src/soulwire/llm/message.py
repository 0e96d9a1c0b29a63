"""The model-visible history: messages as stored in `context.jsonl` (spec §7.3)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from soulwire.wire.types import ContentPart, TextPart, ToolCall

Role = Literal["system", "user", "assistant", "tool"]


class Message(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)

    role: Role
    content: str | list[ContentPart] = ""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    partial: bool | None = None

    def parts(self) -> list[Any]:
        """The content as a list of parts (a plain string becomes one text part)."""
        if isinstance(self.content, str):
            return [TextPart(text=self.content)] if self.content else []
        return list(self.content)

    def text(self) -> str:
        """The concatenated text parts."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    def to_record(self) -> dict[str, Any]:
        """The `context.jsonl` form: null fields of the message omitted (parts keep theirs,
        e.g. `"encrypted": null`), a lone text part written as a plain string."""
        record = {k: v for k, v in self.model_dump(mode="json").items() if v is not None}
        content = record.get("content")
        if isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text":
            record["content"] = content[0]["text"]
        for call in record.get("tool_calls") or ():
            if call.get("extras") is None:
                call.pop("extras", None)
        return record
