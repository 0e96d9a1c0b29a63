"""Value types shared by events, requests and history: content parts, usage, tool calls,
display blocks and tool return values (spec §3.2)."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, model_validator


class WireModel(BaseModel):
    """Base of every protocol type: unknown fields are kept (forward compatibility) and
    schemas are built on first use so that importing the protocol stays cheap."""

    model_config = ConfigDict(extra="allow", defer_build=True, populate_by_name=True)


# ---------------------------------------------------------------- content parts


class TextPart(WireModel):
    type: Literal["text"] = "text"
    text: str


class ThinkPart(WireModel):
    type: Literal["think"] = "think"
    think: str
    encrypted: str | None = None
    """Provider signature or encrypted reasoning; a part carrying one closes a merge run."""


class MediaURL(WireModel):
    url: str
    id: str | None = None


class ImageURLPart(WireModel):
    type: Literal["image_url"] = "image_url"
    image_url: MediaURL


class AudioURLPart(WireModel):
    type: Literal["audio_url"] = "audio_url"
    audio_url: MediaURL


class VideoURLPart(WireModel):
    type: Literal["video_url"] = "video_url"
    video_url: MediaURL


ContentPart = Annotated[
    TextPart | ThinkPart | ImageURLPart | AudioURLPart | VideoURLPart, Field(discriminator="type")
]
CONTENT_PART_TYPES: tuple[type[WireModel], ...] = (
    TextPart,
    ThinkPart,
    ImageURLPart,
    AudioURLPart,
    VideoURLPart,
)
UserInput = str | list[ContentPart]


@cache
def content_part_adapter() -> TypeAdapter[Any]:
    """Validates one content part (built on first use)."""
    return TypeAdapter(ContentPart)


@cache
def user_input_adapter() -> TypeAdapter[Any]:
    """Validates a user input: a string or a list of content parts."""
    return TypeAdapter(UserInput)


def user_input_text(user_input: str | list[Any]) -> str:
    """The text of a user input: text parts joined by a space (media parts ignored)."""
    if isinstance(user_input, str):
        return user_input
    return " ".join(p.text for p in user_input if isinstance(p, TextPart))


# ---------------------------------------------------------------- usage and tool calls


class TokenUsage(WireModel):
    input_other: int = 0
    output: int = 0
    input_cache_read: int = 0
    input_cache_creation: int = 0

    @property
    def input(self) -> int:
        """Tokens of the prompt, cached or not: the context size before the reply."""
        return self.input_other + self.input_cache_read + self.input_cache_creation

    @property
    def total(self) -> int:
        return self.input + self.output


class FunctionCall(WireModel):
    name: str
    arguments: str | None = None
    """A JSON string, possibly partial while streaming; null when it arrives as ToolCallParts."""


class ToolCall(WireModel):
    type: Literal["function"] = "function"
    id: str
    function: FunctionCall
    extras: dict[str, Any] | None = None


class ToolCallPart(WireModel):
    arguments_part: str | None = None


# ---------------------------------------------------------------- display blocks


class BriefDisplayBlock(WireModel):
    type: Literal["brief"] = "brief"
    text: str


class DiffDisplayBlock(WireModel):
    type: Literal["diff"] = "diff"
    path: str
    old_text: str
    new_text: str
    old_start: int = 1
    new_start: int = 1
    is_summary: bool = False


class TodoItem(WireModel):
    title: str
    status: Literal["pending", "in_progress", "done"]


class TodoDisplayBlock(WireModel):
    type: Literal["todo"] = "todo"
    items: list[TodoItem]


class ShellDisplayBlock(WireModel):
    type: Literal["shell"] = "shell"
    language: str = "bash"
    command: str


class BackgroundTaskDisplayBlock(WireModel):
    type: Literal["background_task"] = "background_task"
    task_id: str
    kind: str
    status: str
    description: str


class UnknownDisplayBlock(WireModel):
    """A block of a type this version does not know: every key but `type` lives in `data`."""

    type: str
    data: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_data(cls, value: Any) -> Any:
        if isinstance(value, dict) and "data" not in value:
            raw: dict[str, Any] = value
            return {"type": raw.get("type", ""), "data": {k: v for k, v in raw.items() if k != "type"}}
        return value


_KNOWN_BLOCKS = {"brief", "diff", "todo", "shell", "background_task"}


def _block_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in _KNOWN_BLOCKS else "unknown"


DisplayBlock = Annotated[
    Annotated[BriefDisplayBlock, Tag("brief")]
    | Annotated[DiffDisplayBlock, Tag("diff")]
    | Annotated[TodoDisplayBlock, Tag("todo")]
    | Annotated[ShellDisplayBlock, Tag("shell")]
    | Annotated[BackgroundTaskDisplayBlock, Tag("background_task")]
    | Annotated[UnknownDisplayBlock, Tag("unknown")],
    Discriminator(_block_tag),
]


class ToolReturnValue(WireModel):
    """What a tool hands back: `output` for the model, `message` as a note to the model,
    `display` for the user only."""

    is_error: bool
    output: str | list[ContentPart] = ""
    message: str = ""
    display: list[DisplayBlock] = Field(default_factory=list)
    extras: dict[str, Any] | None = None


def tool_ok(
    output: str | list[Any] = "", message: str = "", display: list[Any] | None = None
) -> ToolReturnValue:
    """A successful tool result."""
    return ToolReturnValue(is_error=False, output=output, message=message, display=display or [])


def tool_error(message: str, *, brief: str | None = None, output: str | list[Any] = "") -> ToolReturnValue:
    """A failed tool result; `brief` becomes a one-line display block for the user."""
    display: list[Any] = [BriefDisplayBlock(text=brief)] if brief else []
    return ToolReturnValue(is_error=True, output=output, message=message, display=display)


# ---------------------------------------------------------------- MCP status


class MCPServerStatus(WireModel):
    name: str
    status: Literal["pending", "connecting", "connected", "failed", "unauthorized"]
    tools: list[str] = Field(default_factory=list)


class MCPStatusSnapshot(WireModel):
    loading: bool = False
    connected: int = 0
    total: int = 0
    tools: int = 0
    servers: list[MCPServerStatus] = Field(default_factory=list)


class SandboxStatus(WireModel):
    """`StatusUpdate.sandbox` (a Soulwire addition; clients that do not know it ignore it)."""

    mode: str
    """`off`, `read-only` or `workspace-write`."""
    network: bool
    """Whether commands in the sandbox may use the network."""


class QuestionOption(WireModel):
    label: str
    description: str = ""


class QuestionItem(WireModel):
    question: str
    header: str = ""
    options: list[QuestionOption] = Field(default_factory=list)
    multi_select: bool = False
    body: str = ""
    other_label: str = ""
    other_description: str = ""
