"""Answering the engine's requests: approvals and questions (callback, stream, or the declared
default after a timeout) and calls to the client's external tools (always answered)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from pydantic import ValidationError

from soulwire.sdk.approvals import (
    Approval,
    ApprovalCallback,
    ApprovalDecision,
    Question,
    QuestionCallback,
    run_callback,
    to_decision,
)
from soulwire.sdk.engine import Engine
from soulwire.sdk.hooks import HookDispatcher
from soulwire.sdk.tools import Tool
from soulwire.sdk.turn import Replay, Turn
from soulwire.wire import jsonrpc
from soulwire.wire.messages import ApprovalRequest, ApprovalResponse, QuestionRequest, ToolCallRequest
from soulwire.wire.types import ToolCall, tool_error

log = logging.getLogger("soulwire.sdk")

_ANSWERED: dict[str, type[ApprovalRequest | ToolCallRequest | QuestionRequest]] = {
    "ApprovalRequest": ApprovalRequest,
    "ToolCallRequest": ToolCallRequest,
    "QuestionRequest": QuestionRequest,
}


def _find_call(turn: Turn, tool_call_id: str) -> ToolCall | None:
    for step in reversed(turn.steps):
        for call in step.tool_calls:
            if call.id == tool_call_id:
                return call
    return None


class Responder:
    """The session's side of every `request` the engine sends."""

    def __init__(
        self,
        *,
        tools: dict[str, Tool],
        on_approval: ApprovalCallback | None,
        on_question: QuestionCallback | None,
        timeout: float | None,
        default: ApprovalDecision,
        hooks: HookDispatcher | None = None,
    ) -> None:
        self.tools = tools
        self.hooks = hooks
        self.on_approval = on_approval
        self.on_question = on_question
        self.timeout = timeout
        self.default = default
        self.pending: dict[str, Approval | Question] = {}
        """Unsettled approvals and questions by payload id."""
        self.spawn: Callable[..., None] | None = None
        """Starts a task in the session's task group (set when the engine link is up)."""
        self._tasks: set[anyio.CancelScope] = set()

    # -- dispatch -------------------------------------------------------------------
    def handle(
        self,
        conn: Engine,
        request_id: str,
        type_: str,
        payload: dict[str, Any],
        active: Turn | Replay | None,
    ) -> None:
        """One request from the engine. During a replay, recorded requests are history: they
        go to the replay's stream unanswered (a background agent's approval is live)."""
        model = _ANSWERED.get(type_)
        if model is None:
            if type_ == "HookRequest":
                self._hook(conn, request_id, payload, active)
            else:
                conn.respond_error(request_id, jsonrpc.METHOD_NOT_FOUND, f"unsupported request type: {type_}")
            return
        try:
            request = model.model_validate(payload)
        except ValidationError:
            conn.respond_error(request_id, jsonrpc.INVALID_PARAMS, f"malformed {type_}")
            return
        live = isinstance(request, ApprovalRequest) and request.source_kind == "background_agent"
        if isinstance(active, Replay) and not live:
            active._on_event(request)
            return
        turn = active if isinstance(active, Turn) else None
        if isinstance(request, ApprovalRequest):
            self._approval(conn, request_id, request, turn)
        elif isinstance(request, QuestionRequest):
            self._question(conn, request_id, request, turn)
        else:
            self._spawn(self._run_tool(conn, request_id, request), turn)

    def _spawn(self, coro: Coroutine[Any, Any, None], turn: Turn | None = None) -> None:
        """Run `coro` in the session's task group, in a scope of its own that the session's
        close (and, for a turn's tool call, the turn's end) cancels."""
        scope = anyio.CancelScope()
        self._tasks.add(scope)
        if turn is not None:
            turn.tool_tasks.add(scope)

        async def run() -> None:
            try:
                with scope:
                    await coro
            finally:
                self._tasks.discard(scope)
                if turn is not None:
                    turn.tool_tasks.discard(scope)

        if self.spawn is None:
            coro.close()
            raise RuntimeError("the session is not started")
        self.spawn(run)

    # -- hooks --------------------------------------------------------------------------
    def _hook(
        self, conn: Engine, request_id: str, payload: dict[str, Any], active: Turn | Replay | None
    ) -> None:
        hooks = self.hooks
        if hooks is None or isinstance(active, Replay):  # nothing subscribed, or history
            conn.respond(request_id, {"request_id": payload.get("id", request_id), "action": "allow"})
            return

        async def answer() -> None:
            conn.respond(request_id, await hooks.answer(request_id, payload))

        self._spawn(answer())

    # -- approvals and questions ------------------------------------------------------
    def _register(self, pending: Approval | Question, turn: Turn | None) -> None:
        """Keep `pending` until it is settled; its turn records it and streams it to the consumer.
        The timeout starts now."""
        self.pending[pending.id] = pending
        if turn is not None:
            turn.approvals.append(pending)
            turn._on_event(pending)
        pending.start_timer(self.timeout)

    def _approval(self, conn: Engine, request_id: str, request: ApprovalRequest, turn: Turn | None) -> None:
        known = self.pending.get(request.id)
        if isinstance(known, Approval):  # the same request again: one question, one answer
            known.asked_again()
            return
        bound = turn is not None
        approval = Approval(
            request, request_id, conn.respond, default=self.default, turn_bound=bound, spawn=self._spawn
        )
        if turn is not None:
            approval.tool_call = _find_call(turn, request.tool_call_id)
        self._register(approval, turn)
        if self.on_approval is not None:
            self._spawn(self._ask_approval(self.on_approval, approval))

    async def _ask_approval(self, callback: ApprovalCallback, approval: Approval) -> None:
        try:
            decision = to_decision(await run_callback(callback, approval))
        except Exception:
            log.exception("on_approval failed; rejecting %s", approval.description)
            decision = ApprovalDecision.reject()
        if decision is not None:
            approval.answer(decision, by="callback")

    def _question(self, conn: Engine, request_id: str, request: QuestionRequest, turn: Turn | None) -> None:
        question = Question(request, request_id, conn.respond, spawn=self._spawn)
        self._register(question, turn)
        if self.on_question is not None:
            self._spawn(self._ask_question(self.on_question, question))

    async def _ask_question(self, callback: QuestionCallback, question: Question) -> None:
        try:
            answers = await run_callback(callback, question)
        except Exception:
            log.exception("on_question failed; dismissing the question")
            answers = {}
        if answers is not None:
            question.answer(dict(answers), by="callback")

    def approval_resolved(self, event: ApprovalResponse) -> None:
        """The engine reports a resolution (possibly one we did not send)."""
        pending = self.pending.pop(event.request_id, None)
        if isinstance(pending, Approval):
            pending.settled_elsewhere(event.response, event.feedback, "engine")

    # -- tools ------------------------------------------------------------------------
    async def _run_tool(self, conn: Engine, request_id: str, call: ToolCallRequest) -> None:
        tool = self.tools.get(call.name)
        if tool is None:
            message = f"Tool `{call.name}` is not registered with this SDK session"
            value = tool_error(message, brief="Unknown tool")
        else:
            value = await tool.invoke(call.arguments)
        conn.respond(request_id, {"tool_call_id": call.id, "return_value": value.model_dump(mode="json")})

    # -- endings ----------------------------------------------------------------------
    def turn_ended(self, turn: Turn) -> None:
        """The engine has resolved whatever the turn left open; stop its tool calls."""
        for pending in turn.approvals:
            if isinstance(pending, Approval):
                pending.settled_elsewhere("reject", "", "engine")
            else:
                pending.settled_elsewhere("engine")
            self.pending.pop(pending.id, None)
        for scope in list(turn.tool_tasks):
            scope.cancel()

    def close(self) -> None:
        for scope in list(self._tasks):
            scope.cancel()
        for pending in self.pending.values():
            if isinstance(pending, Approval):
                pending.settled_elsewhere("reject", "", "session")
            else:
                pending.settled_elsewhere("session")
        self.pending.clear()


__all__ = ["Responder"]
