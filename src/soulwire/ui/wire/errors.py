"""The one table from the engine's exceptions to JSON-RPC errors (spec §2.3): whatever a
method handler or a turn raises reaches the client as the error it maps to here."""

from __future__ import annotations

from soulwire.llm.errors import AuthenticationError, LLMNotSet, LLMNotSupported, ProviderError
from soulwire.sessions.store import StoreUnavailable
from soulwire.wire import jsonrpc
from soulwire.wire.jsonrpc import RPCError

AUTH_EXPIRED_MESSAGE = (
    'Authentication failed. Your login session may have expired. Please run "/login" to sign in again.'
)


def rpc_error_for(exc: Exception) -> RPCError:
    """The JSON-RPC error a client gets for `exc`."""
    if isinstance(exc, RPCError):
        return exc
    if isinstance(exc, LLMNotSet):
        return RPCError(jsonrpc.LLM_NOT_SET, str(exc))
    if isinstance(exc, LLMNotSupported):
        return RPCError(jsonrpc.LLM_NOT_SUPPORTED, str(exc))
    if isinstance(exc, AuthenticationError):
        # Only a provider that logs in with OAuth has a login to renew (-32004, spec §2.3).
        if exc.oauth:
            return RPCError(jsonrpc.AUTH_EXPIRED, AUTH_EXPIRED_MESSAGE)
        return RPCError(jsonrpc.CHAT_PROVIDER_ERROR, str(exc))
    if isinstance(exc, ProviderError):
        return RPCError(jsonrpc.CHAT_PROVIDER_ERROR, str(exc))
    if isinstance(exc, StoreUnavailable):
        return store_unavailable(str(exc))
    return jsonrpc.internal_error(exc)


def store_unavailable(message: str) -> RPCError:
    """The answer to a request that needs the session store while it cannot be reached."""
    return RPCError(jsonrpc.INVALID_STATE, message, {"reason": jsonrpc.STORE_UNAVAILABLE})


__all__ = ["AUTH_EXPIRED_MESSAGE", "rpc_error_for", "store_unavailable"]
