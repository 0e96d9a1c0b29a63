"""The fleet's own exceptions (a module of their own: the engine start-up path raises them
without loading the results model)."""

from __future__ import annotations

from soulwire.errors import SoulwireError


class FleetError(SoulwireError):
    """The root of the fleet's exceptions."""


class EngineStartError(FleetError):
    """The engine could not run the task (it did not start, a bad configuration, a refused
    session): `failed`. (Not the SDK's `EngineError`, a JSON-RPC error from a running engine.)"""


class SessionNotOpenedError(EngineStartError):
    """A live engine did not open a task's session in time: hung, it is stopped (warm.py)."""


class EngineLostError(FleetError):
    """The engine (or the worker hosting it) died under a task: the task may run again."""


def first_error(exc: BaseException) -> BaseException:
    """The first real error inside nested exception groups (task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


__all__ = ["EngineLostError", "EngineStartError", "FleetError", "SessionNotOpenedError", "first_error"]
