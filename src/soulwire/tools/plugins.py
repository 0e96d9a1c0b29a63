"""Plugins (spec §9): directories under `<share>/plugins/` with a `plugin.json` in the
reference's format — `name`, `version`, `description`, `config_file` + `inject` (host values
written into the plugin's JSON config at install time and passed as environment variables at
each call), and `tools` (`name`, `description`, `command` argv, `parameters` JSON Schema).

A plugin tool runs its command in the plugin's directory after the user's approval
(`plugin:<name>`), with the arguments as JSON on stdin; its stdout is the result (capped as
Shell's output is), a non-zero exit an error. Host values are `api_key` and `base_url` of the
default model's provider.

A plugin is confined like a Shell command: it gets the values it declares in `inject` and
never the engine's other credentials (variables that look like secrets are removed), it is
killed with everything it started at its timeout, and in a sandboxed session it runs in the
session's sandbox (its own directory visible, read-only), so `approval = "on-escape"` and
`--yolo` may approve it there as they approve a confined command."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soulwire.config.model import Config
from soulwire.config.process_env import child_environ
from soulwire.errors import SoulwireError
from soulwire.tools.base import (
    DescribedTool,
    ToolContext,
    approved_object_arguments,
)
from soulwire.tools.builtin.output import MAX_OUTPUT_CHARS, cap_lines, clip_output
from soulwire.tools.builtin.process import Capture, run_captured
from soulwire.tools.sandbox import without_secrets
from soulwire.wire.types import ToolReturnValue, tool_error, tool_ok

PLUGIN_JSON = "plugin.json"
CALL_TIMEOUT_S = 120.0
_CAPTURE_BYTES = 4 * MAX_OUTPUT_CHARS  # per end, as Shell's
_ERROR_BYTES = 4_000


class PluginError(SoulwireError):
    """plugin.json is invalid, or an operation on a plugin failed (one line)."""


class PluginRuntimeInfo(BaseModel):
    host: str
    host_version: str


class PluginToolSpec(BaseModel):
    name: str = Field(min_length=1)
    description: str
    command: list[str] = Field(min_length=1)
    parameters: dict[str, Any] = Field(default_factory=dict)


class PluginSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    version: str
    description: str = ""
    config_file: str | None = None
    inject: dict[str, str] = Field(default_factory=dict)
    tools: list[PluginToolSpec] = Field(default_factory=list[PluginToolSpec])
    runtime: PluginRuntimeInfo | None = None


def parse_plugin_json(path: Path) -> PluginSpec:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PluginError(f"Failed to read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise PluginError(f"{path} must hold a JSON object")
    for required in ("name", "version"):
        if required not in data:
            raise PluginError(f"Missing required field '{required}' in {path}")
    if data.get("inject") and not data.get("config_file"):
        raise PluginError(f"'inject' requires 'config_file' in {path}")
    try:
        return PluginSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PluginError(f"Invalid plugin.json in {path}: {where}: {first['msg']}") from None


def installed_plugins(plugins_dir: Path) -> list[tuple[Path, PluginSpec]]:
    """Every installed plugin whose plugin.json is valid, by directory name."""
    if not plugins_dir.is_dir():
        return []
    found: list[tuple[Path, PluginSpec]] = []
    for child in sorted(plugins_dir.iterdir()):
        if child.name.startswith(".") or not (child / PLUGIN_JSON).is_file():
            continue
        try:
            found.append((child, parse_plugin_json(child / PLUGIN_JSON)))
        except PluginError:
            continue
    return found


class PluginTool(DescribedTool):
    """One tool of an installed plugin."""

    def __init__(
        self, spec: PluginToolSpec, plugin_dir: Path, inject: dict[str, str], host: dict[str, str]
    ) -> None:
        schema = spec.parameters or {"type": "object", "properties": {}}
        super().__init__(spec.name, spec.description, schema)
        self._command = spec.command
        self._dir = plugin_dir
        self._env = {target: host[source] for target, source in inject.items() if source in host}

    async def run(self, arguments: str | None, ctx: ToolContext) -> ToolReturnValue:
        sandbox = ctx.sandbox if ctx.sandbox is not None and ctx.sandbox.active else None
        value = await approved_object_arguments(
            arguments,
            ctx,
            action=f"plugin:{self.name}",
            description=f"Run plugin tool `{self.name}`.",
            confined=sandbox is not None,  # it runs in the session's sandbox, like Shell
        )
        if isinstance(value, ToolReturnValue):
            return value
        argv, env = self._command, without_secrets(child_environ())
        if sandbox is not None:
            argv = sandbox.command_argv(self._command, cwd=self._dir, readable=[self._dir])
            env = sandbox.command_env(env) or env
        out = Capture(head=_CAPTURE_BYTES, tail=_CAPTURE_BYTES)
        err = Capture(head=_ERROR_BYTES, tail=_ERROR_BYTES)
        with tempfile.TemporaryFile() as stdin:
            stdin.write(json.dumps(value).encode())  # ASCII: a lone surrogate cannot break it
            stdin.seek(0)
            try:
                done = await run_captured(
                    argv,
                    cwd=self._dir,
                    timeout=CALL_TIMEOUT_S,
                    out=out,
                    err=err,
                    env={**env, **self._env},
                    stdin=stdin,
                )
            except OSError as exc:
                why = exc.strerror or type(exc).__name__
                return tool_error(f"Plugin tool '{self.name}' could not start: {why}", brief="Plugin failed")
        if done.timed_out:
            return tool_error(
                f"Plugin tool '{self.name}' timed out after {CALL_TIMEOUT_S:g}s.", brief="Timeout"
            )
        output, notes = clip_output(out.text().strip(), bool(out.dropped), out.total)
        if done.returncode != 0:
            errors = cap_lines(err.text().strip())[0]
            why = errors or output or f"Exit code {done.returncode}"
            return tool_error(f"Plugin tool '{self.name}' failed: {why}", brief=f"Exit {done.returncode}")
        return tool_ok(output=output, message=" ".join(notes))


def host_values(config: Config) -> dict[str, str]:
    """`api_key` and `base_url` of the default model's provider (the login token for a provider
    that names `oauth`): what plugins may ask to have injected."""
    model = config.models.get(config.default_model)
    provider = config.providers.get(model.provider) if model else None
    if provider is None:
        return {}
    key = provider.api_key
    if not key and provider.oauth:
        from soulwire.config.credentials import access_token

        key = access_token(provider.oauth)
    values = {"base_url": provider.base_url}
    if key:
        values["api_key"] = key
    return values


def load_plugin_tools(plugins_dir: Path, host: dict[str, str]) -> list[PluginTool]:
    """The tools of every installed plugin (a broken plugin is skipped)."""
    return [
        PluginTool(tool, directory, spec.inject, host)
        for directory, spec in installed_plugins(plugins_dir)
        for tool in spec.tools
    ]
