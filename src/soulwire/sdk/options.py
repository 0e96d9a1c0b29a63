"""How to launch an engine: executable, command line and environment. The flags are the
ones `kimi --wire` and `soulwire --wire` share, so the same options drive either."""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soulwire.sdk.errors import ConfigurationError, EngineNotFoundError

DEFAULT_EXECUTABLE = "soulwire"


def resolve_executable(executable: str | os.PathLike[str] | Sequence[str] | None) -> list[str]:
    """The engine command as argv. None means `soulwire`: from PATH, else the console script
    installed next to the running interpreter (a venv that is not activated)."""
    if executable is None:
        found = shutil.which(DEFAULT_EXECUTABLE)
        if found is None:
            sibling = Path(sys.executable).with_name(DEFAULT_EXECUTABLE)
            if sibling.exists():
                found = str(sibling)
        if found is None:
            raise EngineNotFoundError(DEFAULT_EXECUTABLE, "not on PATH")
        return [found]
    if isinstance(executable, (str, os.PathLike)):
        return [os.fspath(executable)]
    argv = [str(part) for part in executable]
    if not argv:
        raise EngineNotFoundError("", "empty command")
    return argv


@dataclass
class LaunchOptions:
    """Everything that goes on the engine's command line or into its environment."""

    executable: str | os.PathLike[str] | Sequence[str] | None = None
    args: Sequence[str] = ()
    """Extra command-line arguments, appended last."""
    work_dir: str | os.PathLike[str] | None = None
    model: str | None = None
    thinking: bool | None = None
    yolo: bool = False
    session_id: str | None = None
    continue_session: bool = False
    config_file: str | os.PathLike[str] | None = None
    config: Mapping[str, Any] | str | None = None
    """A whole configuration (a dict is sent as JSON) instead of the engine's config file."""
    max_steps_per_turn: int | None = None
    env: Mapping[str, str] | None = None
    """Variables added to (or, with inherit_env=False, instead of) this process's environment."""
    inherit_env: bool = True
    share_dir: str | os.PathLike[str] | None = None
    """The engine's data directory (config.toml, sessions): sets SOULWIRE_SHARE_DIR and KIMI_SHARE_DIR."""
    sandbox: str | None = None
    """Soulwire only: `off`, `read-only` or `workspace-write` (`--sandbox`)."""
    sandbox_network: bool | None = None
    """Soulwire only: network inside the sandbox (`--sandbox-network on|off`)."""
    approval: str | None = None
    """Soulwire only: `ask` or `on-escape` (`--approval`)."""
    _generated_id: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.session_id is not None and self.continue_session:
            raise ConfigurationError("session_id and continue_session cannot be combined")
        if self.config_file is not None and self.config is not None:
            raise ConfigurationError("config_file and config cannot be combined")
        if self.session_id is None and not self.continue_session:
            # Always name the session, so its id is known even when the engine's initialize
            # result does not report it (the reference's does not).
            self._generated_id = str(uuid.uuid4())

    @property
    def requested_session_id(self) -> str | None:
        return self.session_id or self._generated_id

    def resolved_work_dir(self) -> Path | None:
        """The absolute work dir (not resolving symlinks: engines hash the path as given)."""
        if self.work_dir is None:
            return None
        path = Path(os.path.abspath(os.fspath(self.work_dir)))
        if not path.is_dir():
            raise ConfigurationError(f"work_dir is not a directory: {path}")
        return path

    def argv(self) -> list[str]:
        argv = [*resolve_executable(self.executable), "--wire"]
        work_dir = self.resolved_work_dir()
        if work_dir is not None:
            argv += ["--work-dir", str(work_dir)]
        if self.requested_session_id is not None:
            argv += ["--session", self.requested_session_id]
        elif self.continue_session:
            argv.append("--continue")
        if self.config_file is not None:
            argv += ["--config-file", os.fspath(self.config_file)]
        elif self.config is not None:
            text = self.config if isinstance(self.config, str) else json.dumps(dict(self.config))
            argv += ["--config", text]
        if self.model is not None:
            argv += ["--model", self.model]
        if self.thinking is not None:
            argv.append("--thinking" if self.thinking else "--no-thinking")
        if self.yolo:
            argv.append("--yolo")
        if self.max_steps_per_turn is not None:
            argv += ["--max-steps-per-turn", str(self.max_steps_per_turn)]
        if self.sandbox is not None:
            argv += ["--sandbox", self.sandbox]
        if self.sandbox_network is not None:
            argv += ["--sandbox-network", "on" if self.sandbox_network else "off"]
        if self.approval is not None:
            argv += ["--approval", self.approval]
        argv += [str(a) for a in self.args]
        return argv

    def environment(self) -> dict[str, str]:
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.env or {})
        if self.share_dir is not None:
            share = os.path.abspath(os.fspath(self.share_dir))
            env["SOULWIRE_SHARE_DIR"] = share
            env["KIMI_SHARE_DIR"] = share
        return env


__all__ = ["DEFAULT_EXECUTABLE", "LaunchOptions", "resolve_executable"]
