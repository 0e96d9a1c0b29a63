"""Named users of `soulwire serve`: who a request's token names, and with which role.

With no user defined the server keeps its single token (one person, nothing changes). Once
one is, every request must carry a user's own token: the single token is refused, so every
action can be told apart (server/audit.py records who did what).

Users live beside the sessions: in the share dir's `users.json` (0600) for the file store,
in the `sw_users` table of a PostgreSQL store. Only a digest of each token is kept."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, get_args

import anyio.to_thread

from soulwire.errors import SoulwireError
from soulwire.sessions.jsonl import ensure_private_dir
from soulwire.sessions.store import StoreUnavailable

if TYPE_CHECKING:
    from soulwire.sessions.postgres import PostgresBackend

Role = Literal["admin", "member", "observer"]
ROLES: tuple[Role, ...] = get_args(Role)
USERS_FILE = "users.json"
TOKEN_PREFIX = "swu_"
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")
REFRESH_S = 1.0
"""How long a running server trusts its copy of the users: a removed user or a rotated token
stops working within this time (another process, the `users` command, changed them)."""


class UserError(SoulwireError):
    """A users command that cannot be done; the message is one line for a person."""


@dataclass(frozen=True)
class User:
    name: str
    role: Role
    token_sha256: str
    created: float

    @property
    def drives(self) -> bool:
        """May prompt, approve, cancel, change rules, fork and rewind (observers only watch)."""
        return self.role != "observer"


def new_token() -> str:
    """A user's token: 256 random bits, shown once."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    """What is stored of a token. SHA-256, not a slow KDF such as scrypt: the tokens are 256
    random bits made here, never a password a person chose, so there is no dictionary to
    try and a brute force over the digest is as hopeless as guessing the token itself; a KDF
    would only add its cost (tens of ms) to every request's check."""
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(name: str) -> str:
    if not name or len(name) > 64 or not set(name) <= NAME_CHARS:
        raise UserError(f"a user name is 1-64 letters, digits or . _ - @, got {name!r}")
    return name


def check_role(role: str) -> Role:
    if role not in ROLES:
        raise UserError(f"a role is one of {', '.join(ROLES)}, got {role!r}")
    return role


class UserBackend(Protocol):
    """Where the users are kept (the share dir's file, or the PostgreSQL store)."""

    def load(self) -> list[User]: ...
    def add(self, user: User) -> None: ...
    def remove(self, name: str) -> bool: ...
    def set_token(self, name: str, token_sha256: str) -> bool: ...


class FileUsers:
    """`users.json` in the share dir, rewritten whole (atomically, 0600) on each change."""

    def __init__(self, share: Path) -> None:
        self.share = share
        self.path = share / USERS_FILE

    def load(self) -> list[User]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read {self.path}: {exc.__class__.__name__}") from None
        entries = raw.get("users") if isinstance(raw, dict) else None
        users: list[User] = []
        for entry in cast(list[dict[str, Any]], entries or []):
            try:
                users.append(
                    User(
                        str(entry["name"]), check_role(str(entry["role"])),
                        str(entry["token_sha256"]), float(entry.get("created", 0)),
                    )
                )  # fmt: skip
            except (KeyError, TypeError, ValueError, UserError):
                raise UserError(f"{self.path} has a malformed user entry") from None
        return users

    def _save(self, users: list[User]) -> None:
        ensure_private_dir(self.share)
        tmp = self.path.with_name(f".{USERS_FILE}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"users": [asdict(u) for u in users]}, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    @contextmanager
    def _locked(self) -> Generator[list[User]]:
        """The users, read and written back under an exclusive lock (two `users` commands at
        once must not lose one's change)."""
        import fcntl

        ensure_private_dir(self.share)
        fd = os.open(self.share / f".{USERS_FILE}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            users = self.load()
            before = list(users)
            yield users
            if users != before:
                self._save(users)
        finally:
            os.close(fd)  # (closing releases the lock)

    def add(self, user: User) -> None:
        with self._locked() as users:
            if any(u.name == user.name for u in users):
                raise UserError(f"a user {user.name!r} exists already")
            users.append(user)

    def remove(self, name: str) -> bool:
        with self._locked() as users:
            kept = [u for u in users if u.name != name]
            found = len(kept) != len(users)
            users[:] = kept
        return found

    def set_token(self, name: str, token_sha256: str) -> bool:
        with self._locked() as users:
            found = any(u.name == name for u in users)
            users[:] = [User(u.name, u.role, token_sha256, u.created) if u.name == name else u for u in users]
        return found


class PostgresUsers:
    """The `sw_users` table of a PostgreSQL store (schema version 3)."""

    def __init__(self, backend: PostgresBackend) -> None:
        self.backend = backend

    def load(self) -> list[User]:
        with self.backend.connection() as conn:
            rows = conn.execute("SELECT name, role, token_sha256, created FROM sw_users ORDER BY created")
            return [User(str(n), check_role(str(r)), str(t), float(c)) for n, r, t, c in rows]

    def add(self, user: User) -> None:
        with self.backend.connection() as conn:
            row = conn.execute(
                "INSERT INTO sw_users (name, role, token_sha256, created) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING RETURNING name",
                (user.name, user.role, user.token_sha256, user.created),
            ).fetchone()
        if row is None:
            raise UserError(f"a user {user.name!r} exists already")

    def remove(self, name: str) -> bool:
        with self.backend.connection() as conn:
            return conn.execute("DELETE FROM sw_users WHERE name = %s", (name,)).rowcount > 0

    def set_token(self, name: str, token_sha256: str) -> bool:
        with self.backend.connection() as conn:
            cursor = conn.execute(
                "UPDATE sw_users SET token_sha256 = %s WHERE name = %s", (token_sha256, name)
            )
            return cursor.rowcount > 0


def add_user(backend: UserBackend, name: str, role: str) -> str:
    """Add a user; returns their token (the only time it is seen)."""
    token = new_token()
    backend.add(User(check_name(name), check_role(role), token_digest(token), time.time()))
    return token


def rotate_token(backend: UserBackend, name: str) -> str:
    """A new token for `name`; the old one stops working."""
    token = new_token()
    if not backend.set_token(name, token_digest(token)):
        raise UserError(f"no user {name!r}")
    return token


class Directory:
    """The running server's view of the users, refreshed from the backend at most every
    REFRESH_S (in a worker thread: a database round trip never holds the event loop)."""

    def __init__(self, backend: UserBackend) -> None:
        self.backend = backend
        self._users: list[User] = []
        self._loaded_at = -REFRESH_S
        self._lock = anyio.Lock()

    @property
    def active(self) -> bool:
        """Users are defined (as of the last refresh): the single token no longer serves."""
        return bool(self._users)

    @property
    def names(self) -> set[str]:
        return {u.name for u in self._users}

    async def refresh(self) -> None:
        async with self._lock:
            if time.monotonic() - self._loaded_at < REFRESH_S:
                return
            try:
                self._users = await anyio.to_thread.run_sync(self.backend.load)
            except (UserError, OSError, StoreUnavailable):
                pass  # a torn or unreadable file mid-change, a database down: keep the last good copy
            self._loaded_at = time.monotonic()

    async def authenticate(self, offered: str | None) -> User | None:
        """The user whose token this is (compared in constant time), or None."""
        await self.refresh()
        if not offered:
            return None
        digest = token_digest(offered).encode()
        found: User | None = None
        for user in self._users:  # every digest compared: the time tells nothing of which matched
            if hmac.compare_digest(digest, user.token_sha256.encode()):
                found = user
        return found


__all__ = [
    "ROLES",
    "USERS_FILE",
    "Directory",
    "FileUsers",
    "PostgresUsers",
    "Role",
    "User",
    "UserBackend",
    "UserError",
    "add_user",
    "rotate_token",
    "token_digest",
]
