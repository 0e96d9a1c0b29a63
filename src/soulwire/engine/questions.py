"""Questions to the user (spec §3.4, §9): the `AskUserQuestion` tool and the asker that the
plan tools share. A question travels as a `QuestionRequest` (JSON-RPC id = payload id) and
comes back as `{request_id, answers}`: question text → chosen label, several labels of a
multi-select joined by ", ", free text for the "Other" choice.

Nothing here can hang a turn: an error answer, an invalid one, a client that went away or
one that cannot receive questions all end the wait; an empty `answers` means dismissed. In
afk mode nobody is there to answer, so questions are dismissed without asking."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import Field, ValidationError, field_validator

from soulwire.engine.bus import EventBus
from soulwire.engine.client import ClientChannel, ClientRequestError
from soulwire.ids import uuid4
from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.wire.messages import QuestionRequest, QuestionResponse
from soulwire.wire.types import (
    BriefDisplayBlock,
    QuestionItem,
    QuestionOption,
    ToolReturnValue,
    tool_error,
    tool_ok,
)

UNSUPPORTED = "The client does not support interactive questions."


@dataclass(frozen=True)
class Answers:
    """How a question ended: the answers (empty = dismissed), or why nobody was asked."""

    answers: dict[str, str] = field(default_factory=dict)
    afk: bool = False
    unsupported: bool = False

    @property
    def dismissed(self) -> bool:
        return not self.answers


class QuestionAsker:
    """Asks the connected client; `supported` is what the client declared in `initialize`."""

    def __init__(
        self, bus: EventBus, *, afk: Callable[[], bool], channel: ClientChannel | None = None
    ) -> None:
        self._bus = bus
        self._afk = afk
        self.channel = channel
        self.supported = False

    async def ask(self, tool_call_id: str, questions: Sequence[QuestionItem]) -> Answers:
        if self._afk():
            return Answers(afk=True)
        if self.channel is None or not self.supported:
            return Answers(unsupported=True)
        request = QuestionRequest(id=uuid4(), tool_call_id=tool_call_id, questions=list(questions))
        self._bus.record(request)  # part of the turn's history (spec §3.6)
        try:
            raw = await self.channel.request(request)
            return Answers(answers=dict(QuestionResponse.model_validate(raw).answers))
        except ClientRequestError as exc:
            return Answers(unsupported=exc.unsupported)
        except (ValidationError, TypeError):
            return Answers()  # an answer we cannot read counts as dismissed


# ---------------------------------------------------------------- the AskUserQuestion tool


class _Option(ToolParams):
    label: str = Field(min_length=1, description="The choice as the user sees it (a few words).")
    description: str = Field(default="", description="What choosing it means.")


class _Question(ToolParams):
    question: str = Field(min_length=1, description="The complete question, ending with a question mark.")
    header: str = Field(
        default="", description="A very short label for the question (at most 12 characters)."
    )
    options: list[_Option] = Field(
        min_length=2, max_length=4, description="2-4 distinct choices; the user may also type another answer."
    )
    multi_select: bool = Field(default=False, description="Let the user choose several options.")


class AskUserQuestionParams(ToolParams):
    questions: list[_Question] = Field(
        min_length=1, max_length=4, description="1-4 questions asked together."
    )

    @field_validator("questions")
    @classmethod
    def _distinct(cls, questions: list[_Question]) -> list[_Question]:
        texts = [q.question for q in questions]
        if len(set(texts)) != len(texts):
            raise ValueError("each question must be different (answers are keyed by the question text)")
        return questions


class AskUserQuestion(TypedTool[AskUserQuestionParams]):
    name = "AskUserQuestion"
    description = (
        "Ask the user 1-4 multiple-choice questions when a decision is genuinely theirs (a preference, "
        "an ambiguous requirement, a choice between approaches) and you cannot proceed well without it. "
        "The user picks an option (or several with multi_select) or types another answer. Do not use it "
        "for permission to run tools: those ask by themselves."
    )
    params = AskUserQuestionParams

    def __init__(self, asker: QuestionAsker) -> None:
        self._asker = asker

    async def execute(self, params: AskUserQuestionParams, ctx: ToolContext) -> ToolReturnValue:
        items = [
            QuestionItem(
                question=q.question,
                header=q.header,
                options=[QuestionOption(label=o.label, description=o.description) for o in q.options],
                multi_select=q.multi_select,
            )
            for q in params.questions
        ]
        outcome = await self._asker.ask(ctx.tool_call_id, items)
        if outcome.unsupported:
            return tool_error(
                UNSUPPORTED + " Decide yourself, or ask in your reply.", brief="Questions not supported"
            )
        if outcome.afk:
            return tool_ok(
                output="The user is away (afk mode) and cannot answer. Decide yourself and carry on.",
                message="Question dismissed: nobody is there to answer.",
                display=_brief("Dismissed (afk)"),
            )
        if outcome.dismissed:
            return tool_ok(
                output="The user dismissed the question without answering. Use your best judgement, "
                "or say in your reply what you need to know.",
                message="User dismissed the question.",
                display=_brief("Dismissed"),
            )
        return tool_ok(
            output=json.dumps({"answers": outcome.answers}, ensure_ascii=False),
            message="User has answered.",
            display=_brief("User answered"),
        )


def _brief(text: str) -> list[BriefDisplayBlock]:
    return [BriefDisplayBlock(text=text)]
