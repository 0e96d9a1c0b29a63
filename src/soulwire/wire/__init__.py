"""The Wire protocol: pure data types, envelope serde, JSON-RPC framing and schema export.

Importing this package is cheap: the pydantic models load on first attribute access, so the
lean start-up path can use `soulwire.wire.jsonrpc` without paying for them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

PROTOCOL_VERSION = "1.10"
"""The Wire protocol version this engine implements in full (see `INTRODUCED_IN`)."""

if TYPE_CHECKING:
    from soulwire.wire.budget import *  # noqa: F403
    from soulwire.wire.messages import *  # noqa: F403
    from soulwire.wire.methods import *  # noqa: F403
    from soulwire.wire.types import *  # noqa: F403

_HOMES = ("soulwire.wire.types", "soulwire.wire.messages", "soulwire.wire.methods", "soulwire.wire.budget")


_SUBMODULES = frozenset(
    {
        "jsonrpc",
        "lines",
        "fold",
        "peer",
        "streams",
        "serde",
        "messages",
        "methods",
        "types",
        "budget",
        "pricing",
    }
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # `from soulwire.wire import jsonrpc` must not load the models
        return importlib.import_module(f"soulwire.wire.{name}")
    for home in _HOMES:
        module = importlib.import_module(home)
        if hasattr(module, name):
            value = getattr(module, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'soulwire.wire' has no attribute {name!r}")
