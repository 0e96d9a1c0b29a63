"""JSON-RPC 2.0 framing: error codes, message classification and compact line encoding.

Deliberately free of pydantic and asyncio: the lean start-up path uses it to answer
`initialize` before the heavy modules are loaded."""

from __future__ import annotations

import json
import os
import re
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

MAX_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in a message: far beyond any real one
(a tool's JSON Schema included), far below where parsing, validation or recording could run
out of stack."""

BUSY = "busy"
IDLE = "idle"
SESSION_HELD = "session_held"
STORE_UNAVAILABLE = "store_unavailable"
INTERRUPTED = "interrupted"
"""`data.reason` of an INVALID_STATE error: a turn is running, or none is; the session is held
by another process (`data.holder`: its `pid`, `host`, `since`); the session store (a shared
database) cannot be reached, so nothing can be recorded until it is back; the turn of a prompt
was closed as interrupted (the process running it stopped: server/takeover.py)."""


CONTINUED_TURN = "continued-turn"
"""The id of the answer an engine writes when a turn it continued ends (a turn a dead process
left waiting for approvals: no client sent that prompt to it; server/takeover.py)."""


_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
encode = _compact.encode
"""Compact JSON with raw UTF-8, the form every server line takes."""


class WireError(Exception):
    """Root of the protocol layer's exceptions."""


class RPCError(WireError):
    """A JSON-RPC error: one to answer a request with, or one the other side answered with;
    `code` is one of the constants above, `data` its structured detail."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}


def internal_error(exc: BaseException) -> RPCError:
    """-32603 for an exception nobody expected: logged with its traceback under an incident
    id, which is all the client is told (`data.incident`); never the exception's text, which
    may hold paths, internals or secrets."""
    import logging  # only when something went wrong: not on the start-up path

    incident = os.urandom(4).hex()
    logging.getLogger("soulwire.wire").error(
        "internal error %s: %s", incident, type(exc).__name__, exc_info=exc
    )
    message = (
        f"Internal error: the engine failed unexpectedly (incident {incident}; the details are in its log)"
    )
    return RPCError(INTERNAL_ERROR, message, {"incident": incident})


def invalid_params(method: str, detail: str = "", field: str | None = None) -> RPCError:
    """-32602 with the reference's text, plus what is wrong (and `data.field`) when known."""
    text = f"Invalid parameters for method `{method}`"
    data = {"field": field} if field is not None else None
    return RPCError(INVALID_PARAMS, f"{text}: {detail}" if detail else text, data)


def busy_error() -> RPCError:
    return RPCError(INVALID_STATE, "An agent turn is already in progress", {"reason": BUSY})


def idle_error() -> RPCError:
    return RPCError(INVALID_STATE, "No agent turn is in progress", {"reason": IDLE})


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


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _too_deep(value: Any, limit: int) -> bool:
    """Whether arrays/objects nest deeper than `limit` (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _replace_lone_surrogates(value: Any) -> Any:
    """The value with lone UTF-16 surrogates (valid JSON escapes, but not encodable as
    UTF-8) replaced by U+FFFD, so that nothing downstream fails to write them."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, list):
        return [_replace_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    return value


def parse(line: bytes | str) -> Any:
    """Decode one line; raises RPCError (-32700 not JSON or not UTF-8, -32600 nested deeper
    than MAX_DEPTH) instead of anything else."""
    try:
        # Strict UTF-8: `json.loads` on bytes would let the UTF-8 form of a surrogate
        # (ED A0 80 …) through, a string nothing can write back out.
        message = json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
    except RecursionError:
        raise RPCError(INVALID_REQUEST, f"Invalid request: nested deeper than {MAX_DEPTH} levels") from None
    except UnicodeDecodeError:
        raise RPCError(PARSE_ERROR, "Invalid JSON format: the line is not valid UTF-8") from None
    except ValueError:
        raise RPCError(PARSE_ERROR, "Invalid JSON format") from None
    raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    if isinstance(message, dict | list):
        if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _too_deep(message, MAX_DEPTH):
            raise RPCError(INVALID_REQUEST, f"Invalid request: nested deeper than {MAX_DEPTH} levels")
        if _SURROGATE_ESCAPE.search(raw):
            message = _replace_lone_surrogates(message)
    return message


def classify(line: bytes | str) -> Inbound:
    """Parse and classify one line, following the reference's observable rules (spec §2.2)."""
    try:
        message = parse(line)
    except RPCError as error:
        return Inbound("invalid", error=error)
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
