"""The `--budget-*` and `--prices` flags (the main command's and a fleet's): parsed here without
pydantic, and handed on in the shape of the config's `[budgets]` (wire/budget.py) and `[prices]`."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from soulwire.usage import UsageError

SCOPES = ("turn", "session", "tree")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """An argparse type: seconds, or a number with s, m or h (`90`, `90s`, `15m`, `2h`)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text.lower())
    if match is None or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90, 90s, 15m or 2h, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def amount(text: str) -> float:
    """An argparse type: a number ≥ 0 (USD)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid amount: {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"must be ≥ 0, got {text}")
    return value


def count(text: str) -> int:
    """An argparse type: a whole number ≥ 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be ≥ 0, got {value}")
    return value


def add_budget_flags(add: Callable[..., Any], *, what: str = "the session", prices: bool = True) -> None:
    """Add `--budget-usd/-tokens/-time/-tool-calls/-scope` and (`prices`) `--prices` to a parser."""
    add("--budget-usd", type=amount, metavar="USD", help=f"money {what} may spend (priced by model)")
    add("--budget-tokens", type=count, metavar="N", help=f"input + output tokens {what} may use")
    add("--budget-time", type=duration, metavar="DURATION", help=f"wall time {what} may work (90s, 15m, 2h)")
    add("--budget-tool-calls", type=count, metavar="N", help=f"tool calls {what} may run")
    add(
        "--budget-scope",
        choices=SCOPES,
        help="what the --budget-* limits count: each turn, the session's own calls, or the tree "
        "(the session with its sub-agents; the default)",
    )
    if not prices:
        return
    add(
        "--prices",
        metavar="PRICES.json",
        help='model prices, USD per million tokens: {"MODEL": {"input": 0.6, "output": 2.5, '
        '"cache_read": 0.15}, "*": {…}} (over [prices] and the built-in list prices)',
    )


def budget_limits(args: argparse.Namespace) -> dict[str, Any]:
    """The limits the flags set, as `BudgetLimits` fields (empty: none)."""
    limits = {
        "usd": args.budget_usd,
        "tokens": args.budget_tokens,
        "time_s": args.budget_time,
        "tool_calls": args.budget_tool_calls,
    }
    return {kind: value for kind, value in limits.items() if value is not None}


def scoped_limits(args: argparse.Namespace) -> dict[str, Any]:
    """`{scope: limits}` as the flags set them (empty: none); UsageError for a `--budget-scope`
    without a limit."""
    limits = budget_limits(args)
    if args.budget_scope and not limits:
        raise UsageError("--budget-scope needs a limit: --budget-usd, --budget-tokens, --budget-time or "
                         "--budget-tool-calls")  # fmt: skip
    return {args.budget_scope or "tree": limits} if limits else {}


def apply_budget_flags(args: argparse.Namespace, raw_config: dict[str, Any]) -> None:
    """Put the flags' limits and prices into a raw configuration, over its own (the flags
    win); UsageError for a `--budget-scope` without a limit or an unreadable `--prices`."""
    limits = budget_limits(args)
    scoped_limits(args)
    if limits:
        budgets = raw_config.setdefault("budgets", {})
        if not isinstance(budgets, dict):
            return  # a malformed [budgets]: the config's validation names it
        scope = args.budget_scope or "tree"
        current = cast(dict[str, Any], budgets).get(scope)
        budgets[scope] = {**(current if isinstance(current, dict) else {}), **limits}
    if args.prices:
        table = raw_config.setdefault("prices", {})
        if isinstance(table, dict):
            cast(dict[str, Any], table).update(read_prices(Path(args.prices)))


def read_prices(path: Path) -> dict[str, Any]:
    """A `--prices` file's JSON object (checked by the config as `[prices]`)."""
    try:
        data = json.loads(path.expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not JSON ({exc})"
        raise UsageError(f"--prices {path}: {reason}", point_to_help=False) from None
    from soulwire.wire.pricing import parse_prices  # only with --prices: it loads pydantic

    try:
        parse_prices(data)
    except ValueError as exc:
        raise UsageError(f"--prices {path}: {exc}", point_to_help=False) from None
    return cast(dict[str, Any], data)


__all__ = [
    "add_budget_flags", "amount", "apply_budget_flags", "budget_limits", "count", "duration", "read_prices",
]  # fmt: skip
