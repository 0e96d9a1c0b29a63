"""Typed access to decoded JSON values."""

from __future__ import annotations

from typing import Any, cast


def as_object(value: Any) -> dict[str, Any] | None:
    """`value` as a JSON object, or None when it is anything else."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None
