"""The cases each face's budget tests drive (each limit at each scope), with one scripted
model for all: the first step runs a command and reports 600 tokens ($0.06 at `PRICES`), the
second asks for another command, the third says "continued".

Set by `/budget SCOPE KIND LIMIT` (or the flags), every limit stops the first prompt after its
first command: money and tokens because the next call's input alone (the 600 tokens the provider
counted) would cross them, time because the first command runs past it (a slow scripted step,
not a sleep of the test's), tool calls because the second command is not run. Raised to
`RAISED`, the next prompt ("continue") goes on: the second command runs (or, refused before, the
model reads that it was not run) and the model says "continued"."""

from __future__ import annotations

import json

KINDS = ("usd", "tokens", "time_s", "tool_calls")
SCOPES = ("turn", "session", "tree")
PRICES = {"scripted_echo": {"input": 100.0, "output": 100.0}}
"""USD per million tokens for the scripted model: 600 tokens cost $0.06."""
LIMIT = {"usd": "0.1", "tokens": "1000", "time_s": "1", "tool_calls": "1"}
RAISED = {"usd": "10", "tokens": "100000", "time_s": "1h", "tool_calls": "100"}
FLAGS = {
    "usd": "--budget-usd",
    "tokens": "--budget-tokens",
    "time_s": "--budget-time",
    "tool_calls": "--budget-tool-calls",
}
SLOW_COMMAND = "sleep 1.5; echo slept"
"""The first command when the limit is wall time: it runs past the 1 s limit."""
STEP_TOKENS = 600


RAISED_VALUE = {"usd": 10.0, "tokens": 100_000, "time_s": 3600.0, "tool_calls": 100}


def limit_value(kind: str) -> float | int:
    """The case's limit as the config's `[budgets]` takes it."""
    return int(LIMIT[kind]) if kind in ("tokens", "tool_calls") else float(LIMIT[kind])


def calls_made(kind: str) -> int:
    """The model calls of the stopped prompt: the second is made only under a tool-call limit
    (its command is the one not run)."""
    return 2 if kind == "tool_calls" else 1


def usage_line(input_other: int, output: int = 0) -> str:
    return "usage: " + json.dumps({"input_other": input_other, "output": output})


def step(line: str, input_other: int, output: int = 0) -> str:
    """One scripted model reply that reports its usage."""
    return f"{line}\n{usage_line(input_other, output)}"


def command_call(call_id: str, command: str) -> str:
    arguments = json.dumps({"command": command})
    return "tool_call: " + json.dumps({"id": call_id, "name": "Shell", "arguments": arguments})


def scripts(kind: str) -> list[str]:
    """The scripted model's replies for a case of limit `kind`."""
    first = SLOW_COMMAND if kind == "time_s" else "echo one"
    return [
        step(command_call("c1", first), STEP_TOKENS),
        step(command_call("c2", "echo two"), STEP_TOKENS),
        "text: continued",
    ]


def command_name(kind: str) -> str:
    """How `/budget` names a limit."""
    return "time" if kind == "time_s" else kind


def budget_prompt(scope: str, kind: str, value: str) -> str:
    return f"/budget {scope} {command_name(kind)} {value}"


def flags(kind: str, scope: str, value: str | None = None) -> tuple[str, ...]:
    """The command line's flags for a case (a fleet's `--budget-*`, `--print`'s)."""
    return (FLAGS[kind], value or LIMIT[kind], "--budget-scope", scope)


def limit_text(scope: str, kind: str) -> str:
    """How the terminal UI and the web UI name the limit that stopped the turn."""
    return f"the {scope} {kind} limit ("


def agent_call(call_id: str, prompt: str) -> str:
    arguments = json.dumps({"description": "part of the work", "prompt": prompt})
    return "tool_call: " + json.dumps({"id": call_id, "name": "Agent", "arguments": arguments})


TREE_TOKENS = 2000
"""The tree's token limit of `subagent_tree_scripts`."""


def subagent_tree_scripts() -> list[str]:
    """Two sub-agents in one step (the parent's call: 100 tokens), each spending 1,000 tokens
    and asking for a command: together they reach the tree's `TREE_TOKENS`; both stop, so
    does the parent (its next call is never made)."""
    child = step(command_call("s1", "echo child"), 1000)
    parent = step(f"{agent_call('a1', 'first half')}\n{agent_call('a2', 'second half')}", 100)
    return [parent, child, child, "text: never"]
