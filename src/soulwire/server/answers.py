"""What the session's hub answers by itself, and the forms of its open requests.

Requests to the client (approvals, questions, tool calls) wait under a deadline; these are
the lines a reconnecting controller gets again, the listing of `requests/pending` and the
answer the engine gets when the deadline passes. The session's approval rules and its blobs
are answered here too (`approvals/rules/*`, `blob/read`), as is the by-reference form of a
message too large for a client."""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio

from soulwire.engine.rules import RuleError, check_rule
from soulwire.runtime.builder import Runtime
from soulwire.server.blobs import BlobStore, preview
from soulwire.server.messages import DEADLINE_EXPIRED, BlobReadParams, Pending, RuleParams, line_of, validated
from soulwire.server.protocol import (
    BlobChunk,
    BlobRef,
    PendingRequest,
    RequestMembers,
    RequestResolved,
    ResolvedBy,
    Rules,
    members_of,
    params_of,
)
from soulwire.server.ring import insert_members
from soulwire.wire import jsonrpc
from soulwire.wire.jsonrpc import INVALID_STATE, RPCError, encode


def request_line(pending: Pending, extended: bool) -> bytes:
    """The request again; for an extended client with the time left until its deadline."""
    if not extended:
        return pending.line
    members = RequestMembers(
        seq=pending.seq, deadline_ms=_left_ms(pending), on_timeout=pending.on_timeout, resent=True
    )
    return insert_members(pending.line, members_of(members))


def _left_ms(pending: Pending) -> int:
    return max(0, round((pending.deadline - anyio.current_time()) * 1000))


def describe(pending: Pending) -> PendingRequest:
    """One entry of `requests/pending`."""
    return PendingRequest(
        id=pending.id,
        seq=pending.seq,
        type=pending.type,
        payload=pending.payload,
        deadline_ms=_left_ms(pending),
        on_timeout=pending.on_timeout,
    )


def expired_answer(pending: Pending) -> bytes:
    """What the engine gets for a request whose deadline passed: the approval it defaults
    to, or an error saying how the request counts."""
    outcome = pending.on_timeout
    if outcome == "approve" and pending.type == "ApprovalRequest":
        answer = {"request_id": pending.payload.get("id", pending.id), "response": "approve"}
        return line_of({"jsonrpc": "2.0", "id": pending.id, "result": answer})
    message = f"no answer within the deadline; the request counts as {outcome}ed"
    error = {"code": DEADLINE_EXPIRED, "message": message, "data": {"reason": "deadline"}}
    return line_of({"jsonrpc": "2.0", "id": pending.id, "error": error})


def resolved_notice(
    pending: Pending, *, by: ResolvedBy, client: int | None = None, response: Any = None
) -> RequestResolved:
    """The params of `request/resolved`: who answered (or the deadline, or the turn's end)."""
    notice = RequestResolved(id=pending.id, type=pending.type, by=by)
    if client is not None:
        notice.client = client
    if response is not None:
        notice.response = response
    return notice


def rules_answer(runtime: Runtime, method: str, params: Any, *, controller: bool) -> tuple[Rules, bool]:
    """The session's approval rules as data: what "approve for session" granted, listed,
    added and revoked (persisted in state.json with the session). Returns the answer and
    whether the rules changed."""
    rules = runtime.broker.rules
    if method == "approvals/rules/list":
        return Rules(rules=sorted(rules)), False
    if not controller:
        raise RPCError(INVALID_STATE, f"{method} needs the controller role", {"reason": "observer"})
    rule = validated(method, RuleParams, params).rule
    if method == "approvals/rules/add":
        try:
            rules.add(check_rule(rule))
        except RuleError as exc:
            raise RPCError(jsonrpc.INVALID_PARAMS, str(exc), {"reason": "bad_rule"}) from None
    elif method == "approvals/rules/remove":
        rules.discard(rule)
    else:
        raise RPCError(jsonrpc.METHOD_NOT_FOUND, f"Unexpected method received: {method}")
    runtime.save_state()
    return Rules(rules=sorted(rules)), True


def read_blob(blobs: BlobStore | None, params: BlobReadParams) -> dict[str, Any]:
    """One chunk of a stored payload, base64 (`blob/read`)."""
    found = blobs.read(params.blob_id, params.offset, params.length) if blobs else None
    if found is None:
        reason = {"reason": "no_blob"}
        raise RPCError(jsonrpc.INVALID_PARAMS, f"no blob {params.blob_id!r}", reason)
    data, size = found
    end = params.offset + len(data)
    chunk = BlobChunk(data=base64.b64encode(data).decode(), offset=params.offset, size=size, eof=end >= size)
    return params_of(chunk)


def by_reference(blobs: BlobStore | None, line: bytes) -> bytes | None:
    """The line with its payload stored as a blob (None when there is no payload)."""
    body = json.loads(line)
    params = body.get("params")
    if blobs is None or not isinstance(params, dict) or "payload" not in params:
        return None
    data = encode(params.pop("payload")).encode()
    params["blob"] = params_of(BlobRef(blob_id=blobs.put(data), size=len(data), preview=preview(data)))
    return line_of(body)


__all__ = [
    "by_reference",
    "describe",
    "expired_answer",
    "read_blob",
    "request_line",
    "resolved_notice",
    "rules_answer",
]
