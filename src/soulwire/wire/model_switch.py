"""The session's model and thinking, switched live (a negotiated extension: a client that
declares `capabilities.supports_model_switch` in `initialize` may call `set_model` and gets a
`ModelChanged` event whenever the model or thinking changes, whoever changed it; others see
today's protocol). Every face that offers a model picker reads and sets it this way: ACP's
`model` and `thinking` config options, the SDK's `Session.set_model`, the web UI."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from soulwire.wire.types import WireModel

CAPABILITY = "supports_model_switch"


class SessionModel(WireModel):
    """What the session runs on now (`set_model`'s result; `ModelChanged`'s payload)."""

    model: str | None = Field(description="the model alias (null: no model is configured)")
    model_name: str | None = Field(default=None, description="the provider's name of that model")
    thinking: bool = Field(default=False, description="thinking is on")
    can_think: bool = Field(default=False, description="the model can think (thinking may be on)")
    always_thinking: bool = Field(default=False, description="the model always thinks (it cannot be off)")
    models: list[str] = Field(default_factory=list[str], description="the aliases `set_model` accepts")


class ModelChanged(SessionModel):
    """Event: the session's model or thinking changed (`set_model` from any client, an ACP
    editor's option, the web UI), sent to every attached client that negotiated it."""


class SetModelParams(WireModel):
    """`set_model`: switch the model and/or thinking between turns (only what is given changes;
    neither: answers the current state). Refused with -32000 while a turn runs, -32602 for a
    model not in `models` or thinking on a model that cannot think."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key must not pass as "no change"

    model: str | None = Field(default=None, min_length=1, description="a model alias of `models`")
    thinking: bool | None = None


__all__ = ["CAPABILITY", "ModelChanged", "SessionModel", "SetModelParams"]
