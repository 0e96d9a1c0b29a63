"""ACP authentication: the methods `initialize` advertises, `authenticate` and `logout`.

They are Soulwire's own login (`soulwire login` / `logout`, run as a child process so the
agent keeps serving while the user confirms in the browser):

- `kimi-code` (type `agent`): the Kimi Code device flow; the agent opens the verification URL
  in the browser and answers once the user confirmed (at once when already logged in);
- `terminal-login` (type `terminal`, offered only to an editor that declares
  `auth.terminal`): the editor runs `soulwire acp login` in a terminal, where the user picks
  Kimi Code or an API-key provider (the guided setup checks the key before saving it).

A successful login or logout rewrites the share dir's config; sessions opened afterwards read
it again."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from acp import RequestError

from soulwire.config import credentials
from soulwire.ui.acp.handshake import KIMI_CODE, TERMINAL_LOGIN
from soulwire.wire.environment import SHARE_DIR_ENV

MANAGED_PROVIDER = "managed:kimi-code"
LOGIN_TIMEOUT_S = 15 * 60.0  # the device code's own lifetime
AUTH_REQUIRED = -32000


def logged_in(share: Path, raw_config: dict[str, Any]) -> bool:
    """A stored Kimi Code token that the configuration uses."""
    providers = raw_config.get("providers")
    return credentials.load_token(credentials.PLATFORM_KEY, share) is not None and (
        isinstance(providers, dict) and MANAGED_PROVIDER in providers
    )


async def _run_cli(share: Path, *argv: str, timeout: float) -> list[dict[str, Any]]:
    """`soulwire ARGV --json` in a child process; its JSON events. Cancelling kills it."""
    env = {**os.environ, SHARE_DIR_ENV[0]: str(share)}
    command = [sys.executable, "-m", "soulwire", *argv, "--json"]
    with anyio.fail_after(timeout):
        done = await anyio.run_process(command, env=env, check=False, stdin=None)
    events: list[dict[str, Any]] = []
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _failure(events: list[dict[str, Any]]) -> str | None:
    if any(e.get("type") == "success" for e in events):
        return None
    errors = [str(e.get("message")) for e in events if e.get("type") == "error"]
    return errors[-1] if errors else "the login did not finish"


async def authenticate(method_id: str, share: Path, raw_config: dict[str, Any]) -> None:
    """Run the method's flow; raises RequestError when it is unknown or fails."""
    if method_id == TERMINAL_LOGIN:
        raise RequestError(-32602, "terminal-login runs in the editor's terminal, not through authenticate")
    if method_id != KIMI_CODE:
        raise RequestError(-32602, f"Unknown auth method {method_id!r} (methods: {KIMI_CODE})")
    if logged_in(share, raw_config):
        return
    try:
        events = await _run_cli(share, "login", timeout=LOGIN_TIMEOUT_S)
    except TimeoutError:
        raise RequestError(
            AUTH_REQUIRED, "Authentication required: the login was not confirmed in time"
        ) from None
    problem = _failure(events)
    if problem is not None:
        raise RequestError(AUTH_REQUIRED, f"Authentication required: {problem}")


async def logout(share: Path) -> None:
    """Forget the Kimi Code token and the configuration that used it."""
    events = await _run_cli(share, "logout", timeout=60.0)
    problem = _failure(events)
    if problem is not None:
        raise RequestError(-32603, f"Logout failed: {problem}")
