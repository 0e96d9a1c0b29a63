"""The data of the server's Wire extensions: settings, open requests, and the typed params
of the methods the server itself answers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soulwire.server.blobs import MAX_CHUNK, BlobStore
from soulwire.server.client import Client
from soulwire.wire.jsonrpc import encode
from soulwire.wire.peer import validation_error

if TYPE_CHECKING:
    from soulwire.server.audit import AuditLog

Mode = Literal["controller", "observer"]
OnTimeout = Literal["reject", "cancel", "approve"]

HUB_METHODS = frozenset(
    {
        "attach",
        "requests/pending",
        "blob/read",
        "approvals/rules/list",
        "approvals/rules/add",
        "approvals/rules/remove",
    }
)
DEADLINE_EXPIRED = -32010
"""The JSON-RPC error the engine gets for a request nobody answered in time."""


@dataclass
class HubSettings:
    deadline_ms: int = 300_000
    on_timeout: OnTimeout = "reject"
    ring_events: int = 20_000
    ring_bytes: int = 32 << 20
    client_queue_bytes: int = 16 << 20
    max_message_bytes: int = 1 << 20
    """Default for extended clients: a larger event reaches them as a blob reference."""
    blobs: BlobStore | None = None
    audit: AuditLog | None = None
    """Where a server with named users records who did what (server/audit.py)."""
    relay: Callable[[str, int, bytes], None] | None = None
    """On a shared store: told (session id, the record's seq, line) of what a session's clients
    get that is not its record, for the replicas that follow it (sessions/pg_writer.py)."""


@dataclass
class Pending:
    """A server → client request waiting for the controller's answer."""

    id: str
    type: str
    payload: dict[str, Any]
    seq: int
    line: bytes
    """The request as today's Wire has it (without `seq` and the deadline)."""
    deadline: float
    on_timeout: OnTimeout
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


@dataclass
class Forwarded:
    """A client request handed to the engine under a rewritten id."""

    client: Client | None
    original_id: str | None
    method: str


class ServeOptions(BaseModel):
    """The `serve` member of `initialize` params: what the client wants of the extensions."""

    model_config = ConfigDict(extra="forbid")
    seq: bool = True
    mode: Mode | None = None
    since_seq: int | None = Field(default=None, ge=0)
    deadline_ms: int | None = Field(default=None, ge=1, le=86_400_000)
    on_timeout: OnTimeout | None = None
    max_message_bytes: int | None = Field(default=None, ge=65_536)
    receipts: bool = True
    """`cancel` answers with what it stopped and what it left running (ui/wire/receipt.py)."""
    batch: bool = False
    """Several messages per WebSocket text frame, newline-separated as on stdio: one frame
    (and one send) per event-loop pass instead of one per message."""


class BlobReadParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    blob_id: str
    offset: int = Field(default=0, ge=0)
    length: int = Field(default=MAX_CHUNK, ge=1, le=MAX_CHUNK)


class RuleParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rule: str = Field(min_length=1, max_length=10_000)


class AttachParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    since_seq: int | None = Field(default=None, ge=0)
    mode: Mode | None = None
    take: bool = False
    epoch: str | None = None
    client_key: str | None = Field(default=None, min_length=16, max_length=128)
    """A secret the client keeps across its connections: answers to requests it sent on a
    connection that dropped reach the connection that re-attaches with the same key."""
    prompt_id: str | None = Field(default=None, min_length=1, max_length=256)
    """The id of the client's `prompt` still unanswered when its connection dropped: if the
    session was taken over with that turn open, its answer comes under this id
    (server/takeover.py)."""


def line_of(body: dict[str, Any]) -> bytes:
    return (encode(body) + "\n").encode()


def validated(method: str, model: type[BaseModel], params: Any) -> Any:
    try:
        return model.model_validate({} if params is None else params, strict=True)
    except ValidationError as exc:
        raise validation_error(method, exc) from None


__all__ = [
    "DEADLINE_EXPIRED",
    "HUB_METHODS",
    "AttachParams",
    "BlobReadParams",
    "Forwarded",
    "HubSettings",
    "Mode",
    "OnTimeout",
    "Pending",
    "RuleParams",
    "ServeOptions",
    "line_of",
    "validated",
]
