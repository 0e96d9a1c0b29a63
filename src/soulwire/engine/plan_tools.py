"""`EnterPlanMode` and `ExitPlanMode` (spec §4.10, §9): the model asks to plan first, and
presents the finished plan for the user's review.

Entering asks "Enter plan mode?" unless approvals are bypassed (yolo, afk); a client that
cannot answer questions gets plan mode without being asked — it only restricts. Leaving shows
the plan (`PlanDisplay`) and asks the user to approve it, reject it (plan mode stays on, or is
left with "Reject and Exit"), or revise it (the free-text answer). In afk mode the plan is
approved automatically. Both tools are offered only to clients that declared
`supports_plan_mode`."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field, field_validator

from soulwire.engine.bus import EventBus
from soulwire.engine.plan import PlanMode
from soulwire.engine.questions import QuestionAsker
from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.wire.messages import PlanDisplay
from soulwire.wire.types import (
    BriefDisplayBlock,
    QuestionItem,
    QuestionOption,
    ToolReturnValue,
    tool_error,
    tool_ok,
)

ENTER_QUESTION = "Enter plan mode?"
APPROVE_QUESTION = "Approve this plan?"
APPROVE, REJECT, REJECT_AND_EXIT, REVISE = "Approve", "Reject", "Reject and Exit", "Revise"
_RESERVED = frozenset({APPROVE, REJECT, REJECT_AND_EXIT, REVISE})


def _brief(text: str) -> list[BriefDisplayBlock]:
    return [BriefDisplayBlock(text=text)]


class EnterPlanModeParams(ToolParams):
    pass


class EnterPlanMode(TypedTool[EnterPlanModeParams]):
    name = "EnterPlanMode"
    description = (
        "Switch to plan mode before a large or ambiguous change: you explore and write a plan to a "
        "plan file, and the user approves it before anything else is changed. The user is asked "
        "first. Use it when planning together would save rework; not for small, clear tasks."
    )
    params = EnterPlanModeParams

    def __init__(self, plan: PlanMode, asker: QuestionAsker, *, bypassed: Callable[[], bool]) -> None:
        self._plan = plan
        self._asker = asker
        self._bypassed = bypassed

    async def execute(self, params: EnterPlanModeParams, ctx: ToolContext) -> ToolReturnValue:
        if self._plan.enabled:
            return tool_ok(output=f"Plan mode is already on. The plan file is {self._plan.file}.")
        if not self._bypassed():
            question = QuestionItem(
                question=ENTER_QUESTION,
                header="Plan mode",
                options=[
                    QuestionOption(
                        label="Yes", description="Plan first; nothing changes until you approve the plan"
                    ),
                    QuestionOption(label="No", description="Go ahead without a plan"),
                ],
            )
            outcome = await self._asker.ask(ctx.tool_call_id, [question])
            answer = outcome.answers.get(ENTER_QUESTION, next(iter(outcome.answers.values()), ""))
            if not outcome.unsupported and answer != "Yes":
                said = f" The user said: {answer}" if answer and answer != "No" else ""
                return tool_ok(
                    output=f"The user chose not to enter plan mode; continue without it.{said}",
                    message="Plan mode declined.",
                    display=_brief("Plan mode declined"),
                )
        self._plan.set(True)
        return tool_ok(
            output=(
                f"Plan mode is on. Write the plan to {self._plan.file} (the only file you may change now; "
                "no approval needed), then call ExitPlanMode to present it."
            ),
            message="Entered plan mode.",
            display=_brief("Plan mode on"),
        )


class PlanOption(ToolParams):
    label: str = Field(min_length=1, description="A short name for this way of carrying out the plan.")
    description: str = Field(default="", description="What it means.")


class ExitPlanModeParams(ToolParams):
    options: list[PlanOption] | None = Field(
        default=None,
        max_length=3,
        description=(
            "Optional 2-3 alternative ways to proceed for the user to choose from (they replace the "
            "plain Approve); omit when there is one plan."
        ),
    )

    @field_validator("options")
    @classmethod
    def _valid_labels(cls, options: list[PlanOption] | None) -> list[PlanOption] | None:
        if not options:
            return None
        labels = [o.label for o in options]
        if len(set(labels)) != len(labels):
            raise ValueError("option labels must be unique")
        if _RESERVED & set(labels):
            raise ValueError(f"option labels may not be any of {', '.join(sorted(_RESERVED))}")
        return options


class ExitPlanMode(TypedTool[ExitPlanModeParams]):
    name = "ExitPlanMode"
    description = (
        "In plan mode, present the plan you wrote to the plan file for the user's approval. If "
        "approved, plan mode ends and you carry out the plan; otherwise follow the user's answer "
        "(revise the plan, or stop and wait)."
    )
    params = ExitPlanModeParams

    def __init__(
        self, plan: PlanMode, asker: QuestionAsker, bus: EventBus, *, afk: Callable[[], bool]
    ) -> None:
        self._plan = plan
        self._asker = asker
        self._bus = bus
        self._afk = afk

    async def execute(self, params: ExitPlanModeParams, ctx: ToolContext) -> ToolReturnValue:
        plan = self._plan
        if not plan.enabled:
            return tool_error("Plan mode is not on; there is no plan to present.", brief="Not in plan mode")
        content = plan.read()
        if not content.strip():
            return tool_error(
                f"The plan file {plan.file} is empty: write the plan there first.", brief="No plan yet"
            )
        self._bus.emit(PlanDisplay(content=content, file_path=str(plan.file)))
        if self._afk():
            plan.set(False)
            return _approved("The plan was approved automatically (the user is away).", None)
        choices = [QuestionOption(label=o.label, description=o.description) for o in params.options or []]
        if not choices:
            choices = [QuestionOption(label=APPROVE, description="Leave plan mode and carry out the plan")]
        choices += [
            QuestionOption(label=REJECT, description="Stay in plan mode"),
            QuestionOption(
                label=REJECT_AND_EXIT, description="Leave plan mode without carrying out the plan"
            ),
        ]
        question = QuestionItem(
            question=APPROVE_QUESTION,
            header="Plan",
            options=choices,
            body=f"The plan is in {plan.file}.",
            other_label=REVISE,
            other_description="Say what to change",
        )
        outcome = await self._asker.ask(ctx.tool_call_id, [question])
        answer = outcome.answers.get(APPROVE_QUESTION, next(iter(outcome.answers.values()), "")).strip()
        labels = {c.label for c in choices} - {REJECT, REJECT_AND_EXIT}
        if answer in labels:
            plan.set(False)
            chosen = answer if answer != APPROVE else None
            return _approved("The user approved the plan.", chosen)
        if answer == REJECT_AND_EXIT:
            plan.set(False)
            ctx.rejected = True  # the turn stops after this step: the user takes over
            return tool_error(
                "The user rejected the plan and left plan mode. Stop and wait for the user's instructions.",
                brief="Plan rejected; plan mode off",
            )
        if answer == REJECT or not answer:
            ctx.rejected = True
            why = "rejected the plan" if answer else "did not review the plan"
            return tool_error(
                f"The user {why}. Plan mode stays on; stop and wait for the user's instructions.",
                brief="Plan rejected" if answer else "Plan not reviewed",
            )
        return tool_ok(
            output=(
                f"The user wants the plan revised: {answer}\n"
                "Update the plan file, then call ExitPlanMode again."
            ),
            message="The user asked for changes to the plan.",
            display=_brief(f"Revise: {answer}"),
        )


def _approved(text: str, chosen: str | None) -> ToolReturnValue:
    option = f" They chose: {chosen}." if chosen else ""
    return tool_ok(
        output=f"{text}{option} Plan mode is off: carry out the plan now.",
        message="Plan approved.",
        display=_brief("Plan approved"),
    )
