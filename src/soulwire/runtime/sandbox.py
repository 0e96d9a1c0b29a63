"""Choosing a session's sandbox: the options (command line, or a host such as `serve`), else
what the session was started with (`state.json`), else the config."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from soulwire.config.loader import ConfigError
from soulwire.config.model import Config
from soulwire.runtime.options import SessionOptions
from soulwire.tools.sandbox import SandboxPolicy, bubblewrap_problem
from soulwire.wire.session_settings import APPROVAL_MODES, SANDBOX_MODES, ApprovalMode

STATE_KEY = "sandbox"
"""`state.json`: `{"mode": …, "network": …}` chosen for the session (flag or host), so a
resumed session keeps it; a session that never chose follows the config as it is now."""


def session_sandbox(
    options: SessionOptions, config: Config, state: dict[str, Any], add_dirs: Sequence[Path]
) -> SandboxPolicy:
    """The session's sandbox policy; an explicit choice is recorded in `state`. Raises
    ConfigError when a sandbox is asked for and bubblewrap cannot run here (never runs
    unconfined instead)."""
    stored = state.get(STATE_KEY)
    stored = cast(dict[str, Any], stored) if isinstance(stored, dict) else {}
    mode = options.sandbox or stored.get("mode") or config.sandbox
    if mode not in SANDBOX_MODES:
        raise ConfigError(f"invalid sandbox mode {mode!r}; one of: {', '.join(SANDBOX_MODES)}")
    network = options.sandbox_network
    if network is None:
        network = stored.get("network") if isinstance(stored.get("network"), bool) else config.sandbox_network
    if mode != "off":
        problem = bubblewrap_problem()
        if problem is not None:
            raise ConfigError(f"cannot start with --sandbox {mode}: {problem}")
    if options.sandbox is not None or options.sandbox_network is not None:
        state[STATE_KEY] = {"mode": mode, "network": bool(network)}
    return SandboxPolicy.create(
        mode,
        network=bool(network),
        work_dir=options.work_dir,
        add_dirs=add_dirs,
        share_dir=options.share_dir,
    )


def approval_mode(options: SessionOptions, config: Config) -> ApprovalMode:
    """`ask` or `on-escape`: the options' (a host may set it per session), else the config's."""
    mode = options.approval or config.approval
    if mode not in APPROVAL_MODES:
        raise ConfigError(f"invalid approval mode {mode!r}; one of: {', '.join(APPROVAL_MODES)}")
    return mode
