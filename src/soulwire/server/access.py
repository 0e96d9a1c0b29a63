"""What a named user may do (server/users.py says who a request's user is).

- admin: sees and drives every session, reads the audit, writes the configuration;
- member: sees and drives the sessions they created and those shared with them;
- observer: watches the sessions shared with them (attached as an observer), drives nothing.

A session's owner and the users it is shared with are kept in its state (registry.OWNER_KEY,
SHARED_KEY), with the session, in whichever store holds it. A session from before users were
defined has no owner: only admins see it. Requests are checked here before routing, so every
route and WebSocket (Wire and ACP) gets the same answer: 403 with a sentence saying why.
`/api/blobs/{id}` is not checked by session: a blob is named by the sha256 of its content, so
only one shown the event that refers to it (or who has the content already) can name it."""

from __future__ import annotations

import re
from typing import Any

import anyio.to_thread

from soulwire.server.registry import OWNER_KEY, SHARED_KEY, SessionError, SessionRegistry
from soulwire.server.security import Scope
from soulwire.server.users import User

AUDIT_PATH = "/api/audit"
DRAIN_PATH = "/api/drain"
ME_PATH = "/api/me"
_SESSION = re.compile(r"/(?:api|ws)/sessions/([^/]+)(/[^/]+)?/?")
_ADMIN_WRITES = ("/api/web/config", "/api/web/config/form")
_READS = ("GET", "HEAD")


def user_of(scope: Scope) -> User | None:
    """The named user a request was authenticated as (None: the single-token mode)."""
    user = (scope.get("state") or {}).get("user")
    return user if isinstance(user, User) else None


def may_see(user: User, state: dict[str, Any]) -> bool:
    if user.role == "admin":
        return True
    shared = state.get(SHARED_KEY)
    return state.get(OWNER_KEY) == user.name or (isinstance(shared, list) and user.name in shared)


def may_share(user: User, state: dict[str, Any]) -> bool:
    return user.role == "admin" or (user.drives and state.get(OWNER_KEY) == user.name)


def refusal_to_drive(user: User, action: str) -> str:
    return f"{user.name} is an observer on this server: {action} is refused"


async def refusal(scope: Scope, path: str, registry: SessionRegistry) -> str | None:
    """Why this request is refused to its user (None: it may go on, or no user is named)."""
    user = user_of(scope)
    if user is None or user.role == "admin":
        return None
    method = scope.get("method", "GET") if scope["type"] == "http" else "GET"
    if path == AUDIT_PATH:
        return f"{user.name} is not an admin: the audit is for admins"
    if path == DRAIN_PATH:
        return f"{user.name} is not an admin: replicas are drained by admins"
    if path in _ADMIN_WRITES and method not in _READS:
        return f"{user.name} is not an admin: the configuration is changed by admins"
    if path in ("/ws/sessions/new", "/api/sessions") and (scope["type"] == "websocket" or method == "POST"):
        return None if user.drives else refusal_to_drive(user, "creating a session")
    found = _SESSION.fullmatch(path)
    if found is None or found.group(1) == "new":
        return None
    session_id, tail = found.group(1), found.group(2) or ""
    try:
        state = await anyio.to_thread.run_sync(registry.state_of, session_id)
    except SessionError:
        return None  # the route answers (404)
    if not may_see(user, state):
        return f"{user.name} may not see session {session_id}: it is not theirs nor shared with them"
    if tail == "/share":
        return (
            None
            if may_share(user, state)
            else f"{user.name} may not share session {session_id}: only its owner or an admin may"
        )
    if method not in _READS and not user.drives:
        return refusal_to_drive(user, f"{method} {path}")
    return None


def visible(user: User | None, infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The listed sessions this user may see (every one without named users)."""
    if user is None or user.role == "admin":
        return infos
    return [i for i in infos if i.get("owner") == user.name or user.name in (i.get("shared_with") or [])]


__all__ = [
    "AUDIT_PATH",
    "DRAIN_PATH",
    "ME_PATH",
    "may_see",
    "may_share",
    "refusal",
    "refusal_to_drive",
    "user_of",
    "visible",
]
