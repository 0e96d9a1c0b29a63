"""The SDK's agent-side connection with every method this agent serves routed.

The SDK 0.12.1 routes what its schema (v1.19) had settled when it was cut: `session/resume`,
`session/close` and `session/fork` sit behind its "unstable" switch, and `session/delete` and
`logout`, stable since, are not routed at all. They are added to its router here, so one
connection serves the whole stable protocol (and fork) over any transport."""

from __future__ import annotations

import functools
import inspect
from typing import Any, cast

from acp.agent.connection import AgentSideConnection
from acp.exceptions import RequestError
from acp.schema import DeleteSessionRequest, LogoutRequest
from acp.utils import normalize_result
from pydantic import ValidationError

from soulwire.wire.jsonrpc import internal_error

EXTRA_ROUTES = (
    ("session/delete", DeleteSessionRequest, "delete_session"),
    ("logout", LogoutRequest, "logout"),
)


def agent_connection(agent: Any, transport: Any) -> AgentSideConnection:
    """An `AgentSideConnection` for `agent` over `transport` (an SDK `Transport`), not yet
    listening (call `listen()`)."""
    guarded = _Guarded(agent)
    connection = AgentSideConnection(
        cast(Any, guarded), transport, listening=False, use_unstable_protocol=True
    )  # the agent behind it is one
    router: Any = connection._conn._handler  # the SDK builds its router inside the connection
    for method, model, attr in EXTRA_ROUTES:
        router.route_request(method, model, guarded, attr, adapt_result=normalize_result)
    return connection


class _Guarded:
    """The agent as the SDK's router sees it. The SDK answers a handler's unexpected
    exception with its text (`{"details": str(exc)}`); here it becomes the one -32603 of
    every JSON-RPC surface instead: an incident id for the client, the exception in the log."""

    def __init__(self, agent: Any) -> None:
        self._agent = agent

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._agent, name)
        if not inspect.iscoroutinefunction(value):
            return value

        @functools.wraps(value)
        async def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return await value(*args, **kwargs)
            except (RequestError, ValidationError):  # answered by the SDK as they should be
                raise
            except Exception as exc:
                error = internal_error(exc)
                raise RequestError(error.code, error.message, error.data) from None

        return guarded
