"""Session config options (the pickers an editor renders) built from the session's state, for
the local agent and the one in front of `serve` alike: the mode, and the model and thinking
as the engine reports them (`SessionModel`, wire/model_switch.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp import RequestError
from acp.schema import SessionConfigOptionSelect, SessionConfigSelectOption, SessionMode

from soulwire.wire.model_switch import SessionModel

MODEL_OPTIONS = ("model", "thinking")
"""The config options that are the engine's `set_model`."""
_SANDBOX_NAMES = {"off": "Off", "read-only": "Read-only", "workspace-write": "Workspace write"}


def mode_option(current: str, modes: Sequence[SessionMode]) -> SessionConfigOptionSelect:
    """The mode as a config option (the picker editors render; v2 keeps only this form)."""
    return SessionConfigOptionSelect(
        type="select",
        id="mode",
        name="Mode",
        category="mode",
        current_value=current,
        options=[
            SessionConfigSelectOption(value=m.id, name=m.name, description=m.description) for m in modes
        ],
    )


def model_options(info: SessionModel) -> tuple[SessionConfigOptionSelect, SessionConfigOptionSelect]:
    """The `model` and `thinking` options; thinking offers only what the model can do."""
    choices = [SessionConfigSelectOption(value=alias, name=alias) for alias in info.models]
    model = SessionConfigOptionSelect(
        type="select",
        id="model",
        name="Model",
        category="model",
        current_value=info.model or "",
        options=choices or [SessionConfigSelectOption(value="", name="(no model configured)")],
    )
    values = ["on"] if info.always_thinking else ["off", "on"] if info.can_think else ["off"]
    thinking = SessionConfigOptionSelect(
        type="select",
        id="thinking",
        name="Thinking",
        category="thought_level",
        current_value="on" if info.thinking else "off",
        options=[SessionConfigSelectOption(value=v, name=v.title()) for v in values],
    )
    return model, thinking


def sandbox_option(current: str) -> SessionConfigOptionSelect:
    """The sandbox mode (bubblewrap): choosing another reopens the session with it."""
    return SessionConfigOptionSelect(
        type="select",
        id="sandbox",
        name="Sandbox",
        description="Where commands may write (bubblewrap); changing it reopens the session",
        current_value=current,
        options=[SessionConfigSelectOption(value=m, name=name) for m, name in _SANDBOX_NAMES.items()],
    )


def sandbox_change(value: str | bool) -> str:
    """The sandbox mode an option's new value names (-32602 for anything else)."""
    if not isinstance(value, str) or value not in _SANDBOX_NAMES:
        raise RequestError(-32602, f"Unknown sandbox mode {value!r} (modes: {', '.join(_SANDBOX_NAMES)})")
    return value


def model_change(config_id: str, value: str | bool) -> dict[str, Any]:
    """The `set_model` arguments an option's new value stands for (-32602 for anything else)."""
    if config_id == "model" and isinstance(value, str) and value:
        return {"model": value}
    if config_id == "thinking" and (value in ("on", "off") or isinstance(value, bool)):
        return {"thinking": value is True or value == "on"}
    raise RequestError(-32602, f"Unknown config option {config_id!r} or value {value!r}")


__all__ = [
    "MODEL_OPTIONS",
    "mode_option",
    "model_change",
    "model_options",
    "sandbox_change",
    "sandbox_option",
]
