"""`/budget`: show what the session has spent and has left, or set a limit —
`/budget [turn|session|tree] usd|tokens|time|tool_calls VALUE|off` (the scope defaults to
`tree`; time as 90, 90s, 15m or 2h). The terminal UI and the web UI send it as a prompt."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from soulwire.wire.budget import KINDS, SCOPES, Budget, BudgetReport, BudgetSpent
from soulwire.wire.types import TextPart

if TYPE_CHECKING:
    from soulwire.engine.budget import Ledger

USAGE = "Usage: /budget [turn|session|tree] usd|tokens|time|tool_calls VALUE|off"
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def _amount(kind: str, value: float | None) -> str:
    if value is None:
        return "?"
    if kind == "usd":
        return f"${value:.4f}"
    if kind == "time_s":
        return f"{value:.0f}s"
    return f"{int(value):,}"


def closest_limit(ledger: Ledger) -> str:
    """The limit nearest to being reached, spent of max (the terminal UI's status line)."""
    report = ledger.report()
    best: tuple[float, str] = (-1.0, "")
    for scope in SCOPES:
        limits = report.budget.limits(scope)
        for kind in KINDS:
            maximum = getattr(limits, kind) if limits is not None else None
            if maximum is None:
                continue
            spent = getattr(report.spent[scope], kind) or 0.0
            fraction = spent / maximum if maximum else 1.0
            if fraction > best[0]:
                name = "time" if kind == "time_s" else kind.replace("_", " ")
                best = (fraction, f"{scope} {name} {_amount(kind, spent)} of {_amount(kind, maximum)}")
    return best[1]


def stopped_note(ledger: Ledger | None, how: str = "Raise it with /budget and ask to continue.") -> str:
    """What a person reads when a limit stopped the turn, and how to go on."""
    hit = ledger.hit if ledger is not None else None
    which = (
        f"the {hit[1]} {hit[2]} limit ({_amount(hit[2], hit[3])})" if hit is not None else "a budget limit"
    )
    return f"Stopped: {which} is reached. {how}"


def spent_line(spent: BudgetSpent) -> str:
    return " · ".join(f"{kind} {_amount(kind, getattr(spent, kind))}" for kind in KINDS)


def describe(report: BudgetReport) -> str:
    """Every limit with what was spent and is left, then what each scope spent."""
    lines: list[str] = []
    for scope in SCOPES:
        limits = report.budget.limits(scope)
        left = report.remaining.get(scope)
        spent = report.spent[scope]
        for kind in KINDS:
            maximum = getattr(limits, kind) if limits is not None else None
            if maximum is None:
                continue
            rest = getattr(left, kind) if left is not None else None
            lines.append(
                f"{scope} {kind}: {_amount(kind, getattr(spent, kind))} of {_amount(kind, maximum)} "
                f"({_amount(kind, rest)} left)"
            )
    head = (
        "Budget limits:\n" + "\n".join(f"  {line}" for line in lines) if lines else "No budget limit is set."
    )
    spent = "\n".join(f"  {scope}: {spent_line(report.spent[scope])}" for scope in SCOPES)
    return f"{head}\nSpent:\n{spent}"


def parse_update(args: str) -> Budget:
    """The update `/budget ARGS` asks for; ValueError with the usage line otherwise."""
    words = args.lower().split()
    scope = words.pop(0) if words and words[0] in SCOPES else "tree"
    if len(words) != 2:
        raise ValueError(USAGE)
    kind, text = words
    kind = "time_s" if kind == "time" else kind
    if kind not in KINDS:
        raise ValueError(USAGE)
    value: float | int | None = None
    if text not in ("off", "none"):
        match = re.fullmatch(r"\$?(\d+(?:\.\d+)?)([smh]?)", text)
        if match is None or (match.group(2) and kind != "time_s"):
            raise ValueError(f"Not a {kind} value: {text}. {USAGE}")
        number = float(match.group(1)) * _UNITS[match.group(2)]
        value = int(number) if kind in ("tokens", "tool_calls") else number
    from pydantic import ValidationError

    try:
        return Budget.model_validate({scope: {kind: value}})
    except ValidationError as exc:
        raise ValueError(f"Invalid {kind} limit: {exc.errors()[0]['msg']}") from None


async def budget_command(soul: Any, args: str) -> None:
    from soulwire.engine.budget import BudgetError

    meter = soul.meter
    if meter is None:
        soul.bus.emit(TextPart(text="This session keeps no budget."))
        return
    ledger = meter.ledger
    if args.strip():
        try:
            model = soul.model.model_name if soul.model is not None else None
            ledger.update(parse_update(args), model=model)
        except (ValueError, BudgetError) as exc:
            soul.bus.emit(TextPart(text=str(exc)))
            return
    soul.bus.emit(TextPart(text=describe(ledger.report())))


__all__ = [
    "USAGE",
    "budget_command",
    "closest_limit",
    "describe",
    "parse_update",
    "spent_line",
    "stopped_note",
]
