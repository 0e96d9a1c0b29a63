"""The light start-up check (config/precheck.py) and the typed schema (config/model.py) agree:
what the light check refuses, the schema refuses too, and a full valid configuration passes
both — so the early refusal never rejects a configuration the engine would have run with."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from soulwire.config.loader import ConfigError
from soulwire.config.model import validate_config
from soulwire.config.precheck import check_raw_config

VALID: dict[str, Any] = {
    "default_model": "m",
    "default_thinking": True,
    "default_yolo": False,
    "default_plan_mode": False,
    "telemetry": False,
    "approval_scope": "action",
    "extra_skill_dirs": ["/skills"],
    "providers": {"p": {"type": "kimi", "base_url": "https://x", "api_key": "k", "env": {"A": "b"}}},
    "models": {"m": {"provider": "p", "model": "k2", "max_context_size": 1000, "capabilities": {"thinking": True}}},
    "loop_control": {"max_steps_per_turn": 1, "max_retries_per_step": 1, "max_ralph_iterations": -1,
                     "reserved_context_size": 1000, "compaction_trigger_ratio": 0.5},
    "background": {"max_running_tasks": 1, "notification_tail_lines": 0, "kill_grace_period_ms": 0},
    "hooks": [{"event": "PreToolUse", "command": "true", "matcher": "Shell", "timeout": 600}],
    "mcp": {}, "services": {},
}  # fmt: skip

BROKEN = [
    ("default_model", "nope"),
    ("default_model", 3),
    ("default_thinking", "yes"),
    ("default_yolo", 1),
    ("approval_scope", "all"),
    ("extra_skill_dirs", "/skills"),
    ("providers", []),
    ("providers.p", "kimi"),
    ("providers.p.type", None),
    ("providers.p.env", {"A": 1}),
    ("models", "m"),
    ("models.m.provider", "other"),
    ("models.m.model", 5),
    ("models.m.max_context_size", 0),
    ("models.m.max_context_size", "big"),
    ("models.m.capabilities", "thinking"),
    ("loop_control", 5),
    ("loop_control.max_steps_per_turn", 0),
    ("loop_control.max_steps_per_turn", -1),
    ("loop_control.max_steps_per_turn", 2.5),
    ("loop_control.max_retries_per_step", 0),
    ("loop_control.max_ralph_iterations", -2),
    ("loop_control.reserved_context_size", 999),
    ("loop_control.compaction_trigger_ratio", 1.5),
    ("background.max_running_tasks", 0),
    ("background.kill_grace_period_ms", -1),
    ("default_editor", ["vim"]),
    ("show_thinking_stream", "no"),
    ("theme", "solarized"),
    ("background.print_wait_ceiling_s", 0),
    ("background.agent_task_timeout_s", 59),
    ("background.keep_alive_on_exit", "maybe"),
    ("hooks", {"event": "Stop"}),
    ("hooks.0.event", "Nope"),
    ("hooks.0.command", ""),
    ("hooks.0.timeout", 601),
]


def with_value(path: str, value: Any) -> dict[str, Any]:
    config = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    holder: Any = config
    for key in parents:
        holder = holder[int(key)] if isinstance(holder, list) else holder[key]
    holder[last] = value
    return config


def test_a_valid_configuration_passes_both():
    check_raw_config(VALID, origin="c.toml", env={})
    validate_config(VALID)


@pytest.mark.parametrize(("path", "value"), BROKEN, ids=[f"{p}={v!r}" for p, v in BROKEN])
def test_what_the_light_check_refuses_the_schema_refuses(path, value):
    config = with_value(path, value)
    with pytest.raises(ConfigError) as light:
        check_raw_config(config, origin="c.toml", env={})
    message = str(light.value)
    assert message.startswith("c.toml: ") and "\n" not in message
    with pytest.raises(ConfigError) as full:
        validate_config(config, "c.toml")
    assert "\n" not in str(full.value)


def scripted(path: str) -> dict[str, Any]:
    return {
        "default_model": "s",
        "models": {"s": {"provider": "p", "model": "echo"}},
        "providers": {"p": {"type": "_scripted_echo", "env": {"SOULWIRE_SCRIPTED_ECHO_SCRIPTS": path}}},
    }


def test_the_scripts_file_of_the_chosen_model_is_checked(tmp_path):
    good, bad, text = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "scripts.txt"
    good.write_text('["text: hi"]')
    bad.write_text('["text: hi"')
    text.write_text("text: a\n---\ntext: b\n")
    for path in (good, text):
        check_raw_config(scripted(str(path)), origin="c", env={})
    for path, problem in ((bad, "not valid JSON"), (tmp_path / "none.json", "cannot read")):
        with pytest.raises(ConfigError, match=problem):
            check_raw_config(scripted(str(path)), origin="c", env={})
    # another model is chosen with --model: its provider's file is not the one checked
    config = scripted(str(tmp_path / "none.json"))
    config["models"]["k"] = {"provider": "kp", "model": "k2"}
    config["providers"]["kp"] = {"type": "kimi"}
    check_raw_config(config, origin="c", model_alias="k", env={})


def test_a_big_scripts_file_is_only_opened_at_start_up(tmp_path):
    big = tmp_path / "big.json"
    big.write_text('["' + "x" * (2 << 20) + '"')  # truncated, but past the parse limit
    check_raw_config(scripted(str(big)), origin="c", env={})
    big.write_text("x" * (2 << 20))
    with pytest.raises(ConfigError, match="JSON list"):
        check_raw_config(scripted(str(big)), origin="c", env={})
