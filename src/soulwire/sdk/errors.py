"""The SDK's exceptions: one root (`SDKError`) with structured subclasses, and the single
table that maps JSON-RPC error codes from the engine onto them. `__all__` lists the error
types, which the package re-exports; `engine_error` is the SDK's own."""

from __future__ import annotations

from typing import Any

from soulwire.sdk.jsonutil import as_object
from soulwire.wire import jsonrpc


class SDKError(Exception):
    """Root of every error the SDK raises."""


# ---------------------------------------------------------------- the engine process


class EngineNotFoundError(SDKError):
    """The engine executable does not exist or cannot be executed."""

    def __init__(self, executable: str, reason: str = "") -> None:
        hint = f" ({reason})" if reason else ""
        super().__init__(
            f"engine executable not found: {executable!r}{hint}; install soulwire or pass "
            "`executable=` (e.g. the path of `kimi`)"
        )
        self.executable = executable


class EngineExitedError(SDKError):
    """The engine process ended while the SDK still needed it; carries its exit code and
    the tail of what it wrote on stderr."""

    def __init__(self, returncode: int | None, stderr_tail: str, *, during: str = "") -> None:
        code = "unknown exit code" if returncode is None else f"exit code {returncode}"
        where = f" during {during}" if during else ""
        tail = stderr_tail.strip()
        detail = f"\n--- engine stderr (tail) ---\n{tail}" if tail else " (nothing on stderr)"
        super().__init__(f"the engine exited unexpectedly{where} ({code}){detail}")
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class ConfigurationError(SDKError, ValueError):
    """The session's options are invalid (conflicting options, a work dir that does not exist)."""


class StartupTimeoutError(SDKError):
    """The engine did not answer `initialize` in time."""


class SessionClosedError(SDKError):
    """The session was closed (or never started)."""


class SessionNotFoundError(SDKError, LookupError):
    """No stored session has that id (`LocalSessions` / `ServerSessions`)."""


class SessionStoreError(SDKError):
    """The session store refused an operation (a fork at a turn the session lacks, a server
    that cannot be reached or answers an HTTP error)."""


# ---------------------------------------------------------------- protocol and state


class ProtocolError(SDKError):
    """The engine sent something the protocol does not allow (e.g. a malformed result)."""


class TurnInProgressError(SDKError):
    """A prompt or replay was started while another one is still running: prompts are
    sequential (consume or cancel the current turn first)."""


class TurnNotFinishedError(SDKError):
    """The result of a turn was asked for before the turn ended."""


class ToolDefinitionError(SDKError):
    """An external tool cannot be described as a JSON Schema (bad signature, duplicate name)."""


class ToolsRejectedError(SDKError):
    """The engine rejected some external tools and the session asked to be strict about it."""

    def __init__(self, rejected: dict[str, str]) -> None:
        listing = "; ".join(f"{name}: {_first_line(reason)}" for name, reason in rejected.items())
        super().__init__(f"the engine rejected external tools: {listing}")
        self.rejected = rejected


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


# ---------------------------------------------------------------- errors answered by the engine


class EngineError(SDKError):
    """A JSON-RPC error response from the engine."""

    def __init__(self, code: int, message: str, data: Any = None, *, method: str = "") -> None:
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class InvalidStateError(EngineError):
    """-32000: the engine's state does not allow the call (e.g. nothing to cancel)."""


class EngineBusyError(InvalidStateError, TurnInProgressError):
    """-32000 "An agent turn is already in progress"."""


class LLMNotSetError(EngineError):
    """-32001: no model is configured."""


class LLMNotSupportedError(EngineError):
    """-32002: the input needs a capability the model lacks (e.g. images)."""


class ChatProviderError(EngineError):
    """-32003: the model provider failed (after the engine's retries)."""


class AuthExpiredError(EngineError):
    """-32004: the provider's login expired."""


class NotSupportedError(EngineError):
    """-32601: the engine does not implement this method (e.g. `steer` on an older engine)."""


class InvalidParamsError(EngineError):
    """-32602: the engine refused the parameters."""


class MessageRejectedError(EngineError):
    """-32600/-32700: the engine could not read a message the SDK sent (an SDK bug)."""


class InternalEngineError(EngineError):
    """-32603 (or any other code): the engine failed unexpectedly."""


_BY_CODE: dict[int, type[EngineError]] = {
    jsonrpc.LLM_NOT_SET: LLMNotSetError,
    jsonrpc.LLM_NOT_SUPPORTED: LLMNotSupportedError,
    jsonrpc.CHAT_PROVIDER_ERROR: ChatProviderError,
    jsonrpc.AUTH_EXPIRED: AuthExpiredError,
    jsonrpc.METHOD_NOT_FOUND: NotSupportedError,
    jsonrpc.INVALID_PARAMS: InvalidParamsError,
    jsonrpc.INVALID_REQUEST: MessageRejectedError,
    jsonrpc.PARSE_ERROR: MessageRejectedError,
}


_BUSY_METHODS = frozenset({"prompt", "replay", "initialize", "set_plan_mode"})
"""Methods whose only INVALID_STATE is "a turn is running" (for engines that send no reason)."""


def _is_busy(data: Any, method: str) -> bool:
    """Whether an INVALID_STATE error means "busy": by its `data.reason` (soulwire), else by
    the method it answers (kimi sends no data) — never by the message text."""
    reason = data.get("reason") if isinstance(data, dict) else None
    if isinstance(reason, str):
        return reason == jsonrpc.BUSY
    return method in _BUSY_METHODS


def engine_error(error: Any, *, method: str = "") -> EngineError:
    """The exception for a JSON-RPC `error` object answered to `method`."""
    raw = as_object(error)
    if raw is None:
        return InternalEngineError(jsonrpc.INTERNAL_ERROR, f"malformed error: {error!r}", method=method)
    code = raw.get("code")
    message = str(raw.get("message") or "")
    data = raw.get("data")
    if not isinstance(code, int):
        return InternalEngineError(jsonrpc.INTERNAL_ERROR, message or repr(raw), data, method=method)
    if code == jsonrpc.INVALID_STATE:
        cls = EngineBusyError if _is_busy(data, method) else InvalidStateError
        return cls(code, message, data, method=method)
    if code == jsonrpc.METHOD_NOT_FOUND:
        text = f"`{method}` is not supported by this engine ({message})" if method else message
        return NotSupportedError(code, text, data, method=method)
    return _BY_CODE.get(code, InternalEngineError)(code, message, data, method=method)


__all__ = [
    "AuthExpiredError",
    "ChatProviderError",
    "ConfigurationError",
    "EngineBusyError",
    "EngineError",
    "EngineExitedError",
    "EngineNotFoundError",
    "InternalEngineError",
    "InvalidParamsError",
    "InvalidStateError",
    "LLMNotSetError",
    "LLMNotSupportedError",
    "MessageRejectedError",
    "NotSupportedError",
    "ProtocolError",
    "SDKError",
    "SessionClosedError",
    "SessionNotFoundError",
    "SessionStoreError",
    "StartupTimeoutError",
    "ToolDefinitionError",
    "ToolsRejectedError",
    "TurnInProgressError",
    "TurnNotFinishedError",
]
