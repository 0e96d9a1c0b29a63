"""One-shot helper: start an engine, ask one thing, return the answer's text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from soulwire.sdk.session import Session
from soulwire.sdk.turn import TurnResult
from soulwire.wire.types import UserInput


async def ask_result(prompt: UserInput | Sequence[Any], **options: Any) -> TurnResult:
    """Run one prompt in a fresh session (options as for `Session`) and return its result."""
    async with Session(**options) as session:
        return await session.prompt(prompt)


async def ask(prompt: UserInput | Sequence[Any], **options: Any) -> str:
    """Run one prompt in a fresh session and return the final text of the answer.

    `await ask("summarise README.md", work_dir=".", yolo=True)`. Options are those of
    `Session`; engine errors raise (e.g. LLMNotSetError when no model is configured)."""
    return (await ask_result(prompt, **options)).final_text


__all__ = ["ask", "ask_result"]
