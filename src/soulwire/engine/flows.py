"""Flows: a flow skill's diagram (Mermaid or D2) as a graph of prompts, and the runner that
walks it as nested turns inside the outer one (spec §4.13). Ralph mode is a two-node flow.

A node labelled `BEGIN` starts the flow and one labelled `END` ends it; every other node is a
prompt. A node with one way out is a task: its prompt runs as one inner turn, then the flow
moves on. A node with several ways out is a decision: the edge labels are the choices, and
the model picks one by ending its answer with `<choice>LABEL</choice>`.

Parsing uses the standard library only: the start-up path validates flow skills while it
answers `initialize`."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from soulwire.errors import SoulwireError

NodeKind = Literal["begin", "end", "task", "decision"]
MAX_FLOW_MOVES = 1000
"""Inner turns one flow may run before it stops (a loop that never reaches END)."""


class FlowError(SoulwireError, ValueError):
    """A diagram that is not a usable flow (the message says where and why)."""


@dataclass(frozen=True)
class Edge:
    target: str
    label: str | None


@dataclass
class Flow:
    labels: dict[str, Any] = field(default_factory=dict)
    """Node → prompt: text, or (Ralph's first node) the user's own input, parts and all."""
    edges: dict[str, list[Edge]] = field(default_factory=dict)
    begin: str = ""

    def kind(self, node: str) -> NodeKind:
        label = self.labels[node]
        label = label.strip().lower() if isinstance(label, str) else ""
        if label in ("begin", "end"):
            return label
        return "decision" if len(self.edges.get(node, [])) > 1 else "task"


# ---------------------------------------------------------------- parsing


def flow_from_markdown(text: str) -> Flow:
    """The flow of a SKILL.md: its first ```mermaid or ```d2 block."""
    for language, code in _fenced_blocks(text):
        if language == "mermaid":
            return parse_mermaid(code)
        if language == "d2":
            return parse_d2(code)
    raise FlowError("a flow skill needs a ```mermaid or ```d2 block with its diagram")


def _fenced_blocks(text: str) -> Iterator[tuple[str, str]]:
    fence, language, lines = "", "", list[str]()
    for line in text.splitlines():
        stripped = line.strip()
        if not fence:
            match = re.match(r"^(`{3,}|~{3,})\s*\{?([\w-]*)", stripped)
            if match:
                fence, language, lines = match.group(1), match.group(2).lower(), []
            continue
        if stripped.startswith(fence) and not stripped.lstrip(fence[0]):
            yield language, "\n".join(lines)
            fence = ""
            continue
        lines.append(line)


_ID = r"[A-Za-z0-9_][A-Za-z0-9_-]*"
_MERMAID_NODE = re.compile(
    rf"""\s*(?P<id>{_ID})\s*(?:
        \(\[(?P<stadium>[^\]]*)\]\) | \[\[(?P<sub>[^\]]*)\]\] | \(\((?P<circle>[^)]*)\)\) |
        \[(?P<box>[^\]]*)\] | \((?P<round>[^)]*)\) | \{{(?P<rhombus>[^}}]*)\}}
    )?""",
    re.VERBOSE,
)
_MERMAID_ARROW = re.compile(
    r"\s*(?:--\s*(?P<text>[^->|][^>]*?)\s*)?(?:-{2,}|={2,}|-\.+-)>\s*(?:\|(?P<pipe>[^|]*)\|)?"
)
_MERMAID_SKIP = (
    "graph",
    "flowchart",
    "classdef",
    "class ",
    "style ",
    "linkstyle",
    "click ",
    "subgraph",
    "direction",
)


def _unquote(label: str) -> str:
    label = label.strip()
    if len(label) >= 2 and label[0] == label[-1] == '"':
        label = label[1:-1]
    return label.strip()


def parse_mermaid(code: str) -> Flow:
    """A Mermaid flowchart: `A[label] --> B{question}`, `B -->|yes| C`, `B -- no --> D`."""
    builder = _Builder()
    for number, raw in enumerate(code.splitlines(), start=1):
        line = raw.split("%%", 1)[0].strip().rstrip(";")
        if not line or line.lower().startswith(_MERMAID_SKIP) or line.lower() == "end":
            continue
        line = re.sub(r":::[\w-]+", "", line)
        position, previous = 0, None
        while True:
            node = _MERMAID_NODE.match(line, position)
            if node is None:
                raise FlowError(f"line {number}: expected a node id at {line[position:]!r}")
            label = next((v for k, v in node.groupdict().items() if k != "id" and v is not None), None)
            node_id = node.group("id")
            builder.node(node_id, None if label is None else _unquote(label), number)
            if previous is not None:
                builder.edge(previous[0], node_id, previous[1])
            position = node.end()
            if position >= len(line.rstrip()):
                break
            arrow = _MERMAID_ARROW.match(line, position)
            if arrow is None:
                raise FlowError(f"line {number}: expected an arrow (-->) at {line[position:]!r}")
            text = arrow.group("pipe") if arrow.group("pipe") is not None else arrow.group("text")
            previous = (node_id, _unquote(text) if text and text.strip() else None)
            position = arrow.end()
    return builder.finish()


_D2_EDGE = re.compile(rf"^(?P<src>{_ID})\s*->\s*(?P<dst>{_ID})\s*(?::\s*(?P<label>.*))?$")
_D2_NODE = re.compile(rf"^(?P<id>{_ID})\s*:\s*(?P<label>.*?)\s*(?P<block>\{{)?$")


def parse_d2(code: str) -> Flow:
    """A D2 diagram: `a: label`, `a -> b`, `a -> b: choice` (one statement a line; shape
    blocks `{ … }` are skipped, a `|md … |` label is read as text)."""
    builder = _Builder()
    depth = 0
    lines = code.splitlines()
    number = 0
    while number < len(lines):
        raw = lines[number]
        number += 1
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if depth:
            depth += line.count("{") - line.count("}")
            continue
        edge = _D2_EDGE.match(line)
        if edge is not None:
            builder.node(edge.group("src"), None, number)
            builder.node(edge.group("dst"), None, number)
            label = edge.group("label")
            builder.edge(edge.group("src"), edge.group("dst"), _unquote(label) if label else None)
            continue
        node = _D2_NODE.match(line)
        if node is None:
            raise FlowError(f"line {number}: expected `id: label` or `a -> b` at {line!r}")
        label = node.group("label")
        if label.startswith("|"):  # a block string: |md … | over several lines
            body = [label.lstrip("|").removeprefix("md").strip()]
            while not body[-1].endswith("|") and number < len(lines):
                body.append(lines[number].strip())
                number += 1
            label = "\n".join(body).rstrip("|").strip()
        if node.group("block"):
            depth = 1
        builder.node(node.group("id"), _unquote(label) if label else None, number)
    return builder.finish()


class _Builder:
    def __init__(self) -> None:
        self.flow = Flow()
        self._explicit: set[str] = set()

    def node(self, node_id: str, label: str | None, number: int) -> None:
        if label is not None and not label:
            raise FlowError(f"line {number}: node {node_id!r} has an empty label")
        known = self.flow.labels.get(node_id)
        if label is None:
            self.flow.labels.setdefault(node_id, node_id)
        elif node_id in self._explicit and known != label:
            raise FlowError(f"line {number}: node {node_id!r} is defined twice with different labels")
        else:
            self.flow.labels[node_id] = label
            self._explicit.add(node_id)
        self.flow.edges.setdefault(node_id, [])

    def edge(self, source: str, target: str, label: str | None) -> None:
        self.flow.edges[source].append(Edge(target, label))

    def finish(self) -> Flow:
        flow = self.flow
        begins = [n for n in flow.labels if flow.kind(n) == "begin"]
        ends = [n for n in flow.labels if flow.kind(n) == "end"]
        if len(begins) != 1 or len(ends) != 1:
            raise FlowError(
                f"a flow needs exactly one BEGIN and one END node (found {len(begins)} and {len(ends)})"
            )
        flow.begin = begins[0]
        reachable, queue = set[str](), [flow.begin]
        while queue:
            node = queue.pop()
            if node not in reachable:
                reachable.add(node)
                queue.extend(e.target for e in flow.edges[node])
        if ends[0] not in reachable:
            raise FlowError("END cannot be reached from BEGIN")
        for node in reachable:
            out = flow.edges[node]
            if len(out) > 1:
                labels = [e.label for e in out]
                if any(not label for label in labels):
                    raise FlowError(f"node {node!r} has several ways out and one of them has no label")
                if len(set(labels)) != len(labels):
                    raise FlowError(f"node {node!r} has two ways out with the same label")
        return flow


# ---------------------------------------------------------------- running

_CHOICE = re.compile(r"<choice>([^<]*)</choice>")

InnerTurn = Callable[[Any], Awaitable[tuple[str, str, int]]]
"""Runs one inner turn on a prompt: (status, final assistant text, steps used)."""


def ralph_flow(prompt: str, first: Any) -> Flow:
    """Ralph mode: the user's input (`first`, whose text is `prompt`) once, then the same
    prompt again and again until the model answers STOP (spec §4.13)."""
    decision = (
        f"{prompt}. (You are running in an automated loop where the same prompt is fed repeatedly. "
        "Only choose STOP when the task is fully complete. Including it will stop further "
        "iterations. If you are not 100% sure, choose CONTINUE.)"
    )
    flow = Flow(labels={"BEGIN": "BEGIN", "R1": first, "R2": decision, "END": "END"}, begin="BEGIN")
    flow.edges = {
        "BEGIN": [Edge("R1", None)],
        "R1": [Edge("R2", None)],
        "R2": [Edge("R2", "CONTINUE"), Edge("END", "STOP")],
        "END": [],
    }
    return flow


def decision_prompt(label: str, choices: list[str]) -> str:
    lines = [label, "", "Available branches:", *(f"- {c}" for c in choices), ""]
    return "\n".join([*lines, "Reply with a choice using <choice>...</choice>."])


async def run_flow(flow: Flow, inner_turn: InnerTurn, *, max_moves: int = MAX_FLOW_MOVES) -> tuple[str, int]:
    """Walk the flow from BEGIN to END, one inner turn per node; returns the outcome
    (`finished`, `rejected` or `max_steps_reached`) and the steps used. A decision whose
    answer names no valid choice is asked again."""
    node, moves, steps = flow.begin, 0, 0
    while True:
        kind = flow.kind(node)
        out = flow.edges.get(node, [])
        if kind == "end" or not out:
            return "finished", steps
        if kind == "begin":
            node = out[0].target
            continue
        prompt = flow.labels[node]
        if kind == "decision":
            prompt = decision_prompt(prompt, [e.label or "" for e in out])
        base = prompt
        while True:
            if moves >= max_moves:  # every inner turn counts, re-asked decisions too
                return "max_steps_reached", steps
            moves += 1
            status, text, used = await inner_turn(prompt)
            steps += used
            if status != "finished":
                return status, steps
            if kind != "decision":
                node = out[0].target
                break
            choices = _CHOICE.findall(text)
            chosen = choices[-1].strip() if choices else None
            target = next((e.target for e in out if e.label == chosen), None)
            if target is not None:
                node = target
                break
            prompt = (
                f"{base}\n\nYour last response did not include a valid choice. "
                "Reply with one of the choices using <choice>...</choice>."
            )
