"""What `initialize` reports about the engine, kept free of heavy imports: the start-up path
answers `initialize` before the engine is loaded, from these lists.

* The built-in slash commands (name, description, aliases), in the order they are reported.
  `slash.py` binds a handler to every entry (a test keeps them in step).
* The `hooks` entry of the result (supported events, hooks per event)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from soulwire.wire.hook_events import AMENDABLE_EVENTS, HOOK_EVENTS

BUILTIN_SLASH_COMMANDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("init", "Analyse the project and write an AGENTS.md file for agents", ()),
    ("compact", "Summarise the context to free space; optional text says what to focus on", ()),
    ("clear", "Clear the context", ("reset",)),
    ("yolo", "Toggle auto-approval of tool actions", ()),
    ("plan", "Toggle plan mode. Usage: /plan [on|off|view|clear]", ()),
    ("budget", "Spent and left of the budget. Usage: /budget [scope] usd|tokens|time|tool_calls N|off", ()),
    ("model", "List the models, or switch. Usage: /model [NAME] [thinking|no-thinking]", ()),
)


def describe_builtin() -> list[dict[str, object]]:
    return [{"name": n, "description": d, "aliases": list(a)} for n, d, a in BUILTIN_SLASH_COMMANDS]


def describe_hooks(events: Iterable[str]) -> dict[str, Any]:
    """The `hooks` entry of the `initialize` result: the supported events and how many hooks
    (configured and subscribed by the client) each event has. Unknown events are not counted."""
    configured: dict[str, int] = {}
    for event in events:
        if event in HOOK_EVENTS:
            configured[event] = configured.get(event, 0) + 1
    # `updated_input` is a Soulwire extension; other clients ignore the extra key.
    return {
        "supported_events": list(HOOK_EVENTS),
        "configured": configured,
        "updated_input": list(AMENDABLE_EVENTS),
    }


def configured_hook_events(raw_hooks: Any) -> list[str]:
    """The events of the `[[hooks]]` entries of a raw (unvalidated) configuration."""
    if not isinstance(raw_hooks, list):
        return []
    return [h["event"] for h in raw_hooks if isinstance(h, dict) and isinstance(h.get("event"), str)]
