"""Budgets through the SDK, enforced by the real engine: `Options(budget=…)` goes to the
engine in `initialize`, the turn ends with `budget_exceeded` and the budget events, and
`session.set_budget()` raises the limit so that the next prompt continues the work."""

from __future__ import annotations

import pytest

import soulwire.sdk as sdk
from soulwire.wire.budget import BudgetExceeded, BudgetUpdate
from tests.budget_cases import KINDS, PRICES, RAISED_VALUE, SCOPES, limit_value, scripts

from .conftest import Engine
from .test_engines import call

pytestmark = pytest.mark.anyio


def spending(line: str, tokens: int) -> str:
    return f"{line}\nusage: input_other={tokens} output=0"


async def test_options_budget_stops_the_turn_and_set_budget_continues_it(soulwire: Engine):
    options = soulwire.options(
        spending(call("c1", "Shell", {"command": "echo one"}), 600),
        spending(call("c2", "Shell", {"command": "echo two"}), 700),
        spending("text: done", 800),
        budget={"tree": {"tokens": 1000}},
        yolo=True,
    )
    async with sdk.Session(**options) as session:
        turn = session.prompt("go")
        events = [event async for event in turn]
        assert turn.status == "budget_exceeded"
        [exceeded] = [e for e in events if isinstance(e, BudgetExceeded)]
        assert (exceeded.scope, exceeded.limit, exceeded.spent, exceeded.max) == ("tree", "tokens", 600, 1000)
        assert any(isinstance(e, BudgetUpdate) for e in events)

        report = await session.set_budget(tree={"tokens": 5000})
        assert report.budget.tree is not None and report.budget.tree.tokens == 5000
        assert report.spent["tree"].tokens == 600 and report.remaining["tree"].tokens == 4400
        result = await session.prompt("continue")
        assert result.status == "finished" and result.final_text == "done"


async def test_a_budget_the_engine_cannot_price_is_refused(soulwire: Engine):
    with pytest.raises(sdk.ConfigurationError, match="budget"):
        sdk.Options(budget={"tree": {"ust": 1}})
    async with sdk.Session(**soulwire.options("text: hi")) as session:
        with pytest.raises(sdk.SDKError, match="price of model 'scripted_echo'"):
            await session.set_budget(tree={"usd": 1.0})
        report = await session.set_budget()  # nothing changed: what was spent so far
        assert report.spent["session"].tokens == 0


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("kind", KINDS)
async def test_options_budget_each_limit_and_scope(soulwire: Engine, kind: str, scope: str):
    """Each limit at each scope (tests/budget_cases.py) through `Options(budget=…)`, priced with
    the SDK's `prices`: the turn stops with the event naming it, `set_budget` raises it and the
    next prompt goes on."""
    options = soulwire.options(
        *scripts(kind),
        budget={scope: {kind: limit_value(kind)}},
        prices={"*": sdk.ModelPrice(**PRICES["scripted_echo"])},
        yolo=True,
    )
    async with sdk.Session(**options) as session:
        turn = session.prompt("go")
        events = [event async for event in turn]
        assert turn.status == "budget_exceeded"
        exceeded = next(e for e in events if isinstance(e, BudgetExceeded))
        assert (exceeded.scope, exceeded.limit) == (scope, kind)
        report = await session.set_budget(**{scope: {kind: RAISED_VALUE[kind]}})
        assert getattr(report.spent[scope], kind) == exceeded.spent or kind == "time_s"
        result = await session.prompt("continue")
        assert result.status == "finished" and result.final_text == "continued"
