"""Accumulating streamed text without keeping every chunk alive."""

from __future__ import annotations

_JOIN_EVERY = 512


class Chunks:
    """Collects string chunks and folds them into one string every few hundred, so a
    100k-chunk stream costs about the size of its text, not 100k small objects."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[str] = []

    def append(self, text: str) -> None:
        parts = self._parts
        parts.append(text)
        if len(parts) >= _JOIN_EVERY:
            self._parts = ["".join(parts)]

    def text(self) -> str:
        return "".join(self._parts)

    def __bool__(self) -> bool:
        return any(self._parts)
