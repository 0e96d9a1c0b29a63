"""The price table, as the SDK has always exported it (it lives in `soulwire.wire.pricing`,
beside the budgets that the engine enforces with it)."""

from __future__ import annotations

from soulwire.wire.pricing import DEFAULT_PRICES, ModelPrice, parse_prices, price_for

__all__ = ["DEFAULT_PRICES", "ModelPrice", "parse_prices", "price_for"]
