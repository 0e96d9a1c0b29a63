"""JSON-RPC 2.0 framing: error codes, message classification and compact line encoding.

Deliberately free of pydantic and asyncio: the lean start-up path uses it to answer
`initialize` before the heavy modules are loaded."""

from __future__ import annotations

import json
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
INVALID_STATE = -32000
LLM_NOT_SET = -32001
LLM_NOT_SUPPORTED = -32002
CHAT_PROVIDER_ERROR = -32003
AUTH_EXPIRED = -32004

INBOUND_METHODS = frozenset({"initialize", "prompt", "steer", "replay", "set_plan_mode", "cancel"})

_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
encode = _compact.encode
"""Compact JSON with raw UTF-8, the form every server line takes."""


class RPCError(Exception):
    """An error to answer a request with; `code` is one of the constants above."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}


def invalid_params(method: str) -> RPCError:
    return RPCError(INVALID_PARAMS, f"Invalid parameters for method `{method}`")


def response_line(request_id: Any, result: Any) -> bytes:
    return (encode({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n").encode()


def error_line(request_id: Any, error: RPCError) -> bytes:
    return (encode({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}) + "\n").encode()


def request_line(request_id: str, type_: str, payload: dict[str, Any]) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "method": "request",
        "id": request_id,
        "params": {"type": type_, "payload": payload},
    }
    return (encode(body) + "\n").encode()


class Inbound:
    """One classified inbound line."""

    __slots__ = ("error", "id", "kind", "method", "params", "raw")

    def __init__(
        self,
        kind: str,
        *,
        id: Any = None,
        method: str | None = None,
        params: Any = None,
        raw: dict[str, Any] | None = None,
        error: RPCError | None = None,
    ) -> None:
        self.kind = kind  # "request" | "notification" | "response" | "invalid" | "ignore"
        self.id = id
        self.method = method
        self.params = params
        self.raw = raw or {}
        self.error = error


def classify(line: bytes | str) -> Inbound:
    """Parse and classify one line, following the reference's observable rules (spec §2.2)."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return Inbound("invalid", error=RPCError(PARSE_ERROR, "Invalid JSON format"))
    if not isinstance(message, dict):
        return Inbound("invalid", error=RPCError(INVALID_REQUEST, "Invalid request"))
    obj: dict[str, Any] = message
    if not obj:
        return Inbound("ignore")
    if obj.get("jsonrpc", "2.0") != "2.0":
        return Inbound("invalid", error=RPCError(INVALID_REQUEST, "Invalid request"))
    has_id = "id" in obj and obj["id"] is not None
    if has_id and not isinstance(obj["id"], str):
        return Inbound("invalid", error=RPCError(INVALID_REQUEST, "Invalid request"))
    if "result" in obj or "error" in obj:
        return Inbound("response", id=obj.get("id"), raw=obj)
    method = obj.get("method")
    if not isinstance(method, str):
        return (
            Inbound("ignore")
            if not has_id
            else Inbound("invalid", error=RPCError(INVALID_REQUEST, "Invalid request"))
        )
    if not has_id:
        return Inbound("notification", method=method, params=obj.get("params"), raw=obj)
    return Inbound("request", id=obj["id"], method=method, params=obj.get("params"), raw=obj)
