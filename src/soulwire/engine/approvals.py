"""The approvals broker: one place where tools ask before acting (spec §5).

`approve_for_session` remembers a rule no broader than what the user saw: with the default
`exact` scope the rule is the tool's scope key (the exact command for Shell, the file for
edits); with `action` scope (the reference's behaviour) it is the action string, so one
approved command approves every later command."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import ValidationError

from soulwire.engine.bus import EventBus
from soulwire.engine.client import ClientChannel, ClientRequestError
from soulwire.tools.base import ApprovalOutcome
from soulwire.wire.messages import ApprovalRequest, ApprovalResponse
from soulwire.wire.methods import ApprovalAnswer

Scope = Literal["exact", "action"]


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
    ) -> None:
        self._bus = bus
        self._channel = channel
        self.yolo = yolo
        self.afk = afk
        self.scope: Scope = scope
        self.rules: set[str] = set(rules)
        self.source_id = uuid.uuid4().hex

    @property
    def bypassed(self) -> bool:
        return self.yolo or self.afk or self._channel is None

    def _rule(self, action: str, scope_key: str | None) -> str:
        if self.scope == "exact" and scope_key is not None:
            return f"{action}\x00{scope_key}"
        return action

    async def request(
        self,
        *,
        tool_call_id: str,
        sender: str,
        action: str,
        description: str,
        display: Sequence[Any] = (),
        scope_key: str | None = None,
    ) -> ApprovalOutcome:
        if self.bypassed:
            return ApprovalOutcome(approved=True)
        rule = self._rule(action, scope_key)
        if rule in self.rules:
            return ApprovalOutcome(approved=True)
        request = ApprovalRequest(
            id=str(uuid.uuid4()),
            tool_call_id=tool_call_id,
            sender=sender,
            action=action,
            description=description,
            source_kind="foreground_turn",
            source_id=self.source_id,
            display=list(display),
        )
        answer = ApprovalAnswer(request_id=request.id, response="reject")
        try:
            assert self._channel is not None
            raw = await self._channel.request(request)
            answer = ApprovalAnswer.model_validate(raw)
        except (ClientRequestError, ValidationError, TypeError):
            pass  # an error answer, or one that does not validate, counts as reject
        finally:
            # Also reached on cancellation: the client learns the request is void.
            self._bus.emit(
                ApprovalResponse(request_id=request.id, response=answer.response, feedback=answer.feedback)
            )
        if answer.response == "approve_for_session":
            self.rules.add(rule)
        return ApprovalOutcome(approved=answer.response != "reject", feedback=answer.feedback)
