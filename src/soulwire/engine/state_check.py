"""The strict check of a loaded `state.json` (engine/state.py): a field of the wrong type
counts as its default, so a damaged or hand-edited file never grants anything. Imported when
a session with a state file is opened; a new session has nothing to check."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Checked(BaseModel):
    # strict: no coercion ("no", 1 and [] are not booleans); extra keys (the reference's
    # bookkeeping) are kept as they are.
    # Schemas are built at the first resume (a new session has nothing to check).
    model_config = ConfigDict(strict=True, extra="allow", defer_build=True)


class _ApprovalFields(_Checked):
    yolo: bool = False
    afk: bool = False
    auto_approve_actions: list[str] = Field(default_factory=list[str])


class _StateFields(_Checked):
    """The fields the engine acts on, with their types; each one that grants something is
    off or empty by default."""

    approval: _ApprovalFields = Field(default_factory=_ApprovalFields)
    additional_dirs: list[str] = Field(default_factory=list[str])
    custom_title: str | None = None
    plan_mode: bool = False
    plan_session_id: str | None = None
    plan_slug: str | None = None
    todos: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])


def _field_of(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    """The field an error is about: `approval.yolo` rather than a list index inside it."""
    head, *rest = loc
    if head == "approval" and rest and rest[0] in _ApprovalFields.model_fields:
        return ("approval", str(rest[0]))
    return (str(head),)


def validated_state(loaded: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`loaded` with every mistyped field set to its default, and the names of those fields."""
    raw = copy.deepcopy(loaded)
    try:
        return _StateFields.model_validate(raw).model_dump(), []
    except ValidationError as exc:
        bad = sorted({_field_of(error["loc"]) for error in exc.errors() if error["loc"]})
    for path in bad:
        holder = raw
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            holder.pop(path[-1], None)
    return _StateFields.model_validate(raw).model_dump(), [".".join(path) for path in bad]


__all__ = ["validated_state"]
