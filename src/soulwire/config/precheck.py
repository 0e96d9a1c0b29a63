"""A fast check of the raw configuration, before the engine answers anybody.

The typed schema (config/model.py) needs pydantic, ~100 ms to import: too slow for the lean
start-up path, which answers `initialize` while the engine loads. So the mistakes a person
makes — a `default_model` or `provider` that names nothing, `max_steps_per_turn = 0`, a value
of the wrong type, a scripts file that is missing or not JSON — are caught here with the stdlib,
and the CLI refuses to start (one line, exit 2) before a single reply. The bounds live here
and model.py uses them, so the two checks cannot drift apart; whatever still slips through is
reported by the full validation later (each request then gets the error).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from soulwire.config.loader import ConfigError
from soulwire.config.scripts_file import ScriptsFileError, check_scripts_file, scripts_path
from soulwire.wire.hook_events import HOOK_EVENTS

LOOP_CONTROL_MINIMUMS = {
    "max_steps_per_turn": 1,
    "max_retries_per_step": 1,
    "max_ralph_iterations": -1,
    "reserved_context_size": 1000,
}
COMPACTION_RATIO_RANGE = (0.5, 0.99)
BACKGROUND_MINIMUMS = {
    "max_running_tasks": 1,
    "read_max_bytes": 1,
    "notification_tail_lines": 0,
    "notification_tail_chars": 0,
    "kill_grace_period_ms": 0,
    "print_wait_ceiling_s": 1,
    "agent_task_timeout_s": 60,
}
HOOK_TIMEOUT_RANGE = (1, 600)
SCRIPTED_PROVIDER = "_scripted_echo"

Check = Callable[[Any], str | None]
"""Returns what is wrong with a value, or None."""


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, not {value!r}"


def _string(value: Any) -> str | None:
    return None if isinstance(value, str) else f"must be a string, not {value!r}"


def _optional_string(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else f"must be a string, not {value!r}"


def _integer(minimum: int, maximum: int | None = None) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, not {value!r}"
        if value < minimum or (maximum is not None and value > maximum):
            bounds = f"at least {minimum}" if maximum is None else f"between {minimum} and {maximum}"
            return f"must be {bounds}, not {value}"
        return None

    return check


def _number(minimum: float, maximum: float) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a number, not {value!r}"
        return (
            None if minimum <= value <= maximum else f"must be between {minimum} and {maximum}, not {value}"
        )

    return check


def _table(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"must be a table, not {value!r}"


def _strings(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return f"must be a list of strings, not {value!r}"


def _string_table(value: Any) -> str | None:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return None
    return f"must be a table of strings, not {value!r}"


def _capabilities(value: Any) -> str | None:
    return None if isinstance(value, dict) else _strings(value)


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}, not {value!r}"

    return check


def _non_empty_string(value: Any) -> str | None:
    return None if isinstance(value, str) and value else f"must be a non-empty string, not {value!r}"


def _hook_event(value: Any) -> str | None:
    if value in HOOK_EVENTS:
        return None
    return f"unknown hook event {value!r}; one of: {', '.join(HOOK_EVENTS)}"


_TOP: dict[str, Check] = {
    "default_model": _string,
    "default_thinking": _boolean,
    "default_yolo": _boolean,
    "default_plan_mode": _boolean,
    "skip_afk_prompt_injection": _boolean,
    "default_editor": _string,
    "show_thinking_stream": _boolean,
    "theme": _one_of("dark", "light"),
    "telemetry": _boolean,
    "extra_skill_dirs": _strings,
    "providers": _table,
    "models": _table,
    "loop_control": _table,
    "background": _table,
    "mcp": _table,
    "services": _table,
    "approval_scope": _one_of("exact", "action"),
}
_PROVIDER: dict[str, Check] = {
    "type": _string,
    "base_url": _string,
    "api_key": _string,
    "env": _string_table,
    "custom_headers": _string_table,
    "reasoning_key": _optional_string,
}
_MODEL: dict[str, Check] = {
    "provider": _string,
    "model": _string,
    "max_context_size": _integer(1),
    "capabilities": _capabilities,
    "display_name": _optional_string,
}
_LOOP_CONTROL: dict[str, Check] = {
    **{name: _integer(minimum) for name, minimum in LOOP_CONTROL_MINIMUMS.items()},
    "max_steps_per_run": _integer(LOOP_CONTROL_MINIMUMS["max_steps_per_turn"]),  # the reference's old name
    "compaction_trigger_ratio": _number(*COMPACTION_RATIO_RANGE),
}
_BACKGROUND: dict[str, Check] = {
    **{name: _integer(minimum) for name, minimum in BACKGROUND_MINIMUMS.items()},
    "keep_alive_on_exit": _boolean,
}
_HOOK: dict[str, Check] = {
    "event": _hook_event,
    "command": _non_empty_string,
    "matcher": _string,
    "timeout": _integer(*HOOK_TIMEOUT_RANGE),
}


class _Checker:
    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.origin}: {key}: {problem}")

    def fields(
        self, table: dict[str, Any], checks: dict[str, Check], prefix: str, required: tuple[str, ...] = ()
    ) -> None:
        for name in required:
            if name not in table:
                raise self.fail(f"{prefix}{name}", "is required")
        for name, check in checks.items():
            if name in table:
                problem = check(table[name])
                if problem is not None:
                    raise self.fail(f"{prefix}{name}", problem)

    def tables(self, parent: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
        found: dict[str, Any] = parent.get(key, {})
        for name, value in found.items():
            if not isinstance(value, dict):
                raise self.fail(f"{key}.{name}", f"must be a table, not {value!r}")
        return found


def check_raw_config(
    raw: dict[str, Any], *, origin: str, model_alias: str | None = None, env: Mapping[str, str] | None = None
) -> None:
    """Raise ConfigError (one line: where, which key, what is wrong) for a configuration the
    engine cannot run with. `model_alias` is `--model`; `env` the process environment."""
    checker = _Checker(origin)
    checker.fields(raw, _TOP, "")
    providers = checker.tables(raw, "providers")
    models = checker.tables(raw, "models")
    for name, provider in providers.items():
        checker.fields(provider, _PROVIDER, f"providers.{name}.", required=("type",))
    for name, model in models.items():
        checker.fields(model, _MODEL, f"models.{name}.", required=("provider", "model"))
        if model["provider"] not in providers:
            raise checker.fail(
                f"models.{name}.provider", f"{model['provider']!r} is not a key of [providers]"
            )
    default = raw.get("default_model") or ""
    if default and default not in models:
        raise checker.fail("default_model", f"{default!r} is not a key of [models]")
    checker.fields(raw.get("loop_control", {}), _LOOP_CONTROL, "loop_control.")
    checker.fields(raw.get("background", {}), _BACKGROUND, "background.")
    hooks = raw.get("hooks", [])
    if not isinstance(hooks, list):
        raise checker.fail("hooks", f"must be a list of tables, not {hooks!r}")
    for index, hook in enumerate(hooks):
        if not isinstance(hook, dict):
            raise checker.fail(f"hooks[{index}]", f"must be a table, not {hook!r}")
        checker.fields(hook, _HOOK, f"hooks[{index}].", required=("event", "command"))
    alias = model_alias or default
    if alias in models:
        provider_name = models[alias]["provider"]
        provider = providers[provider_name]
        if provider["type"] == SCRIPTED_PROVIDER:
            scripts_env = {**(os.environ if env is None else env), **provider.get("env", {})}
            try:
                check_scripts_file(scripts_path(scripts_env))
            except ScriptsFileError as exc:
                raise checker.fail(f"providers.{provider_name}", str(exc)) from None
