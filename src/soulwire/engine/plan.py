"""Plan mode (spec §4.10): a read-only planning state. While it is on, the file tools may
write only the session's plan file (see `tools.base.PLAN_FILE_KEY`) and the model is
reminded of it; the user leaves it by approving the plan (ExitPlanMode), with
`set_plan_mode`, or with `/plan off`.

The plan file is `<share dir>/plans/<slug>.md`, the slug being the session id. The reference keeps plans in
`~/.kimi/plans/` whatever its share dir; soulwire keeps them with the rest of its data, so a
private share dir (tests, several installations) holds its own plans.

The state lives in the session's live state (`soul.state`: `plan_mode`, `plan_slug`,
`plan_session_id`) and is persisted with it in `state.json`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from soulwire.llm.message import Message
from soulwire.tools.base import PLAN_FILE_KEY
from soulwire.wire.messages import StatusUpdate
from soulwire.wire.types import TextPart

_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
"""A slug read from state.json names a file in the plans dir: nothing that could leave it."""
_ON_REMINDER = (
    "<system-reminder>Plan mode is on. Explore and design; do not change anything yet. The only file "
    "you may write is the plan file {path} (writing it needs no approval; every other write is "
    "refused). Read and search freely, and run only commands that change nothing. Write a concrete, "
    "step-by-step plan there, then call ExitPlanMode so that the user can review and approve it (if "
    "you do not have that tool, summarise the plan and wait for the user).</system-reminder>"
)
_OFF_REMINDER = (
    "<system-reminder>Plan mode is off: you may change files again (with the user's approval as "
    "usual).</system-reminder>"
)


class PlanMode:
    """The session's plan mode and plan file."""

    def __init__(self, state: dict[str, Any], *, plans_dir: Path, session_id: str) -> None:
        self._state = state
        self.plans_dir = plans_dir
        self.session_id = session_id
        self._announced: bool | None = None
        self._sync_file()

    @property
    def enabled(self) -> bool:
        return bool(self._state.get("plan_mode"))

    @property
    def file(self) -> Path:
        """The plan file: named after the session when first used, and kept with it."""
        slug = self._state.get("plan_slug")
        if (
            not isinstance(slug, str)
            or not _SLUG.fullmatch(slug)
            or self._state.get("plan_session_id") != self.session_id
        ):
            slug = self.session_id
            self._state["plan_slug"] = slug
            self._state["plan_session_id"] = self.session_id
        return self.plans_dir / f"{slug}.md"

    def set(self, enabled: bool) -> bool:
        """Turn plan mode on or off; True when that changed it."""
        changed = enabled != self.enabled
        self._state["plan_mode"] = enabled
        self._sync_file()
        return changed

    def _sync_file(self) -> None:
        if self.enabled:
            path = self.file
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass  # WriteFile reports the missing directory when the model tries
            self._state[PLAN_FILE_KEY] = str(path)
        else:
            self._state.pop(PLAN_FILE_KEY, None)

    def read(self) -> str:
        """The plan written so far ("" when none)."""
        try:
            return self.file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def clear(self) -> None:
        try:
            self.file.unlink(missing_ok=True)
        except OSError:
            pass

    def reminder(self, first_step: bool) -> Message | None:
        """The reminder to add to the context before a step: at the first step of a loop while
        plan mode is on, and whenever it changed since the last reminder."""
        enabled = self.enabled
        due = enabled and (first_step or self._announced is not True)
        due = due or (not enabled and self._announced is True)
        self._announced = enabled
        if not due:
            return None
        text = _ON_REMINDER.format(path=self.file) if enabled else _OFF_REMINDER
        return Message(role="user", content=text)


async def plan_command(soul: Any, args: str) -> None:
    """`/plan [on|off|view|clear]`; no argument toggles."""
    plan: PlanMode = soul.plan
    arg = args.strip().lower()
    emit = soul.bus.emit
    if arg in ("", "on", "off"):
        plan.set(not plan.enabled if not arg else arg == "on")
        if plan.enabled:
            text = (
                f"Plan mode is on: the plan goes to {plan.file}; nothing else changes until you approve it."
            )
        else:
            text = "Plan mode is off."
        emit(TextPart(text=text))
        emit(StatusUpdate(plan_mode=plan.enabled))
    elif arg == "view":
        content = plan.read()
        empty = f"No plan has been written yet (the plan file is {plan.file})."
        emit(TextPart(text=content if content.strip() else empty))
    elif arg == "clear":
        plan.clear()
        emit(TextPart(text="The plan has been cleared."))
    else:
        emit(TextPart(text="Usage: /plan [on|off|view|clear]"))
