"""Structured output: `query(..., output_format=Model)` returns a validated pydantic object.
The scripted model first answers with the wrong type; the SDK sends the validation error back
once and validates the corrected reply. Uses the blocking `sdk.sync.query`.

    python examples/structured_output.py
    python examples/structured_output.py --real
"""

from __future__ import annotations

from offline import session_options
from pydantic import BaseModel

import soulwire.sdk as sdk
from soulwire.sdk import sync

DEMO_REPLIES = [
    'text: {"title": "Fix the flaky test", "priority": "high", "labels": ["ci"]}',
    'text: {"title": "Fix the flaky test", "priority": 1, "labels": ["ci"]}',
]


class Ticket(BaseModel):
    title: str
    priority: int
    """1 (urgent) to 4 (someday)."""
    labels: list[str]


def main() -> None:
    options = sdk.Options(**session_options(DEMO_REPLIES, __doc__ or ""), output_format=Ticket)
    for message in sync.query("File a ticket for the flaky CI test.", options):
        if isinstance(message, sdk.AssistantText):
            print(f"reply: {message.text}")
        elif isinstance(message, sdk.ResultMessage):
            print(f"turns: {message.num_turns}, stop: {message.stop_reason}")
            ticket = message.structured_output
            if isinstance(ticket, Ticket):
                print(f"ticket: {ticket.title!r}, priority {ticket.priority}, labels {ticket.labels}")
            else:
                print(f"no valid ticket: {message.error}")


if __name__ == "__main__":
    main()
