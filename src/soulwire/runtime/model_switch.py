"""A live session's model and thinking: what it runs on, and the switch between turns. One
definition for every face (Wire `set_model`, ACP's `model` and `thinking` options locally and
through `serve`, the SDK); each switch is announced on the bus as `ModelChanged`, so every
attached client learns it whoever made it, and kept in `state.json` (`model`, `thinking`), so
a server that opens the session again keeps it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulwire.errors import SoulwireError
from soulwire.wire.model_switch import ModelChanged, SessionModel

if TYPE_CHECKING:
    from soulwire.runtime.builder import Runtime

MODEL_KEY = "model"
"""state.json: the alias the session runs on (read by `serve` when it opens the session)."""
THINKING_KEY = "thinking"
"""state.json: thinking on or off, as last switched."""


class ModelSwitchError(SoulwireError, ValueError):
    """The switch asked for cannot be made (an unknown model, thinking the model lacks)."""


def model_choices(runtime: Runtime) -> list[str]:
    """The aliases a switch accepts: the configured ones, and the current one."""
    aliases = list(runtime.config.models)
    model = runtime.soul.model
    if model is not None and model.alias not in aliases:
        aliases.append(model.alias)
    return aliases


def model_info(runtime: Runtime) -> SessionModel:
    """What the session runs on now."""
    model = runtime.soul.model
    if model is None:
        return SessionModel(model=None, models=model_choices(runtime))
    caps = model.capabilities
    return SessionModel(
        model=model.alias,
        model_name=model.model_name,
        thinking=model.thinking,
        can_think="thinking" in caps or "always_thinking" in caps,
        always_thinking="always_thinking" in caps,
        models=model_choices(runtime),
    )


def switch_model(runtime: Runtime, model: str | None = None, thinking: bool | None = None) -> SessionModel:
    """Switch to `model` and/or `thinking` (None: keep it); the caller makes sure no turn runs.
    Announces `ModelChanged` and records the choice when anything changed."""
    from soulwire.llm.errors import LLMNotSet
    from soulwire.llm.registry import resolve_model

    current = runtime.soul.model
    before = model_info(runtime)
    if model is None and thinking is None:
        return before
    alias = model if model is not None else (current.alias if current is not None else None)
    if alias is None:
        raise ModelSwitchError("no model is configured: name one of the configuration's [models]")
    if alias not in before.models:
        known = ", ".join(before.models) or "none"
        raise ModelSwitchError(f"unknown model {alias!r} (models: {known})")
    wants = thinking if thinking is not None else (current.thinking if current is not None else None)
    try:
        resolved = resolve_model(
            runtime.config,
            model_alias=alias if alias in runtime.config.models else runtime.options.model,
            thinking=wants,
        )
    except LLMNotSet as exc:
        raise ModelSwitchError(str(exc)) from None
    if resolved is None:
        raise ModelSwitchError(f"the model {alias!r} cannot be used here")
    if thinking is True and not resolved.thinking:
        raise ModelSwitchError(f"the model {alias!r} cannot think")
    if thinking is False and resolved.thinking:
        raise ModelSwitchError(f"the model {alias!r} always thinks")
    if runtime.models is not None:  # (the model it replaces is closed with the session)
        runtime.models.hold(resolved)
    runtime.soul.model = resolved
    after = model_info(runtime)
    if after != before:
        runtime.state.state[MODEL_KEY] = resolved.alias
        runtime.state.state[THINKING_KEY] = resolved.thinking
        runtime.save_state()
        runtime.bus.emit(ModelChanged(**after.model_dump()))
        runtime.bus.flush()
    return after


__all__ = ["MODEL_KEY", "THINKING_KEY", "ModelSwitchError", "model_choices", "model_info", "switch_model"]
