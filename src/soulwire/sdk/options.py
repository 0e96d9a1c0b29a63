"""Every setting of a session in one typed object (`Options`), and how they launch an
engine (`LaunchOptions`: executable, command line, environment). The flags are the ones
`kimi --wire` and `soulwire --wire` share, so the same options drive either."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from soulwire.ids import uuid4
from soulwire.sdk.errors import ConfigurationError, EngineNotFoundError
from soulwire.wire.environment import SHARE_DIR_ENV
from soulwire.wire.session_settings import SessionSettings

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
class LaunchOptions(SessionSettings):
    """Everything that goes on the engine's command line or into its environment: the
    session's settings (`SessionSettings`: `model`, `thinking`, `yolo`, `max_steps_per_turn`,
    `sandbox`, `sandbox_network`, `approval`, `plan_mode`) and how to start the engine."""

    executable: str | os.PathLike[str] | Sequence[str] | None = None
    args: Sequence[str] = ()
    """Extra command-line arguments, appended last."""
    work_dir: str | os.PathLike[str] | None = None
    session_id: str | None = None
    continue_session: bool = False
    config_file: str | os.PathLike[str] | None = None
    config: Mapping[str, Any] | str | None = None
    """A whole configuration (a dict is sent as JSON) instead of the engine's config file."""
    env: Mapping[str, str] | None = None
    """Variables added to (or, with inherit_env=False, instead of) this process's environment."""
    inherit_env: bool = True
    share_dir: str | os.PathLike[str] | None = None
    """The engine's data directory (config.toml, sessions): sets SOULWIRE_SHARE_DIR and KIMI_SHARE_DIR."""
    add_dirs: Sequence[str | os.PathLike[str]] = ()
    """Extra directories the agent may work in besides `work_dir` (`--add-dir`, each)."""
    agent: str | None = None
    """A built-in agent (`--agent`)."""
    agent_file: str | os.PathLike[str] | None = None
    """A custom agent spec (`--agent-file`): system prompt, tools, sub-agents."""
    mcp_config: Mapping[str, Any] | str | None = None
    """MCP servers the engine itself connects to (`--mcp-config`; a dict is sent as JSON)."""
    skills_dirs: Sequence[str | os.PathLike[str]] = ()
    """Skills directories (`--skills-dir`, each)."""
    _generated_id: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.session_id is not None and self.continue_session:
            raise ConfigurationError("session_id and continue_session cannot be combined")
        if self.config_file is not None and self.config is not None:
            raise ConfigurationError("config_file and config cannot be combined")
        if self.session_id is None and not self.continue_session:
            # Always name the session, so its id is known even when the engine's initialize
            # result does not report it (the reference's does not).
            self._generated_id = uuid4()

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
        argv += self.engine_flags()
        for directory in self.add_dirs:
            argv += ["--add-dir", os.path.abspath(os.fspath(directory))]
        if self.agent is not None:
            argv += ["--agent", self.agent]
        if self.agent_file is not None:
            argv += ["--agent-file", os.path.abspath(os.fspath(self.agent_file))]
        if self.mcp_config is not None:
            text = self.mcp_config if isinstance(self.mcp_config, str) else json.dumps(dict(self.mcp_config))
            argv += ["--mcp-config", text]
        for directory in self.skills_dirs:
            argv += ["--skills-dir", os.path.abspath(os.fspath(directory))]
        argv += [str(a) for a in self.args]
        return argv

    def environment(self) -> dict[str, str]:
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.env or {})
        if self.share_dir is not None:
            share = os.path.abspath(os.fspath(self.share_dir))
            env.update(dict.fromkeys(SHARE_DIR_ENV, share))
        return env


DEFAULT_APPROVAL_TIMEOUT_S = 300.0
SDK_PROTOCOL_VERSION = "1.10"
"""The newest Wire protocol version this SDK understands (declared in `initialize`)."""
CLIENT_NAME = "soulwire-sdk-python"
_DECISIONS = ("approve", "approve_for_session", "reject")


def _seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass
class Options(LaunchOptions):
    """Everything a `Session` can be told, checked when it is made (ConfigurationError).

    Launch: `executable` (path or argv; default `soulwire`), `args`, `work_dir`, `model`,
    `thinking`, `yolo`, `session_id` / `continue_session`, `config_file` / `config`,
    `max_steps_per_turn`, `env`, `inherit_env`, `share_dir`.

    Behaviour: `tools` (functions or `Tool`s), `strict_tools` (fail if the engine rejects
    one), `on_approval`, `approval_timeout` (None waits forever) and `approval_default`,
    `on_question`, `supports_question`, `supports_plan_mode`, `startup_timeout`,
    `close_timeout`, `on_stderr`, `client_name`, `protocol_version`, `handshake` (False skips
    `initialize`, like a 1.0 client).

    Permissions: `can_use_tool(name, input, context) -> Allow() | Deny(reason)` (instead of
    `on_approval`; see `soulwire.sdk.permissions`).

    Limits: `budget` (a `soulwire.wire.Budget`, or a dict of its shape: limits on money,
    tokens, time and tool calls per turn, session or tree, enforced by the engine; raise it
    later with `Session.set_budget`), `max_budget_usd` (short for a per-turn money limit:
    `budget={"turn": {"usd": X}}`), `prices` (model → `ModelPrice`, merged over
    `pricing.DEFAULT_PRICES` and sent to the engine, which prices the budget with them; the
    model is `model`, or the `"*"` entry). `query()` only: `max_turns` (the engine's step
    limit per turn: sets `max_steps_per_turn`), `turn_timeout` (seconds; the turn is cancelled).

    Structured output (`query()`): `output_format`, a pydantic model class or a JSON Schema.

    Hooks: `hooks`, a list of `Hook(event, callback, matcher=, timeout=)` or a mapping
    event -> callable(s) (see `soulwire.sdk.hooks`). In-process MCP servers: `mcp_servers`,
    name -> an `mcp` server object (its tools become external tools; see `soulwire.sdk.mcp`)."""

    tools: Iterable[Any] = ()
    """`Tool`s or plain (async) functions, offered to the model as external tools."""
    strict_tools: bool = False
    on_approval: Callable[[Any], Any] | None = None
    approval_timeout: float | None = DEFAULT_APPROVAL_TIMEOUT_S
    approval_default: Any = "reject"
    """An ApprovalDecision or one of "approve", "approve_for_session", "reject"."""
    on_question: Callable[[Any], Any] | None = None
    supports_question: bool | None = None
    """Declared to the engine; None means "when `on_question` is set"."""
    supports_plan_mode: bool = False
    startup_timeout: float = 60.0
    close_timeout: float = 5.0
    on_stderr: Callable[[str], None] | None = None
    client_name: str = CLIENT_NAME
    protocol_version: str = SDK_PROTOCOL_VERSION
    handshake: bool = True
    can_use_tool: Callable[..., Any] | None = None
    max_turns: int | None = None
    turn_timeout: float | None = None
    max_budget_usd: float | None = None
    budget: Any = None
    """A `soulwire.wire.Budget` or a dict of its shape (`{"tree": {"usd": 5}, "warn_at": 0.9}`)."""
    prices: Mapping[str, Any] | None = None
    output_format: Any = None
    """`query()` only: a pydantic model class or a JSON Schema dict the final answer must match."""
    hooks: Any = None
    """`Hook`s, or a mapping hook event -> callable or list of callables."""
    mcp_servers: Mapping[str, Any] | None = None
    """In-process MCP servers by name (objects of the official `mcp` SDK)."""
    allowed_tools: Sequence[str] | None = None
    """Only these tools may run (names or regular expressions); other calls are blocked by a
    PreToolUse hook the SDK adds, and the model is told why. None: no restriction."""
    disallowed_tools: Sequence[str] = ()
    """These tools may not run (names or regular expressions), checked the same way."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_limits()
        self._adapt_permissions()
        if self.hooks is not None:
            from soulwire.sdk.hooks import as_hooks

            as_hooks(self.hooks)  # bad events, callbacks and timeouts are refused here
        for name, server in (self.mcp_servers or {}).items():
            if not name.replace("_", "").replace("-", "").isalnum():
                raise ConfigurationError(f"MCP server names use letters, digits, _ and -, not {name!r}")
            # duck-typed so that `mcp` is imported only when a session starts: an `mcp.server`
            # `Server` has `run`, an `MCPServer` wraps one
            if not (callable(getattr(server, "run", None)) or hasattr(server, "_lowlevel_server")):
                raise ConfigurationError(f"mcp_servers[{name!r}] is not an MCP server object: {server!r}")
        if self.output_format is not None:
            from soulwire.sdk.structured import OutputSpec

            OutputSpec(self.output_format)  # a bad schema is refused here
        steps: Any = self.max_steps_per_turn
        if steps is not None and (type(steps) is not int or steps < 1):
            raise ConfigurationError(f"max_steps_per_turn must be a positive integer, not {steps!r}")
        for name in ("startup_timeout", "close_timeout"):
            value = getattr(self, name)
            if not _seconds(value) or value < 0:
                raise ConfigurationError(f"{name} must be a number of seconds >= 0, not {value!r}")
        timeout: Any = self.approval_timeout
        if timeout is not None and (not _seconds(timeout) or timeout <= 0):
            raise ConfigurationError(
                f"approval_timeout must be None or a number of seconds > 0, not {timeout!r}"
            )
        default = self.approval_default
        if not (default in _DECISIONS or getattr(default, "response", None) in _DECISIONS):
            raise ConfigurationError(f"approval_default must be a decision, not {default!r}")
        if isinstance(self.args, str):
            raise ConfigurationError("args must be a sequence of arguments, not one string")
        for name in ("add_dirs", "skills_dirs", "disallowed_tools"):
            if isinstance(getattr(self, name), str):
                raise ConfigurationError(f"{name} must be a sequence, not one string")
        if isinstance(self.allowed_tools, str):
            raise ConfigurationError("allowed_tools must be a sequence, not one string")
        for pattern in [*(self.allowed_tools or ()), *self.disallowed_tools]:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigurationError(
                    f"tool pattern {pattern!r} is not a regular expression: {exc}"
                ) from None

    def _check_limits(self) -> None:
        turns: Any = self.max_turns
        if turns is not None:
            if type(turns) is not int or turns < 1:
                raise ConfigurationError(f"max_turns must be a positive integer, not {turns!r}")
            if self.max_steps_per_turn not in (None, turns):
                raise ConfigurationError("max_turns and max_steps_per_turn differ: set one of them")
            self.max_steps_per_turn = turns
        for name in ("turn_timeout", "max_budget_usd"):
            value = getattr(self, name)
            if value is not None and (not _seconds(value) or value <= 0):
                raise ConfigurationError(f"{name} must be None or a number > 0, not {value!r}")
        from soulwire.sdk.pricing import ModelPrice, price_for

        for model, price in (self.prices or {}).items():
            if not isinstance(price, ModelPrice):
                raise ConfigurationError(f"prices[{model!r}] must be a ModelPrice, not {price!r}")
        if self.max_budget_usd is not None and price_for(self.model, self.prices) is None:
            raise ConfigurationError(
                f"max_budget_usd needs a price for the model ({self.model or 'not set'}): "
                "pass prices={model_name: ModelPrice(...)} (or the key '*' for any model)"
            )
        if self.budget is not None:
            from pydantic import ValidationError

            from soulwire.wire.budget import Budget

            try:
                self.budget = Budget.model_validate(self.budget)
            except ValidationError as exc:
                problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ConfigurationError(f"budget: {problem}") from None

    def engine_budget(self) -> dict[str, Any] | None:
        """The budget sent to the engine in `initialize` (`budget` with `max_budget_usd` as
        the turn's money limit), or None."""
        from soulwire.wire.budget import Budget

        budget: Budget | None = self.budget
        if self.max_budget_usd is not None:
            update = Budget.model_validate({"turn": {"usd": self.max_budget_usd}})
            budget = update if budget is None else budget.updated(update)
        return None if budget is None else budget.model_dump(mode="json", exclude_unset=True)

    def engine_prices(self) -> dict[str, Any] | None:
        """`prices` as the engine takes them in `initialize`."""
        from soulwire.wire.pricing import price_table

        return price_table(self.prices) if self.prices else None

    def _adapt_permissions(self) -> None:
        if self.can_use_tool is None:
            return
        if not callable(self.can_use_tool):
            raise ConfigurationError(f"can_use_tool must be callable, not {self.can_use_tool!r}")
        from soulwire.sdk.permissions import PermissionAdapter

        current = self.on_approval
        if isinstance(current, PermissionAdapter) and current.callback is self.can_use_tool:
            return  # already adapted (Options copied with dataclasses.replace)
        if current is not None and not isinstance(current, PermissionAdapter):
            raise ConfigurationError("can_use_tool and on_approval cannot be combined: choose one")
        self.on_approval = PermissionAdapter(self.can_use_tool)

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls) if f.init)

    def launch(self) -> LaunchOptions:
        """The launch part (an Options is one)."""
        return self


__all__ = [
    "CLIENT_NAME",
    "DEFAULT_APPROVAL_TIMEOUT_S",
    "DEFAULT_EXECUTABLE",
    "SDK_PROTOCOL_VERSION",
    "LaunchOptions",
    "Options",
    "resolve_executable",
]
