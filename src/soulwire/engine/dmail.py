"""`SendDMail` (the okabe agent): the model sends a message back to one of its earlier
checkpoints. After the step, the context is rewound to that checkpoint (the later messages go
to an archived context file) and the message joins it; files and other effects stay as they
are. Every checkpoint is visible to the model as a `<system>CHECKPOINT n</system>` message,
so it knows which ids it can name (spec §7.3)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from soulwire.engine.context import Context
from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.wire.types import BriefDisplayBlock, ToolReturnValue, tool_error, tool_ok

DESCRIPTION = """\
Send a D-Mail: a message to your own past, at one of the checkpoints of this conversation \
(the `CHECKPOINT n` markers you can see). After this step the context goes back to that \
checkpoint: everything after it disappears from your view and your message is appended \
instead. Use it to fold away a long detour - a huge file read, a failed search, many steps \
of debugging - keeping only what matters.

Only the context is rewound: files you changed, commands you ran and anything else outside \
stay as they are. So say in the message exactly what you did, what you learned and what is \
left, so that your past self does not repeat it. Do not tell the user about D-Mails."""


class DMailParams(ToolParams):
    message: str = Field(description="What your past self needs to know to carry on.")
    checkpoint_id: int = Field(ge=0, description="The checkpoint to send the message back to.")


@dataclass
class DMail:
    message: str
    checkpoint_id: int


class DMailBox:
    """Holds the D-Mail sent during a step until the soul delivers it at the step's end."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.pending: DMail | None = None

    def take(self) -> DMail | None:
        pending, self.pending = self.pending, None
        return pending


def dmail_message(text: str) -> str:
    return (
        "<system>A D-Mail from your future self arrived. Your future self has probably already "
        "changed things in the working directory; read it and decide what to do next. Never "
        f"mention D-Mails to the user. The D-Mail:\n\n{text.strip()}</system>"
    )


class SendDMail(TypedTool[DMailParams]):
    name = "SendDMail"
    description = DESCRIPTION
    params = DMailParams

    def __init__(self, box: DMailBox) -> None:
        self._box = box

    async def execute(self, params: DMailParams, ctx: ToolContext) -> ToolReturnValue:
        if self._box.pending is not None:
            return tool_error("Only one D-Mail can be sent at a time.", brief="D-Mail not sent")
        if params.checkpoint_id >= self._box.context.checkpoints:
            return tool_error(
                f"There is no checkpoint {params.checkpoint_id} (the last one is "
                f"{self._box.context.checkpoints - 1}).",
                brief="D-Mail not sent",
            )
        self._box.pending = DMail(params.message, params.checkpoint_id)
        return tool_ok(
            message=(
                "The D-Mail is sent: the context goes back to checkpoint "
                f"{params.checkpoint_id} after this step. Seeing this later means it was not delivered."
            ),
            display=[BriefDisplayBlock(text="D-Mail sent")],
        )


class ThinkParams(ToolParams):
    thought: str = Field(description="The thought.")


class Think(TypedTool[ThinkParams]):
    """`Think` (for agent files): a place to reason without acting."""

    name = "Think"
    description = "Write down a thought: reasoning, a plan or a check. Nothing is run or changed."
    params = ThinkParams

    async def execute(self, params: ThinkParams, ctx: ToolContext) -> ToolReturnValue:
        return tool_ok(message="Thought logged")
