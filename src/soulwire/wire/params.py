"""The params of `prompt`, the one method every session needs at once: in a module of their
own so that a starting engine builds this model and not the other methods' (wire/methods.py,
imported at their first use)."""

from __future__ import annotations

from soulwire.wire.types import UserInput, WireModel


class PromptParams(WireModel):
    user_input: UserInput


__all__ = ["PromptParams"]
