"""Requests that need a human answer: tool approvals (`ApprovalRequest`) and questions
(`QuestionRequest`).

Each one arrives as an `Approval` / `Question` object. It is yielded in the turn's stream
(answer it there with `approve()`, `approve_for_session()`, `reject(feedback=...)`) and, when
the session has an `on_approval` / `on_question` callback, handed to that callback as well.
The first answer wins. One left unanswered for `timeout` seconds gets the session's declared
default, so a session never waits forever."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from soulwire.wire.messages import ApprovalRequest, QuestionRequest
from soulwire.wire.types import QuestionItem, ToolCall

log = logging.getLogger("soulwire.sdk")

ApprovalKind = Literal["approve", "approve_for_session", "reject"]
AnsweredBy = Literal["stream", "callback", "timeout", "engine", "session"]
"""Who settled a request: the code reading the stream, the session's callback, the timeout
default, the engine itself (e.g. an approve-for-session covering it, or the turn ending), or
the session closing."""


@dataclass(frozen=True)
class ApprovalDecision:
    """An answer to an ApprovalRequest. `feedback` only matters for `reject`: the engine tells
    the model why, and the turn continues instead of stopping."""

    response: ApprovalKind
    feedback: str = ""

    @classmethod
    def approve(cls) -> ApprovalDecision:
        return cls("approve")

    @classmethod
    def approve_for_session(cls) -> ApprovalDecision:
        return cls("approve_for_session")

    @classmethod
    def reject(cls, feedback: str = "") -> ApprovalDecision:
        return cls("reject", feedback)


DecisionLike: TypeAlias = ApprovalDecision | ApprovalKind | bool | None
"""What an `on_approval` callback may return: a decision, its kind as a string, True
(approve) / False (reject), or None to leave the request to the stream reader (or timeout)."""

ApprovalCallback: TypeAlias = Callable[["Approval"], DecisionLike | Awaitable[DecisionLike]]
QuestionCallback: TypeAlias = Callable[["Question"], dict[str, str] | Awaitable[dict[str, str] | None] | None]
Responder: TypeAlias = Callable[[str, dict[str, Any]], None]
Spawner: TypeAlias = Callable[[Coroutine[Any, Any, None]], None]


def to_decision(value: DecisionLike) -> ApprovalDecision | None:
    """Normalise what a callback returned; raises TypeError for anything else."""
    if value is None or isinstance(value, ApprovalDecision):
        return value
    if value is True:
        return ApprovalDecision.approve()
    if value is False:
        return ApprovalDecision.reject()
    if value in ("approve", "approve_for_session", "reject"):
        return ApprovalDecision(value)
    raise TypeError(
        f"an approval callback returned {value!r}; expected an ApprovalDecision, a kind or a bool"
    )


class _Pending:
    """Shared mechanics: answer at most once (thread-safe), a timeout default, a waitable outcome."""

    def __init__(self, request_id: str, respond: Responder, turn_bound: bool, spawn: Spawner | None) -> None:
        self.request_id = request_id
        self._respond = respond
        self._lock = threading.Lock()
        self._answered = False
        self.answered_by: AnsweredBy | None = None
        self.turn_bound = turn_bound
        self._spawn = spawn
        self._timer: anyio.CancelScope | None = None
        self._settled = anyio.Event()
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()

    @property
    def answered(self) -> bool:
        return self._answered

    def _claim(self, by: AnsweredBy) -> bool:
        with self._lock:
            if self._answered:
                return False
            self._answered = True
            self.answered_by = by
        return True

    def _settle(self) -> None:
        """After a successful claim and the answer recorded: stop the timer, wake waiters."""
        if threading.get_ident() == self._loop_thread:
            self._on_settled()
        else:
            anyio.from_thread.run_sync(self._on_settled, token=self._token)

    def _on_settled(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._settled.set()

    def start_timer(self, timeout: float | None) -> None:
        if timeout is None or self._answered or self._spawn is None:
            return
        scope = self._timer = anyio.CancelScope()

        async def expire_later() -> None:
            with scope:
                await anyio.sleep(timeout)
                self._expire()

        self._spawn(expire_later())

    def _expire(self) -> None:
        raise NotImplementedError

    async def wait(self) -> None:
        """Until somebody (or the timeout) answered."""
        await self._settled.wait()


class Approval(_Pending):
    """An ApprovalRequest waiting for an answer. `request` is the wire model; its common
    fields are mirrored as attributes."""

    def __init__(
        self,
        request: ApprovalRequest,
        request_id: str,
        respond: Responder,
        *,
        default: ApprovalDecision,
        turn_bound: bool = True,
        spawn: Spawner | None = None,
    ) -> None:
        super().__init__(request_id, respond, turn_bound, spawn)
        self.request = request
        self.default = default
        self.decision: ApprovalDecision | None = None
        self.tool_call: ToolCall | None = None
        """The model's call this approval is for (name and assembled arguments), when the
        turn streamed it."""

    # mirrored request fields
    @property
    def id(self) -> str:
        return self.request.id

    @property
    def tool_call_id(self) -> str:
        return self.request.tool_call_id

    @property
    def sender(self) -> str:
        return self.request.sender

    @property
    def action(self) -> str:
        return self.request.action

    @property
    def description(self) -> str:
        return self.request.description

    @property
    def display(self) -> list[Any]:
        return self.request.display

    def __repr__(self) -> str:
        state = f"answered {self.decision.response if self.decision else '?'} by {self.answered_by}"
        return f"<Approval {self.sender}: {self.description!r} ({state if self.answered else 'pending'})>"

    def answer(self, decision: ApprovalDecision, *, by: AnsweredBy = "stream") -> bool:
        """Send `decision`; False (and nothing sent) when the request was already answered."""
        if not self._claim(by):
            return False
        self.decision = decision
        self._respond(self.request_id, self._result(decision))
        self._settle()
        return True

    def _result(self, decision: ApprovalDecision) -> dict[str, Any]:
        result: dict[str, Any] = {"request_id": self.request.id, "response": decision.response}
        if decision.feedback:
            result["feedback"] = decision.feedback
        return result

    def asked_again(self) -> None:
        """The engine sent this request again (a re-attach, or a replica that took the session
        over and asks again): the answer given, if any, is sent again (it may have been lost
        with the old connection); one not given yet is still being asked."""
        if self.answered and self.decision is not None:
            self._respond(self.request_id, self._result(self.decision))

    def approve(self) -> bool:
        """Run the tool this once."""
        return self.answer(ApprovalDecision.approve())

    def approve_for_session(self) -> bool:
        """Run it, and let the engine approve the same action for the rest of the session."""
        return self.answer(ApprovalDecision.approve_for_session())

    def reject(self, feedback: str = "") -> bool:
        """Refuse. Without feedback the engine stops the turn; with feedback the model is told
        why and may try something else."""
        return self.answer(ApprovalDecision.reject(feedback))

    def settled_elsewhere(self, response: ApprovalKind, feedback: str, by: AnsweredBy) -> None:
        """The engine resolved it without us (approve-for-session, cancel, turn end)."""
        if self._claim(by):
            self.decision = ApprovalDecision(response, feedback)
            self._settle()

    def _expire(self) -> None:
        if not self._answered:
            log.warning(
                "approval %s (%s) unanswered; applying the default %r",
                self.id,
                self.description,
                self.default.response,
            )
            self.answer(self.default, by="timeout")


class Question(_Pending):
    """A QuestionRequest (the model's AskUserQuestion tool) waiting for answers."""

    def __init__(
        self, request: QuestionRequest, request_id: str, respond: Responder, *, spawn: Spawner | None = None
    ) -> None:
        super().__init__(request_id, respond, True, spawn)
        self.request = request
        self.answers: dict[str, str] | None = None

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def questions(self) -> list[QuestionItem]:
        return self.request.questions

    def __repr__(self) -> str:
        state = "answered" if self.answered else "pending"
        return f"<Question {[q.question for q in self.questions]!r} ({state})>"

    def answer(self, answers: dict[str, str], *, by: AnsweredBy = "stream") -> bool:
        """Answer: question text → chosen label (several labels joined by ", ")."""
        if not self._claim(by):
            return False
        self.answers = dict(answers)
        self._respond(self.request_id, {"request_id": self.request.id, "answers": self.answers})
        self._settle()
        return True

    def dismiss(self, *, by: AnsweredBy = "stream") -> bool:
        """Answer nothing: the model is told the user dismissed the question."""
        return self.answer({}, by=by)

    def settled_elsewhere(self, by: AnsweredBy) -> None:
        """The engine dropped it (turn ended) or the session closed: nothing to send."""
        if self._claim(by):
            self.answers = {}
            self._settle()

    def _expire(self) -> None:
        if not self._answered:
            log.warning("question %s unanswered; dismissing it", self.id)
            self.dismiss(by="timeout")


async def run_callback(callback: Callable[[Any], Any], argument: Any) -> Any:
    """Call a sync or async callback. Sync callbacks run in a worker thread, so one that asks
    a human (input(), a dialog) does not stall the event loop."""
    if inspect.iscoroutinefunction(callback):
        return await callback(argument)
    value = await anyio.to_thread.run_sync(callback, argument, abandon_on_cancel=True)
    if inspect.isawaitable(value):
        value = await value
    return value


__all__ = [
    "AnsweredBy",
    "Approval",
    "ApprovalCallback",
    "ApprovalDecision",
    "ApprovalKind",
    "DecisionLike",
    "Question",
    "QuestionCallback",
    "to_decision",
]
