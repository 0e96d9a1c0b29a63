"""Pickers the engine's requests open: approve/reject a tool action, answer a question.

A picker is state plus an answer to wait for; the prompt's key bindings drive it (arrows,
digits, Enter, Escape, Space for multi-select) and the live area shows it. Free text — a
rejection's reason, an "Other" answer — is typed in the normal input line."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from rich.text import Text

from soulwire.ui.shell.blocks import approval_renderable
from soulwire.wire.messages import ApprovalRequest, QuestionRequest
from soulwire.wire.types import DiffDisplayBlock, QuestionItem

if TYPE_CHECKING:
    from soulwire.ui.shell.view import ConversationView

APPROVAL_CHOICES = (
    ("approve", "Approve once"),
    ("approve_for_session", "Approve for this session"),
    ("reject", "Reject"),
    ("reject_with_feedback", "Reject, and tell the model why"),
)
OTHER = "__other__"


@dataclass
class Picker:
    """One choice among options; `free_text` is set when the chosen option asks for text."""

    title: str
    options: list[tuple[str, str]]  # (value, label)
    hint: str
    body: str = ""
    multi: bool = False
    free_text_value: str | None = None
    """The option whose choice opens the input line for text."""
    free_text_prompt: str = ""
    escape_value: str | None = None
    selected: int = 0
    checked: set[int] = field(default_factory=set)
    typing: bool = False
    """True once the free-text option was chosen: the input line now takes the text."""
    result: str | None = None
    text: str = ""
    done: anyio.Event = field(default_factory=anyio.Event)

    def move(self, delta: int) -> None:
        self.selected = (self.selected + delta) % len(self.options)

    def choose(self, index: int | None = None) -> None:
        if index is not None:
            if not 0 <= index < len(self.options):
                return
            self.selected = index
        value = self.options[self.selected][0]
        if value == self.free_text_value:
            self.typing = True
            return
        if self.multi:
            picked = sorted(self.checked) or [self.selected]
            self.finish(", ".join(self.options[i][1] for i in picked))
            return
        self.finish(value)

    def toggle(self) -> None:
        if self.multi and self.options[self.selected][0] != self.free_text_value:
            self.checked ^= {self.selected}

    def submit_text(self, text: str) -> None:
        self.text = text
        self.finish(self.free_text_value or "")

    def cancel(self) -> None:
        self.finish(self.escape_value)

    def finish(self, value: str | None) -> None:
        if self.result is None:
            self.result = value if value is not None else ""
            self.done.set()

    def render(self) -> Text:
        out = Text()
        out.append(self.title + "\n", style="bold yellow")
        if self.body:
            out.append(self.body + "\n", style="dim")
        if self.typing:
            out.append(f"  {self.free_text_prompt} (Enter sends, Esc skips)\n", style="yellow")
            return out
        for i, (_value, label) in enumerate(self.options):
            pointer = "❯" if i == self.selected else " "
            box = ("[x] " if i in self.checked else "[ ] ") if self.multi else ""
            style = "bold cyan" if i == self.selected else ""
            out.append(f" {pointer} {i + 1}. {box}{label}\n", style=style)
        out.append(f"  {self.hint}\n", style="dim")
        return out


def approval_picker(sender: str, action: str) -> Picker:
    return Picker(
        title=f"Allow {sender} to {action}?",
        options=list(APPROVAL_CHOICES),
        hint="Enter approves · ↑/↓ or 1-4 choose · Esc rejects",
        free_text_value="reject_with_feedback",
        free_text_prompt="Why? The model gets your reason.",
        escape_value="reject",
    )


def question_picker(item: QuestionItem) -> Picker:
    options = [(o.label, o.label + (f" — {o.description}" if o.description else "")) for o in item.options]
    other = item.other_label or "Other (type an answer)"
    options.append((OTHER, other + (f" — {item.other_description}" if item.other_description else "")))
    title = (f"[{item.header}] " if item.header else "") + item.question
    hint = "Enter chooses · ↑/↓ or digits move · Esc dismisses"
    if item.multi_select:
        hint = "Space toggles · Enter confirms · Esc dismisses"
    return Picker(
        title=title,
        options=options,
        hint=hint,
        body=item.body,
        multi=item.multi_select,
        free_text_value=OTHER,
        free_text_prompt="Your answer:",
        escape_value=None,
    )


Pick = Callable[[Picker], Awaitable[Picker]]
"""Shows a picker above the input line and waits for its answer."""


async def answer_approval(request: ApprovalRequest, pick: Pick, view: ConversationView) -> dict[str, Any]:
    """The action and what it touches go to the scrollback first, then the choice."""
    view.end_run()
    view.print(
        approval_renderable(
            request.sender,
            request.action,
            request.description,
            request.display,
            subagent=request.subagent_type or request.agent_id,
        )
    )
    view.approval_shown(request.tool_call_id, any(isinstance(b, DiffDisplayBlock) for b in request.display))
    picker = await pick(approval_picker(request.sender, request.action))
    response = picker.result or "reject"
    feedback = ""
    if response == "reject_with_feedback":
        response, feedback = "reject", picker.text
    return {"request_id": request.id, "response": response, "feedback": feedback}


async def answer_questions(request: QuestionRequest, pick: Pick, view: ConversationView) -> dict[str, Any]:
    """One picker per question; Escape on any of them dismisses them all."""
    answers: dict[str, str] = {}
    view.end_run()
    for item in request.questions:
        picker = await pick(question_picker(item))
        if not picker.result:
            view.note("  (question dismissed)")
            return {"request_id": request.id, "answers": {}}
        answer = picker.text if picker.result == OTHER else picker.result
        answers[item.question] = answer
        line = Text("? ", style="bold yellow")
        line.append(item.question + " ")
        line.append(answer, style="bold")
        view.print(line)
    return {"request_id": request.id, "answers": answers}
