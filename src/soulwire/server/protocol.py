"""The extensions' results, notices and added members: typed models that are the messages.

The hub builds each of these messages from its model (`params_of`, and `members_of` for the
members spliced into a line the engine wrote); the same models give the exported JSON
Schema (`soulwire schema`, under `serve/`) and the docs (docs/serve.md), and tests/server
validates every message a real `soulwire serve` sends against them. The one exception is
the `seq` of an event (`EventMembers`), spliced as bytes on the streaming hot path
(server/ring.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from soulwire.server.messages import Mode, OnTimeout


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class Loaded(_Shape):
    """What opening the session loaded: a resume proves it (never a silent fresh start)."""

    session_id: str
    records: int | None = None
    content_hash: str | None = Field(default=None, description="sha-256 of wire.jsonl when opened")


class ServeInfo(_Shape):
    """The `serve` member of the `initialize` result, for a client that sent one."""

    epoch: str = Field(description="names this run of the session: seq numbers restart with it")
    last_seq: int
    mode: Mode
    deadline_ms: int
    on_timeout: OnTimeout
    methods: list[str]
    max_message_bytes: int
    batch: bool = Field(description="several newline-separated messages per WebSocket frame")
    receipts: bool = Field(description="`cancel` answers with a CancelReceipt")
    loaded: Loaded


class AttachResult(_Shape):
    """The result of `attach`, and the params of the `attached` notification."""

    session_id: str
    epoch: str
    mode: Mode
    last_seq: int
    complete: bool = Field(description="false: the gap is gone; reload the history over HTTP")
    sent: int = Field(description="events sent (or being sent) to close the gap")
    pending: list[str] = Field(description="ids of open requests sent again")
    loaded: Loaded


class EventMembers(_Shape):
    """Members added first inside `params` of every event, request and notice."""

    seq: int


class RequestMembers(EventMembers):
    """Members added to a server → client `request`."""

    deadline_ms: int
    on_timeout: OnTimeout
    resent: bool | None = Field(default=None, description="sent again after a (re)attach")


class BlobRef(_Shape):
    """Replaces `payload` in an event larger than the client's `max_message_bytes`."""

    blob_id: str
    size: int
    preview: str


class RoleChanged(_Shape):
    """Notice `role/changed`."""

    controller: int | None
    reason: Literal["free", "taken", "released", "disconnected"]


ResolvedBy = Literal["client", "deadline", "turn_end"]


class RequestResolved(_Shape):
    """Notice `request/resolved`: who answered an open request, or that its deadline did."""

    id: str
    type: str
    by: ResolvedBy
    client: int | None = None
    user: str | None = None
    """The named user who answered (a server with users, server/users.py)."""
    response: Any = None


class Rules(_Shape):
    """Result of `approvals/rules/*` and params of notice `approvals/rules/changed`."""

    rules: list[str]


class PendingRequest(_Shape):
    id: str
    seq: int
    type: str
    payload: dict[str, Any]
    deadline_ms: int
    on_timeout: OnTimeout


class RequestsPendingResult(_Shape):
    requests: list[PendingRequest]
    resent: list[str]


class BlobChunk(_Shape):
    """Result of `blob/read`."""

    data: str = Field(description="base64")
    offset: int
    size: int
    eof: bool


class CancelParams(_Shape):
    receipt: bool = Field(default=False, description="answer with a CancelReceipt once the turn has ended")


class StoppedCall(_Shape):
    id: str
    name: str


class Stopped(_Shape):
    tool_calls: list[StoppedCall]
    process_groups: list[int]
    subagents: list[str]


class LeftTask(_Shape):
    id: str
    description: str
    command: str
    pgid: int | None


class LeftRunning(_Shape):
    background_tasks: list[LeftTask]


class CancelReceipt(_Shape):
    stopped: Stopped
    left_running: LeftRunning
    survived: list[int] = Field(description="process groups still alive after the grace period")


class CancelResult(_Shape):
    """`cancel`'s result: `{}` for today's clients, `{receipt}` when asked for."""

    receipt: CancelReceipt | None = None


def params_of(shape: BaseModel) -> dict[str, Any]:
    """The JSON members of a message built from its model: the fields that were set."""
    return shape.model_dump(mode="json", exclude_unset=True)


def members_of(shape: BaseModel, *, exclude: set[str] | None = None) -> bytes:
    """A model's members as the bytes spliced first inside a line's `params` (`"a":1,`)."""
    return shape.model_dump_json(exclude_unset=True, exclude=exclude)[1:-1].encode() + b","


SHAPES: tuple[type[BaseModel], ...] = (
    ServeInfo,
    AttachResult,
    EventMembers,
    RequestMembers,
    BlobRef,
    RoleChanged,
    RequestResolved,
    Rules,
    RequestsPendingResult,
    BlobChunk,
    CancelParams,
    CancelResult,
)

__all__ = [
    "SHAPES",
    "AttachResult",
    "BlobChunk",
    "BlobRef",
    "CancelParams",
    "CancelReceipt",
    "CancelResult",
    "EventMembers",
    "Loaded",
    "RequestMembers",
    "RequestResolved",
    "RequestsPendingResult",
    "ResolvedBy",
    "RoleChanged",
    "Rules",
    "ServeInfo",
    "members_of",
    "params_of",
]  # fmt: skip
