"""What a run cost: token usage (as the engine reports it) times a per-model price.

`DEFAULT_PRICES` holds a few list prices in USD per million tokens; they change, so treat
them as examples and pass your own (`[prices]` in the config, `--prices`, `Options(prices=…)`;
merged over these). The key `"*"` prices any model not listed. The engine's money budgets,
`--print`'s `cost_usd`, the SDK and fleets all price with this one table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from soulwire.wire.types import TokenUsage


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens. Cache prices default to the input price."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: TokenUsage) -> float:
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        total = (
            usage.input_other * self.input
            + usage.output * self.output
            + usage.input_cache_read * read
            + usage.input_cache_creation * write
        )
        return total / 1_000_000


DEFAULT_PRICES: dict[str, ModelPrice] = {
    # List prices when this table was written (late 2025); override them with Options.prices.
    "kimi-k2": ModelPrice(input=0.60, output=2.50, cache_read=0.15),
    "kimi-k2-turbo": ModelPrice(input=2.40, output=10.00, cache_read=0.60),
    "claude-sonnet-4-5": ModelPrice(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75),
    "claude-haiku-4-5": ModelPrice(input=1.00, output=5.00, cache_read=0.10, cache_write=1.25),
    "gpt-4.1": ModelPrice(input=2.00, output=8.00, cache_read=0.50),
    "gpt-4.1-mini": ModelPrice(input=0.40, output=1.60, cache_read=0.10),
}


_PRICE_FIELDS = frozenset(("input", "output", "cache_read", "cache_write"))


def _is_amount(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def parse_prices(data: object) -> dict[str, ModelPrice]:
    """A price table as JSON gives it — `{"MODEL": {"input": 0.6, "output": 2.5,
    "cache_read": 0.15}, "*": {…}}`, USD per million tokens — as ModelPrices. Raises
    ValueError naming the first entry that is not one."""
    if not isinstance(data, dict):
        raise ValueError("expected an object of model name → price")
    prices: dict[str, ModelPrice] = {}
    for model, price in cast(dict[str, Any], data).items():
        fields = cast(dict[str, Any], price) if isinstance(price, dict) else {}
        numbers = all(_is_amount(value) for value in fields.values())
        if not ({"input", "output"} <= fields.keys() <= _PRICE_FIELDS and numbers):
            raise ValueError(
                f'{model}: expected {{"input": N, "output": N}} and optionally cache_read and cache_write,'
                " in USD per million tokens"
            )
        prices[model] = ModelPrice(**{name: float(value) for name, value in fields.items()})
    return prices


def price_table(prices: Mapping[str, ModelPrice]) -> dict[str, dict[str, float]]:
    """A price table as JSON gives it (what `parse_prices` reads), e.g. for `initialize`."""
    return {model: {k: v for k, v in vars(price).items() if v is not None} for model, price in prices.items()}


def price_for(model: str | None, prices: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of `model`: the user's table first, then the defaults, then a `"*"` entry."""
    table = {**DEFAULT_PRICES, **(prices or {})}
    if model is not None and model in table:
        return table[model]
    return table.get("*")


__all__ = ["DEFAULT_PRICES", "ModelPrice", "parse_prices", "price_for", "price_table"]
