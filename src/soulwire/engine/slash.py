"""Soul-level slash commands (spec §10): parsed from a prompt's text, run inside the turn,
and listed in `initialize.slash_commands`."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from soulwire.engine.agents_md import write_agents_md
from soulwire.engine.catalog import BUILTIN_SLASH_COMMANDS
from soulwire.engine.compaction import compact, split_history
from soulwire.engine.plan import plan_command
from soulwire.engine.skills import FLOW_PREFIX, SKILL_PREFIX, Skill, SkillCatalog
from soulwire.llm.errors import LLMNotSet
from soulwire.wire.messages import StatusUpdate
from soulwire.wire.types import TextPart, UserInput, user_input_text

_COMMAND = re.compile(r"^/([A-Za-z0-9_-]+(?::[A-Za-z0-9_-]+)*)(?:\s+(.*))?$", re.DOTALL)


class SlashInvocation(NamedTuple):
    name: str
    args: str


def parse_slash(user_input: UserInput) -> SlashInvocation | None:
    """`/name args` when the input's text is a slash command, else None."""
    text = user_input_text(user_input).strip()
    match = _COMMAND.match(text)
    if match is None:
        return None
    return SlashInvocation(match.group(1), (match.group(2) or "").strip())


Handler = Callable[[Any, str], Awaitable[Any]]
"""(soul, args) → None, or the outcome of the agent turn it ran; the soul is passed untyped
to keep this module below it."""


@dataclass
class SlashCommand:
    name: str
    description: str
    handler: Handler
    aliases: list[str] = field(default_factory=list)


class SlashCommands:
    """The commands a session offers, in the order they are reported."""

    def __init__(self) -> None:
        self._commands: list[SlashCommand] = []

    def add(self, command: SlashCommand) -> None:
        self._commands = [c for c in self._commands if c.name != command.name]
        self._commands.append(command)

    def find(self, name: str) -> SlashCommand | None:
        return next((c for c in self._commands if name == c.name or name in c.aliases), None)

    def describe(self) -> list[dict[str, Any]]:
        return [
            {"name": c.name, "description": c.description, "aliases": list(c.aliases)} for c in self._commands
        ]

    async def run(self, soul: Any, invocation: SlashInvocation) -> Any:
        """Run the command; returns what its handler returns (a turn outcome for the
        commands that run the agent, else None)."""
        command = self.find(invocation.name)
        if command is None:
            soul.bus.emit(TextPart(text=f'Unknown slash command "/{invocation.name}".'))
            return None
        return await command.handler(soul, invocation.args)


def context_status(soul: Any) -> StatusUpdate:
    """The StatusUpdate that follows a context rewrite (/clear, /compact): context fields only."""
    size = soul.max_context_size
    tokens = soul.context.token_count
    return StatusUpdate(
        context_usage=(tokens / size) if size else None,
        context_tokens=tokens,
        max_context_tokens=size,
    )


async def _compact(soul: Any, args: str) -> Any:
    context = soul.context
    if context.is_empty:
        soul.bus.emit(TextPart(text="The context is empty."))
        return
    if soul.model is None and split_history(context.history)[0]:
        raise LLMNotSet(soul.model_error or "LLM is not set")
    attempts = soul.loop_control.max_retries_per_step
    trigger = "manual-with-prompt" if args else "manual"
    from soulwire.engine.budget import BudgetStop

    try:
        await compact(
            context,
            soul.model,
            soul.bus,
            max_attempts=attempts,
            focus=args or None,
            hooks=soul.hooks,
            trigger=trigger,
            meter=soul.meter,
        )
    except BudgetStop:  # the summary's call is not made: the context stays as it was
        from soulwire.engine.soul import TurnOutcome

        return TurnOutcome("budget_exceeded")
    soul.bus.emit(TextPart(text="The context has been compacted."))
    soul.bus.emit(context_status(soul))


async def _init(soul: Any, args: str) -> Any:
    return await write_agents_md(soul)


async def _clear(soul: Any, args: str) -> None:
    soul.context.clear()
    soul.bus.emit(TextPart(text="The context has been cleared."))
    soul.bus.emit(context_status(soul))


async def _yolo(soul: Any, args: str) -> None:
    approver = soul.approver
    approver.yolo = not approver.yolo
    soul.state["yolo"] = approver.yolo
    if approver.yolo:
        text = "Auto-approve is on: tool actions run without asking."
    else:
        text = "Auto-approve is off: tool actions ask for approval."
    soul.bus.emit(TextPart(text=text))


async def _budget(soul: Any, args: str) -> None:
    from soulwire.engine.budget_command import budget_command

    await budget_command(soul, args)


async def _model(soul: Any, args: str) -> None:
    """`/model`: the models and the current one; `/model NAME`, `/model thinking`,
    `/model NAME no-thinking` switch (every client that negotiated it gets `ModelChanged`)."""
    switch = soul.switch_model
    if switch is None:
        soul.bus.emit(TextPart(text="The model cannot be switched in this session."))
        return
    words = args.split()
    thinking = {"thinking": True, "no-thinking": False}
    name = next((w for w in words if w not in thinking), None)
    wants = next((thinking[w] for w in words if w in thinking), None)
    if len(words) > (name is not None) + (wants is not None):
        soul.bus.emit(TextPart(text="Usage: /model [NAME] [thinking|no-thinking]"))
        return
    try:
        info = switch(name, wants)
    except ValueError as exc:  # the switch's refusal (runtime/model_switch.py)
        soul.bus.emit(TextPart(text=f"Cannot switch: {exc}"))
        return
    text = f"Model: {info.model or 'none'} (thinking {'on' if info.thinking else 'off'})."
    if not words:
        text += f" Models: {', '.join(info.models) or 'none'}; /model NAME switches."
    soul.bus.emit(TextPart(text=text))


_HANDLERS: dict[str, Handler] = {
    "init": _init,
    "compact": _compact,
    "clear": _clear,
    "yolo": _yolo,
    "plan": plan_command,
    "budget": _budget,
    "model": _model,
}


def default_commands(skills: SkillCatalog | None = None) -> SlashCommands:
    """The built-in commands, then `/skill:<name>` and `/flow:<name>` for the skills."""
    commands = SlashCommands()
    for name, description, aliases in BUILTIN_SLASH_COMMANDS:
        commands.add(SlashCommand(name, description, _HANDLERS[name], aliases=list(aliases)))
    for name, description, skill in skills.commands() if skills else []:
        runner = _flow_runner(skill) if name.startswith(FLOW_PREFIX) else _skill_runner(skill)
        commands.add(SlashCommand(name, description, runner))
    return commands


def _skill_runner(skill: Skill) -> Handler:
    async def run(soul: Any, args: str) -> Any:
        try:
            text = skill.text()
        except (OSError, UnicodeDecodeError):
            soul.bus.emit(TextPart(text=f'Failed to load skill "/{SKILL_PREFIX}{skill.name}".'))
            return None
        if args:
            text = f"{text}\n\nUser request:\n{args}"
        return await soul.inner_turn(text)

    return run


def _flow_runner(skill: Skill) -> Handler:
    async def run(soul: Any, args: str) -> Any:  # a flow takes no arguments (spec §10)
        assert skill.flow is not None
        return await soul.walk_flow(skill.flow)

    return run
