"""Session state that outlives the process (`state.json`, spec §7.4): approval settings,
title, plan mode, todos, extra workspace dirs.

The live values stay where they are used (the approvals broker, `soul.state`); the keeper
restores them on resume and writes a snapshot whenever one of them changed, checked after
every tool result, step and turn, so a killed process loses nothing that was completed (a
change made during a turn is written by a background thread, started at once: a process
killed within that write's few milliseconds keeps the state before it; a turn's end waits).

What is read back is validated strictly: a damaged or hand-edited file must never grant
anything (`"yolo": "no"` is not true). A field of the wrong type counts as its default — off,
empty, none — and one warning line on stderr names the file and the fields."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from soulwire.engine.approvals import ApprovalBroker
from soulwire.engine.slash import parse_slash
from soulwire.sessions.jsonl import warn_stderr
from soulwire.sessions.paths import STATE_FILE
from soulwire.sessions.store import SessionStore
from soulwire.wire.messages import StatusUpdate, ToolResult, TurnBegin, TurnEnd
from soulwire.wire.types import WireModel, user_input_text

STATE_VERSION = 1
TITLE_LENGTH = 50
_SAVE_AFTER = (ToolResult, StatusUpdate, TurnEnd)
_PLAN_KEYS = ("plan_slug", "plan_session_id")
"""Which plan file belongs to the session (engine/plan.py)."""
PENDING_APPROVALS_KEY = "pending_approvals"
"""The approval requests waiting for the client's answer, while any do: `{id, tool_call_id}`
each (`agent_id` too for a sub-agent's; older sessions kept the ids alone). A process killed
meanwhile leaves them for the next one to ask again or answer: engine/recovery.py."""


def default_state() -> dict[str, Any]:
    """Every key the reference writes, with its default (key order as written)."""
    return {
        "version": STATE_VERSION,
        "approval": {"yolo": False, "afk": False, "auto_approve_actions": []},
        "additional_dirs": [],
        "custom_title": None,
        "title_generated": False,
        "title_generate_attempts": 0,
        "plan_mode": False,
        "plan_session_id": None,
        "plan_slug": None,
        "wire_mtime": None,
        "archived": False,
        "archived_at": None,
        "auto_archive_exempt": False,
        "todos": [],
    }


CHECKED_FIELDS = (
    "approval", "additional_dirs", "custom_title", "plan_mode", "plan_session_id", "plan_slug", "todos",
)  # fmt: skip
"""The fields the engine acts on (engine/state_check.py types them)."""


def checked_state(loaded: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`loaded` with every mistyped field set to its default, and the names of those fields."""
    if not loaded:  # a new session: nothing to check (and no schema to build at start-up)
        defaults = default_state()
        return {name: defaults[name] for name in CHECKED_FIELDS}, []
    from soulwire.engine.state_check import validated_state

    return validated_state(loaded)


def title_from(user_input: Any) -> str | None:
    """The automatic title: the text of the first prompt that is not a slash command."""
    if parse_slash(user_input) is not None:
        return None
    text = " ".join(user_input_text(user_input).split())
    return text[:TITLE_LENGTH] or None


def _plain(value: Any) -> Any:
    """JSON-ready form of what tools keep in soul.state (pydantic models or plain data)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


class StateKeeper:
    """Loads, applies and saves one session's state.

    `live` is `soul.state`, the dict tools and slash commands share: `todos` (SetTodoList),
    `yolo`/`afk` (the persisted toggles of /yolo and /afk — a `--yolo` flag alone is not
    persisted, as in the reference), `plan_mode`, `plan_slug` and `plan_session_id`."""

    def __init__(
        self,
        store: SessionStore,
        broker: ApprovalBroker,
        live: dict[str, Any],
        *,
        plan_mode: Callable[[], bool] | None = None,
        add_dirs: Sequence[str] = (),
    ) -> None:
        self._store = store
        self._broker = broker
        self._live = live
        self._plan_mode = plan_mode
        loaded = store.load_state()
        checked, bad = checked_state(loaded)
        if bad:
            directory = getattr(store, "dir", None)
            where = f"{STATE_FILE} of {store.session_id}"
            if isinstance(directory, Path):
                where = directory / STATE_FILE
            warn_stderr(f"warning: {where}: ignoring {', '.join(bad)} (wrong type); treated as off/empty")
        self.state = default_state()
        self.state.update(checked)
        self.state["approval"] = {**default_state()["approval"], **checked["approval"]}
        dirs: list[str] = self.state["additional_dirs"]
        self.state["additional_dirs"] = dirs + [d for d in add_dirs if d not in dirs]
        self._saved: dict[str, Any] | None = copy.deepcopy(loaded) if loaded else None
        self._in_turn = False
        self.extras: dict[str, Callable[[bool], Any]] = {}
        """More keys of state.json, each read from its owner at every snapshot (JSON values;
        the argument asks for figures as of now, not as last kept)."""
        broker.on_pending = self._pending_changed

    @property
    def approval(self) -> dict[str, Any]:
        return self.state["approval"]

    @property
    def title(self) -> str | None:
        title = self.state.get("custom_title")
        return title if isinstance(title, str) and title else None

    def restore(self) -> None:
        """Put the persisted values where the live session reads them."""
        approval = self.approval
        self._live["yolo"] = bool(approval.get("yolo"))
        self._live["afk"] = bool(approval.get("afk"))
        self._live["plan_mode"] = bool(self.state.get("plan_mode"))
        for key in _PLAN_KEYS:
            if isinstance(self.state.get(key), str):
                self._live[key] = self.state[key]
        todos = self.state.get("todos")
        if isinstance(todos, list) and todos:
            self._live.setdefault("todos", copy.deepcopy(todos))
        if self._live["yolo"]:
            self._broker.yolo = True
        if self._live["afk"]:
            self._broker.afk = True
        rules = approval.get("auto_approve_actions")
        if isinstance(rules, list):
            self._broker.rules.update(r for r in rules if isinstance(r, str))

    def snapshot(self, *, fresh: bool = False) -> dict[str, Any]:
        """The state as it should be on disk now (`fresh`: the extras' figures as of now)."""
        state = copy.deepcopy(self.state)
        approval = state["approval"]
        approval["yolo"] = bool(self._live.get("yolo", approval.get("yolo")))
        approval["afk"] = bool(self._live.get("afk", approval.get("afk")))
        approval["auto_approve_actions"] = sorted(self._broker.rules)
        if "todos" in self._live:
            state["todos"] = _plain(self._live["todos"])
        if self._plan_mode is not None:
            state["plan_mode"] = bool(self._plan_mode())
        elif "plan_mode" in self._live:
            state["plan_mode"] = bool(self._live["plan_mode"])
        for key in _PLAN_KEYS:
            if key in self._live:
                state[key] = self._live[key]
        for key, read in self.extras.items():
            state[key] = read(fresh)
        pending = self._broker.pending_entries
        if pending:
            state[PENDING_APPROVALS_KEY] = pending
        else:
            state.pop(PENDING_APPROVALS_KEY, None)
        return state

    def save_if_changed(self, *, wait: bool = True, fresh: bool = False) -> bool:
        """Write state.json when the snapshot differs from what was last written (`wait=False`:
        the write may finish in the background, see `SessionStore.save_state`; `fresh`: see
        `snapshot`)."""
        snapshot = self.snapshot(fresh=fresh)
        if snapshot == self._saved:
            return False
        self._store.save_state(snapshot, wait=wait)
        self._saved = snapshot
        self.state = copy.deepcopy(snapshot)
        return True

    def _pending_changed(self) -> None:
        # A request about to be asked is on disk before the client can see it (a process
        # killed then must leave it for the next one to answer, with what the turn had spent
        # so far: the turn continued there goes on from it); one answered need not wait.
        self.save_if_changed(wait=bool(self._broker.pending_ids), fresh=True)

    def set_title(self, title: str) -> None:
        self.state["custom_title"] = title

    def on_event(self, message: WireModel) -> None:
        """A (merged) bus sink: titles the session at its first prompt, saves after changes."""
        kind = type(message)
        if kind is TurnBegin:
            self._in_turn = True
            if self.title is None:
                title = title_from(message.user_input)  # type: ignore[attr-defined]
                if title:
                    self.set_title(title)
            if self.state.get("archived") is True:  # a session in use again is not archived
                self.state.update(archived=False, archived_at=None, auto_archive_exempt=True)
                self.save_if_changed(wait=False)  # mid-turn: the turn's end waits for it
        elif kind is TurnEnd:
            self._in_turn = False
            self.save_if_changed()
            self._store.wait_for_state()
        elif kind in _SAVE_AFTER:
            # Mid-turn (this runs on the event loop) the disk is not waited for: the write is
            # queued at once and the turn's end waits for it. Outside a turn (a request such
            # as set_plan_mode) it is on disk before the answer goes out, as it always was.
            self.save_if_changed(wait=not self._in_turn)
