"""The approvals broker: the one place where tools ask before acting (spec §5).

Decision order: auto-approve (yolo, afk, or no client at all, as in print mode) → a session
rule → ask the client with an ApprovalRequest and wait, without a time limit, for
`approve`, `approve_for_session` or `reject` (with optional feedback). Every resolution the
client can see is followed by an ApprovalResponse event — also when a request is resolved by
cancellation (`reject`) or by another request's `approve_for_session`.

Session rules (`approve_for_session`) are never broader than what the user saw:

* `approval_scope = "exact"` (default): the rule is the action plus the tool's scope key —
  the exact command line for Shell, the file (symlinks resolved) for WriteFile and
  StrReplaceFile, the path for reads and searches outside the workspace. It is stored as
  `"<action>: <key>"`, e.g. `"run command: make test"` or `"edit file: /repo/app.py"`.
* `approval_scope = "action"`: the reference's behaviour — the rule is the action string
  alone (`"run command"`), so one approved command approves every later command.

The sandbox (`--sandbox`): with `approval = "on-escape"` an action that stays inside it is
approved without asking. An action that would leave it (`crossing` names the boundary:
network, writes outside the workspace …) is never approved by yolo, afk or on-escape: a person
approves it (or a session rule they granted), and where nobody can be asked it is refused.

A bare action rule (from `action` scope, or a reference session's `auto_approve_actions`)
keeps matching every call with that action whatever the current scope: a rule means what it
meant when the user granted it. Rules live in `rules` so that they can be persisted; besides
these exact strings a rule can be a tool pattern, `Shell(git status*)` (engine/rules.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio
from pydantic import ValidationError

from soulwire.engine.bus import EventBus
from soulwire.engine.client import ClientChannel, ClientRequestError
from soulwire.ids import uuid4, uuid4_hex
from soulwire.tools.base import ActionRequest, ApprovalOutcome
from soulwire.wire.messages import ApprovalAnswer, ApprovalRequest, ApprovalResponse
from soulwire.wire.session_settings import ApprovalMode

Scope = Literal["exact", "action"]
RULE_SEPARATOR = ": "


def session_rule(action: str, scope_key: str | None, scope: Scope) -> str:
    """The rule `approve_for_session` records for a request."""
    if scope == "exact" and scope_key is not None:
        return f"{action}{RULE_SEPARATOR}{scope_key}"
    return action


@dataclass(eq=False)  # compared by identity (and cheaper to define)
class _Pending:
    """A request waiting for its answer."""

    asked: ActionRequest
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: ApprovalAnswer | None = None

    def resolve(self, answer: ApprovalAnswer) -> None:
        if self.answer is None:
            self.answer = answer
            self.done.set()


class ApprovalBroker:
    """Decides, or asks the client, whether a tool action may run."""

    def __init__(
        self,
        bus: EventBus,
        *,
        channel: ClientChannel | None,
        yolo: bool = False,
        afk: bool = False,
        scope: Scope = "exact",
        rules: Sequence[str] = (),
        mode: ApprovalMode = "ask",
    ) -> None:
        self._bus = bus
        self._channel = channel
        self.yolo = yolo
        self.afk = afk
        self.scope: Scope = scope
        self.mode: ApprovalMode = mode
        self.rules: set[str] = set(rules)
        self.source_id = uuid4_hex()
        self._pending: dict[str, _Pending] = {}
        self.on_pending: Callable[[], None] | None = None
        """Called when a request starts or stops waiting (the state keeper records which do,
        so that a process killed meanwhile has them asked again, or answered, when the session
        reopens: engine/recovery.py)."""
        self.reissue: dict[str, str] = {}
        """Tool call id → the id of the approval request a process that died had asked for it:
        the continued turn asks again under the same id (engine/recovery.py)."""

    @property
    def pending_ids(self) -> list[str]:
        """The requests the client was asked and has not answered, oldest first."""
        return list(self._pending)

    @property
    def pending_entries(self) -> list[dict[str, str]]:
        """What the state keeps of the requests waiting for an answer (`id`, `tool_call_id`,
        and `agent_id` for a sub-agent's), the ones still to be asked again included."""
        entries = [{"id": i, "tool_call_id": c} for c, i in self.reissue.items()]
        for request_id, pending in self._pending.items():
            entry = {"id": request_id, "tool_call_id": pending.asked.tool_call_id}
            if pending.asked.agent_id is not None:
                entry["agent_id"] = pending.asked.agent_id
            entries.append(entry)
        return entries

    @property
    def bypassed(self) -> bool:
        """Everything is approved without asking: yolo, afk, or nobody to ask."""
        return self.yolo or self.afk or self._channel is None

    def allows(
        self, action: str, scope_key: str | None, *, sender: str | None = None, crossing: str | None = None
    ) -> bool:
        """A session rule already covers this action: an exact rule, or (for `sender`'s call
        that stays in the sandbox) a tool pattern."""
        if action in self.rules or (
            scope_key is not None and f"{action}{RULE_SEPARATOR}{scope_key}" in self.rules
        ):
            return True
        if sender is None or crossing is not None or not self.rules:
            return False
        from soulwire.engine.rules import RuleError, parse_pattern  # only once rules exist

        for rule in self.rules:
            try:
                pattern = parse_pattern(rule)
            except RuleError:
                continue  # kept as an exact string (e.g. loaded from an older state.json)
            if pattern is not None and pattern.matches(sender, scope_key):
                return True
        return False

    async def request(self, asked: ActionRequest) -> ApprovalOutcome:
        """Approve, refuse, or ask the client (the module docstring gives the order)."""
        if self.allows(asked.action, asked.scope_key, sender=asked.sender, crossing=asked.crossing):
            return ApprovalOutcome(approved=True)
        if asked.crossing is not None:
            if self.bypassed:
                return ApprovalOutcome(approved=False, refusal=self._escape_refusal(asked.crossing))
        elif self.bypassed or (asked.confined and self.mode == "on-escape"):
            return ApprovalOutcome(approved=True)
        request = ApprovalRequest(
            id=self.reissue.pop(asked.tool_call_id, None) or uuid4(),
            tool_call_id=asked.tool_call_id,
            sender=asked.sender,
            action=asked.action,
            description=asked.description,
            source_kind="foreground_turn",
            source_id=self.source_id,
            agent_id=asked.agent_id,
            subagent_type=asked.subagent_type,
            display=list(asked.display),
        )
        pending = _Pending(asked)
        self._pending[request.id] = pending
        if self.on_pending is not None:
            self.on_pending()  # before the client is asked: what it may see is on record
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._ask, request, pending)
                await pending.done.wait()
                group.cancel_scope.cancel()  # resolved here, not by the client: stop waiting for it
        finally:
            del self._pending[request.id]
            # Also reached on cancellation: the client learns that the request is void.
            answer = pending.answer or ApprovalAnswer(request_id=request.id, response="reject")
            self._bus.emit(
                ApprovalResponse(request_id=request.id, response=answer.response, feedback=answer.feedback)
            )
            if self.on_pending is not None:
                self.on_pending()
        return ApprovalOutcome(approved=answer.response != "reject", feedback=answer.feedback)

    def _escape_refusal(self, crossing: str) -> str:
        why = "approvals are bypassed (yolo)" if self.yolo else "nobody can be asked (afk or no client)"
        return (
            f"This action would leave the sandbox ({crossing}), which only the user can approve, and "
            f"{why} in this session. Do it inside the sandbox, or tell the user what needs to run "
            "outside it."
        )

    async def _ask(self, request: ApprovalRequest, pending: _Pending) -> None:
        answer = ApprovalAnswer(request_id=request.id, response="reject")
        try:
            assert self._channel is not None
            raw = await self._channel.request(request)
            answer = ApprovalAnswer.model_validate(raw)
        except (ClientRequestError, ValidationError, TypeError):
            pass  # an error answer, or one that does not validate, counts as reject
        pending.resolve(answer)
        if answer.response == "approve_for_session":
            self.rules.add(session_rule(pending.asked.action, pending.asked.scope_key, self.scope))
            self._approve_covered()

    def _approve_covered(self) -> None:
        """A new session rule also answers the waiting requests it covers."""
        for request_id, other in self._pending.items():
            asked = other.asked
            covered = self.allows(asked.action, asked.scope_key, sender=asked.sender, crossing=asked.crossing)
            if other.answer is None and covered:
                other.resolve(ApprovalAnswer(request_id=request_id, response="approve_for_session"))
