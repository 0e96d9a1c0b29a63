"""Budget accounting and enforcement (wire/budget.py has the shapes and the scopes' meaning).

One `Ledger` per session holds the limits and what each scope has spent; each soul of the
session's tree (the session's own, every sub-agent and background agent) charges it through
a `Meter`. The soul asks its meter at its safe points:

- before a model call: is a limit reached, or would this call certainly cross the token or
  money limit (its input alone is at least the context the provider last counted)? Then the
  call is not made and the turn ends with `budget_exceeded`;
- after a model call: its usage is charged (the call that crossed a limit is the last one);
- before a step's tool calls: as many run as the tool-call limit leaves; the others, and all
  of them after a call that crossed a limit, get a result saying they were not run;
- while tools run: with `running_tools = "cancel"`, a limit crossed by another soul of the
  tree (a sub-agent's spend) or by the clock cancels them.

What a streaming call spends is known only when it ends: one call in flight may cross a token
or money limit by at most its own response."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from soulwire.errors import SoulwireError
from soulwire.wire.budget import (
    KINDS,
    SCOPES,
    Budget,
    BudgetExceeded,
    BudgetKind,
    BudgetLimits,
    BudgetReport,
    BudgetScope,
    BudgetSpent,
    BudgetUpdate,
    BudgetWarning,
)
from soulwire.wire.pricing import ModelPrice, price_for
from soulwire.wire.types import TokenUsage, ToolReturnValue, WireModel, tool_error

STATE_KEY = "budget_spent"
"""Where state.json keeps the session's and the tree's totals (a resume goes on from them)."""
KEEP_EVERY_S = 1.0
"""While a limit is set, the totals state.json keeps are renewed after a spend at most this
often (and at every turn's end): a state write at every step would cost more than the step."""
UPDATE_EVERY_S = 0.25
"""BudgetUpdate events come at most this often (and at every turn's end, and with every
warning and stop): one at each step of a fast loop would cost more than the accounting."""
_TURN, _SESSION, _TREE = 0, 1, 2


class BudgetError(SoulwireError, ValueError):
    """A budget that cannot be enforced (a money limit for a model without a price)."""


class BudgetStop(SoulwireError):
    """A model call inside a step that the budget does not allow (a compaction's summary, a
    retry, the step's call after a compaction): the step ends there and the turn with
    `budget_exceeded`. The limit has been announced already."""

    def __init__(self, limit: Limit) -> None:
        super().__init__(f"the {limit[1]} budget's {limit[2]} limit is reached")
        self.limit = limit


class Tally:
    """What one scope has spent. Time counts while at least one activity is open."""

    __slots__ = ("active", "priced", "since", "time_s", "tokens", "tool_calls", "usd")

    def __init__(self, spent: BudgetSpent | None = None) -> None:
        self.usd = 0.0 if spent is None else spent.usd or 0.0
        self.priced = spent is None or spent.usd is not None
        self.tokens = 0 if spent is None else spent.tokens
        self.tool_calls = 0 if spent is None else spent.tool_calls
        self.time_s = 0.0 if spent is None else spent.time_s
        self.since: float | None = None
        self.active = 0

    def begin(self, now: float) -> None:
        if self.active == 0:
            self.since = now
        self.active += 1

    def end(self, now: float) -> None:
        self.active -= 1
        if self.active == 0 and self.since is not None:
            self.time_s += now - self.since
            self.since = None

    def elapsed(self, now: float) -> float:
        return self.time_s + (now - self.since if self.since is not None else 0.0)

    def value(self, kind: BudgetKind, now: float) -> float:
        return self.elapsed(now) if kind == "time_s" else getattr(self, kind)

    def spent(self, now: float) -> dict[str, Any]:
        """As `BudgetSpent`'s fields (plain: built at every step while a limit is set)."""
        return {
            "usd": round(self.usd, 6) if self.priced else None,
            "tokens": self.tokens,
            "time_s": round(self.elapsed(now), 3),
            "tool_calls": self.tool_calls,
        }


Limit = tuple[int, BudgetScope, BudgetKind, float]
"""A set limit, flattened for the checks: (scope index, scope, kind, maximum)."""


class Ledger:
    """A session tree's budget: its limits, its tallies and the events it sends."""

    def __init__(
        self,
        budget: Budget,
        prices: Mapping[str, ModelPrice] | None = None,
        emit: Callable[[WireModel], None] = lambda _message: None,
        *,
        saved: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prices = dict(prices or {})
        self.emit = emit
        self.clock = clock
        self.tallies = (Tally(), _restored(saved, "session"), _restored(saved, "tree"))
        self._left_open: Tally | None = (
            _restored(saved, "turn") if isinstance(saved, dict) and "turn" in saved else None
        )
        """What the turn a killed process left open had spent (its continuation goes on from it)."""
        self._price_of: dict[str, ModelPrice | None] = {}
        self._scopes: set[anyio.CancelScope] = set()
        self.budget = budget
        self._limits: list[Limit] = []
        self._tool_limits: list[Limit] = []
        self._spend_limits: list[Limit] = []
        self._warned: set[tuple[BudgetScope, BudgetKind]] = set()
        self._announced: set[tuple[BudgetScope, BudgetKind]] = set()
        self.refused: Limit | None = None
        """The tool-call limit that refused a call in this turn (the turn ends on it)."""
        self.hit: Limit | None = None
        """The last limit found reached (what a tool call that was not run is told)."""
        self._kept_at = self._updated_at = 0.0
        self._persisted: dict[str, Any] = {}
        self.set_budget(budget)

    # -- limits -------------------------------------------------------------
    def set_budget(self, budget: Budget) -> None:
        """Adopt `budget` (warnings and stops are announced again against the new limits)."""
        self.budget = budget
        self._limits = [
            (index, scope, kind, float(value))
            for index, scope in enumerate(SCOPES)
            if (limits := budget.limits(scope)) is not None
            for kind in KINDS
            if (value := getattr(limits, kind)) is not None
        ]
        self._tool_limits = [limit for limit in self._limits if limit[2] == "tool_calls"]
        self._spend_limits = [limit for limit in self._limits if limit[2] != "tool_calls"]
        self._warned.clear()
        self._announced.clear()
        self.refused = self.hit = None
        self._keep()

    @property
    def limited(self) -> bool:
        return bool(self._limits)

    def limits_money(self) -> bool:
        return any(kind == "usd" for _, _, kind, _ in self._limits)

    def update(
        self, update: Budget | None, prices: Mapping[str, ModelPrice] | None = None, *, model: str | None
    ) -> None:
        """Apply a budget update and prices over the current ones; raises BudgetError,
        changing nothing, when a money limit would have no price for `model`."""
        table = {**self.prices, **(prices or {})}
        merged = self.budget.updated(update) if update is not None else self.budget
        Ledger(merged, table).check_model(model)
        self.set_prices(table)
        self.set_budget(merged)

    def set_prices(self, prices: Mapping[str, ModelPrice]) -> None:
        """Price with `prices` (over the built-in list prices) from now on."""
        self.prices = dict(prices)
        self._price_of.clear()

    def price(self, model_name: str) -> ModelPrice | None:
        if model_name not in self._price_of:
            self._price_of[model_name] = price_for(model_name, self.prices)
        return self._price_of[model_name]

    def check_model(self, model_name: str | None) -> None:
        """Raise BudgetError when a money limit is set and `model_name` has no price."""
        if model_name is not None and self.limits_money() and self.price(model_name) is None:
            raise BudgetError(
                f"a money limit needs the price of model {model_name!r}: add it to [prices] in the "
                "config or to a --prices file (USD per million tokens; the key '*' prices any model)"
            )

    # -- spending -----------------------------------------------------------
    def charge(self, usage: TokenUsage, model_name: str, *, own: bool) -> bool:
        """Charge one model call to the turn, the tree, and (a call of the session's own
        soul) the session; True when a limit (not the tool calls') is reached now."""
        price = self.price(model_name)
        return self.charge_spent(usage, price.cost(usage) if price is not None else None, own=own)

    def charge_spent(self, usage: TokenUsage, usd: float | None, *, own: bool) -> bool:
        """Charge tokens and their cost (None: not known, so the money spent is unknown from
        now on); True when a limit (not the tool calls') is reached now."""
        tokens = usage.input + usage.output
        for tally in self.tallies if own else (self.tallies[_TURN], self.tallies[_TREE]):
            tally.tokens += tokens
            if usd is None:
                tally.priced = False
            else:
                tally.usd += usd
        return self._after_spend(self._spend_limits)

    def count_tool_calls(self, n: int, *, own: bool) -> int:
        """Admit up to `n` tool calls (as many as every tool-call limit leaves); returns how
        many may run and counts them."""
        allowed = n
        tallies = self.tallies
        for limit in self._tool_limits:
            index = limit[0]
            if own or index != _SESSION:
                room = max(0, int(limit[3]) - tallies[index].tool_calls)
                if room < allowed:
                    allowed = room
                    self.refused = limit
        for index, tally in enumerate(tallies):
            if own or index != _SESSION:
                tally.tool_calls += allowed
        if self.refused is not None and allowed < n:
            self._announce(self.refused, self.clock())
        elif allowed and self._tool_limits:
            self._after_spend(self._tool_limits, update=False)  # the next BudgetUpdate shows them
        return allowed

    def _after_spend(self, limits: list[Limit], *, update: bool = True) -> bool:
        """Warnings for `limits` past `warn_at`, the stop for those reached (tool calls still
        running are cancelled then if the budget says so), and now and then the spent/remaining
        update; True when one of them (not a tool-call limit) is reached."""
        if not self._limits:
            return False
        now = self.clock()
        if now - self._kept_at >= KEEP_EVERY_S:
            self._keep()
        warn_at = self.budget.warn_at
        tallies = self.tallies
        news = reached = False
        for limit in limits:
            index, scope, kind, maximum = limit
            tally = tallies[index]
            spent = tally.elapsed(now) if kind == "time_s" else getattr(tally, kind)
            if spent < warn_at * maximum:
                continue
            if spent >= maximum and kind != "tool_calls":
                reached = True
                news = news or (scope, kind) not in self._announced
                self._announce(limit, now)
            elif (scope, kind) not in self._warned:
                self._warned.add((scope, kind))
                news = True
                fraction = spent / maximum if maximum else 1.0
                self.emit(BudgetWarning(scope=scope, limit=kind, spent=spent, max=maximum, fraction=fraction))
        if update and (news or now - self._updated_at >= UPDATE_EVERY_S):
            self._send_update(now)
        return reached

    def _send_update(self, now: float) -> None:
        self._updated_at = now
        self.emit(self.report(BudgetUpdate))

    def _announce(self, limit: Limit, now: float) -> None:
        index, scope, kind, maximum = limit
        self.hit = limit
        if (scope, kind) in self._announced:
            return
        self._announced.add((scope, kind))
        spent = self.tallies[index].value(kind, now)
        self.emit(BudgetExceeded(scope=scope, limit=kind, spent=spent, max=maximum))
        if self.budget.running_tools == "cancel":
            for scope_ in list(self._scopes):
                scope_.cancel()

    # -- checks -------------------------------------------------------------
    def reached(self, *, own: bool, floor_tokens: int = 0, floor_usd: float = 0.0) -> Limit | None:
        """The first limit that stops the next model call: reached already, or certainly
        crossed by a call whose input is at least `floor_tokens` (costing `floor_usd`)."""
        if self.refused is not None:
            return self.refused
        now = self.clock()
        tallies = self.tallies
        for limit in self._spend_limits:
            index, _scope, kind, maximum = limit
            if index == _SESSION and not own:
                continue
            tally = tallies[index]
            if kind == "tokens":
                spent, extra = tally.tokens, floor_tokens
            elif kind == "usd":
                spent, extra = tally.usd, floor_usd
            else:
                spent, extra = tally.elapsed(now), 0
            if spent >= maximum or (extra and spent + extra > maximum):
                self._announce(limit, now)
                return limit
        return None

    def deadline(self) -> float:
        """When the clock reaches a time limit (anyio's clock), or +inf."""
        now = self.clock()
        left = min(
            (
                maximum - self.tallies[index].elapsed(now)
                for index, _s, kind, maximum in self._limits
                if kind == "time_s"
            ),
            default=float("inf"),
        )
        return anyio.current_time() + left if left != float("inf") else left

    async def run_tool(self, call: Awaitable[ToolReturnValue]) -> ToolReturnValue:
        """Await one tool call. With `running_tools = "cancel"`, a limit crossed while it
        runs (by another soul of the tree, or the clock) cancels it: its result says so."""
        if self.budget.running_tools != "cancel" or not self._limits:
            return await call
        scope = anyio.CancelScope(deadline=self.deadline())
        self._scopes.add(scope)
        try:
            with scope:
                return await call
        finally:
            self._scopes.discard(scope)
        self.reached(own=False)  # the clock ran out: announced now, not at the next check
        return cancelled_by_budget()

    # -- turns and activities -------------------------------------------------
    def turn_begin(self, *, continued: bool = False) -> None:
        """The session's own turn starts: a new turn tally (`continued`: the turn a killed
        process left open goes on, with what it had spent); the clock runs for all three."""
        now = self.clock()
        left_open, self._left_open = self._left_open, None
        self.tallies = (left_open if continued and left_open is not None else Tally(), *self.tallies[1:])
        self.refused = None
        self._warned = {w for w in self._warned if w[0] != "turn"}
        self._announced.clear()
        for tally in self.tallies:
            tally.begin(now)

    def turn_end(self) -> None:
        now = self.clock()
        for tally in self.tallies:
            tally.end(now)
        self._keep()
        if self._limits:
            self._send_update(now)  # the turn's final figures

    def activity_begin(self) -> None:
        """A background agent starts: the tree's clock runs while it works."""
        self.tallies[_TREE].begin(self.clock())

    def activity_end(self) -> None:
        self.tallies[_TREE].end(self.clock())
        self._keep()

    # -- reports ------------------------------------------------------------
    def report(self, shape: type[BudgetReport] = BudgetReport) -> BudgetReport:
        """The budget, what each scope spent and what it has left (as `shape`)."""
        now = self.clock()
        # Built without validation (the values are ours): this runs at every step.
        spent: dict[BudgetScope, BudgetSpent] = {
            scope: BudgetSpent.model_construct(**self.tallies[i].spent(now)) for i, scope in enumerate(SCOPES)
        }
        left: dict[BudgetScope, dict[str, Any]] = {}
        for index, scope, kind, maximum in self._limits:
            value = max(0.0, maximum - self.tallies[index].value(kind, now))
            left.setdefault(scope, {})[kind] = (
                int(value) if kind in ("tokens", "tool_calls") else round(value, 6)
            )
        remaining = {scope: BudgetLimits.model_construct(**fields) for scope, fields in left.items()}
        return shape.model_construct(budget=self.budget, spent=spent, remaining=remaining)

    def saved(self, fresh: bool = False) -> dict[str, Any]:
        """The totals state.json keeps, and the open turn's (a killed process's turn continued
        elsewhere goes on from it): taken at the end of each turn, and while a limit is set
        after a spend at most every KEEP_EVERY_S (a killed process loses at most that much of
        its spending), or as of now when `fresh`; the time of work still running is not in it."""
        if fresh:
            self._keep()
        return self._persisted

    def _keep(self) -> None:
        self._kept_at = self.clock()
        turn, session, tree = self.tallies
        self._persisted = {
            "session": session.spent(session.since or 0.0),
            "tree": tree.spent(tree.since or 0.0),
        }
        if turn.active:  # a turn is open (its tally begun and not yet ended)
            self._persisted["turn"] = turn.spent(turn.since or 0.0)


def _restored(saved: Any, scope: str) -> Tally:
    """A tally from state.json; anything unreadable starts from zero."""
    from pydantic import ValidationError

    if not isinstance(saved, dict) or not isinstance(saved.get(scope), dict):
        return Tally()
    try:
        return Tally(BudgetSpent.model_validate(saved[scope], strict=True))
    except ValidationError:
        return Tally()


class Meter:
    """One soul's view of the ledger: the session's own soul (`own`) charges the session
    scope too; a sub-agent charges the turn and the tree."""

    __slots__ = ("_crossed", "_last_input", "background", "ledger", "own")

    def __init__(self, ledger: Ledger, *, own: bool = True, background: bool = False) -> None:
        self.ledger = ledger
        self.own = own
        self.background = background
        self._last_input = 0
        self._crossed = False

    def child(self, *, background: bool = False) -> Meter:
        """The meter of a sub-agent of this soul (of a background agent: its time counts)."""
        return Meter(self.ledger, own=False, background=background)

    def turn_begin(self, *, continued: bool = False) -> None:
        if self.own:
            self.ledger.turn_begin(continued=continued)
        elif self.background:
            self.ledger.activity_begin()

    def turn_end(self) -> None:
        if self.own:
            self.ledger.turn_end()
        elif self.background:
            self.ledger.activity_end()

    def stop_before_call(self, context_tokens: int, model_name: str) -> Limit | None:
        """The limit that forbids the next model call, if any. The call's input is at least
        the context the provider counted last (less, after a compaction: `context_tokens`)."""
        ledger = self.ledger
        if not ledger.limited:
            return None
        floor = min(self._last_input, context_tokens)
        price = ledger.price(model_name)
        cheapest = (
            min(price.input, price.cache_read if price.cache_read is not None else price.input)
            if price
            else 0.0
        )
        return ledger.reached(own=self.own, floor_tokens=floor, floor_usd=floor * cheapest / 1_000_000)

    def reached(self) -> Limit | None:
        """The limit reached already (turn and tree; the session too for the session's own soul)
        that stops this soul's next call, if any: what an ACP sub-agent's prompt is checked
        against (its input is not ours to know)."""
        return self.ledger.reached(own=self.own) if self.ledger.limited else None

    def check_call(self, context_tokens: int, model_name: str) -> None:
        """`stop_before_call` for a model call made inside a step (the loop checked before
        the step): raises BudgetStop instead of the call."""
        limit = self.stop_before_call(context_tokens, model_name)
        if limit is not None:
            raise BudgetStop(limit)

    async def run_tool(self, call: Awaitable[ToolReturnValue]) -> ToolReturnValue:
        return await self.ledger.run_tool(call)

    def charge(self, usage: TokenUsage | None, model_name: str) -> None:
        """Charge a model call (a call that reported no usage is not known to have spent)."""
        if usage is None:
            self._crossed = self.reached() is not None
            return
        self._last_input = usage.input + usage.output  # the next call's input holds all of it
        self._crossed = self.ledger.charge(usage, model_name, own=self.own)

    def charge_aside(self, usage: TokenUsage, model_name: str) -> None:
        """Charge a model call outside the steps (compaction's summary) or one that failed
        after the provider counted it: it spends, but says nothing of the next step's input
        nor stops the step's tool calls (the check before the next call sees the limit)."""
        self.ledger.charge(usage, model_name, own=self.own)

    def charge_reported(self, usage: TokenUsage, usd: float | None) -> None:
        """Charge what another agent said its turn spent (an ACP sub-agent: its tokens, and its
        cost when it reports one; its model is not ours to price)."""
        self._crossed = self.ledger.charge_spent(usage, usd, own=self.own)

    def admit_tool_calls(self, n: int) -> int:
        """How many of a step's `n` tool calls may run: none when a limit is reached (by the
        call that asked for them, or by another soul of the tree), else what the tool-call
        limits leave."""
        if not n:
            return 0
        if self._crossed:
            return 0
        return self.ledger.count_tool_calls(n, own=self.own)


def not_run(limit: Limit | None) -> ToolReturnValue:
    """The result of a tool call the budget did not let run."""
    what = "a budget limit" if limit is None else f"the {limit[1]} budget's {limit[2]} limit ({limit[3]:g})"
    return tool_error(
        f"Not run: {what} is reached. The user may raise it and ask you to continue.",
        brief="Budget exceeded",
    )


def cancelled_by_budget() -> ToolReturnValue:
    return tool_error(
        "Cancelled: a budget limit was reached while this call ran. "
        "The user may raise it and ask you to continue.",
        brief="Budget exceeded",
    )


__all__ = [
    "STATE_KEY",
    "BudgetError",
    "BudgetStop",
    "Ledger",
    "Meter",
    "Tally",
    "cancelled_by_budget",
    "not_run",
]
