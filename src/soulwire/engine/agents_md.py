"""`/init`: an agent studies the project and writes `AGENTS.md` (spec §10).

The agent runs on a scratch context inside the current turn. Its steps stream like any
others, but no nested TurnBegin/TurnEnd is emitted (the Go SDK cannot follow nested turns).
Its final answer is the file's content: if the agent did not write the file with a tool,
the engine writes that answer. The main context then gets a note with the new file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from soulwire.engine.context import Context
from soulwire.llm.message import Message
from soulwire.sessions.memory import MemorySessionStore
from soulwire.wire.types import TextPart

AGENTS_FILE = "AGENTS.md"

INIT_PROMPT = """\
Study this project and write an AGENTS.md file for coding agents that will work on it.

Explore first: the layout of the repository, the build and packaging files, how to install \
dependencies, build, run the tests and the linters, the conventions the code follows (style, \
naming, error handling, layering), and anything surprising a newcomer must know.

Then write AGENTS.md in the working directory: concise Markdown with sections such as \
Overview, Layout, Setup, Build and test, Conventions, Pitfalls. State facts you verified, \
not guesses; prefer exact commands and paths.

End with a final message that contains the complete content of AGENTS.md and nothing else \
(if you could not write the file, it is saved from that message)."""


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _final_text(history: list[Message]) -> str:
    for message in reversed(history):
        if message.role == "assistant" and message.text().strip():
            return message.text()
    return ""


def strip_fence(text: str) -> str:
    """The Markdown inside one surrounding code fence, if the answer is wrapped in one."""
    lines = text.strip().splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        lines = lines[1:-1]
    return "\n".join(lines).strip() + "\n"


def _write_atomic(path: Path, content: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, path)


async def write_agents_md(soul: Any) -> Any:
    """Run the /init agent and leave AGENTS.md in the work dir; reports what happened. Returns
    the agent's outcome when a budget limit stopped it (nothing is written then), else None."""
    path: Path = soul.work_dir / AGENTS_FILE
    before = _signature(path)
    scratch = Context(MemorySessionStore(), soul.context.system_prompt)
    scratch.checkpoint()
    scratch.append(Message(role="user", content=INIT_PROMPT))
    outcome = await soul.run_loop_on(scratch)
    if outcome.status == "budget_exceeded":
        return outcome
    if _signature(path) == before:
        answer = _final_text(scratch.history)
        if not answer.strip():
            soul.bus.emit(TextPart(text=f"{AGENTS_FILE} was not written: the agent gave no content."))
            return None
        _write_atomic(path, strip_fence(answer))
    content = path.read_text(encoding="utf-8", errors="replace")
    soul.context.checkpoint()
    soul.context.append(
        Message(
            role="user",
            content=(
                f"<system>The user ran /init: {path} was (re)generated. Its content:</system>\n\n{content}"
            ),
        )
    )
    lines = len(content.splitlines())
    soul.bus.emit(TextPart(text=f"Wrote {path} ({lines} lines)."))
    return None
