"""The fleet's own exceptions (a module of their own: the engine start-up path raises them
without loading the results model)."""

from __future__ import annotations


class EngineError(Exception):
    """The engine could not run the task (a bad configuration, a refused session): `failed`."""


class SessionNotOpenedError(EngineError):
    """A live engine did not open a task's session in time: hung, it is stopped (warm.py)."""


class EngineLostError(Exception):
    """The engine (or the worker hosting it) died under a task: the task may run again."""


def first_error(exc: BaseException) -> BaseException:
    """The first real error inside nested exception groups (task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


__all__ = ["EngineError", "EngineLostError", "SessionNotOpenedError", "first_error"]
