"""What this process's start leaves to itself only, never to the commands it runs: the
environment variables that tune it, and the signal state a parent handed it."""

from __future__ import annotations

import gc
import importlib
import os
import signal
import sys
import types
from collections.abc import Callable
from typing import Any

_OWN: set[str] = set()
_AFTER_STARTUP: list[Callable[[], None]] = []


def set_for_this_process(key: str, value: str) -> None:
    """Set `key` unless the user already did; children will not inherit a value we set."""
    if key not in os.environ:
        os.environ[key] = value
        _OWN.add(key)


def child_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: ours minus process-only settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in _OWN}
    env.update(extra or {})
    return env


CHILD_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")
"""The signals that end a command (a cancel's SIGTERM, a person's Ctrl-C, a hang-up)."""


def _ignore(_signum: int, _frame: object) -> None:
    """Does what SIG_IGN does for this process; unlike SIG_IGN, exec resets it to default."""


def clean_signals_for_children() -> None:
    """Start every child process with the terminating signals at their defaults and unblocked,
    whatever the parent that started the engine did to them.

    A parent may start the engine with SIGTERM/SIGINT ignored (a disposition that survives
    exec) or blocked (the mask always survives fork and exec): the Go SDK's engine, a
    supervisor's. Every tool process would inherit that and shrug off the SIGTERM of a cancel,
    living until the SIGKILL after the grace period. Python's `restore_signals` resets only
    SIGPIPE and SIGXFSZ, and a `preexec_fn` makes every spawn fork instead of vfork (10 to 20 ms
    each in this process, bench/RESULTS.md §9). So the state is fixed once, here, before any
    thread or child exists, in a way this process cannot tell apart: an ignored signal, or a
    blocked one, gets a handler that does nothing (exec resets handlers to the default) and
    is unblocked. A signal the engine handles or leaves at its default is left alone."""
    if not hasattr(signal, "pthread_sigmask"):  # (Windows: no masks, no process groups)
        return
    numbers = [getattr(signal, name) for name in CHILD_SIGNALS if hasattr(signal, name)]
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        for number in numbers:
            if number in blocked or signal.getsignal(number) is signal.SIG_IGN:
                signal.signal(number, _ignore)
    except ValueError:  # not the main thread (an embedding program): its signals are its own
        return
    if blocked.intersection(numbers):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, numbers)


def tune_startup() -> None:
    """Settings for a fast start, made before anything heavy is imported.

    Pydantic's plugin discovery reads the metadata of every installed distribution (tens of
    ms) to find plugins an agent engine never uses. The cyclic garbage collector would walk
    the young heap over and over while thousands of long-lived objects (modules, classes,
    schemas) are created: about a tenth of the start-up time, for nothing to collect. It is
    switched back on by `startup_finished`."""
    set_for_this_process("PYDANTIC_DISABLE_PLUGINS", "__all__")
    gc.disable()


def after_startup(callback: Callable[[], None]) -> None:
    """Run `callback` once start-up is over (at `startup_finished`): work a process needs but
    its first answer must not wait for, such as opening the log file."""
    _AFTER_STARTUP.append(callback)


def startup_finished() -> None:
    """Turn the collector back on, with everything loaded so far moved out of its sight:
    those objects live as long as the process, so later collections skip them."""
    gc.freeze()
    gc.enable()
    while _AFTER_STARTUP:
        _AFTER_STARTUP.pop(0)()


def collect_rarely(*, collect_first: bool = False) -> None:
    """The cyclic collector on for a long-lived process that makes many short-lived objects
    (a server's events, a fleet's messages): what exists now is frozen out of its sight, and
    young collections run every 20,000 allocations instead of 700. CPython's defaults ran a
    collection every few events, and full ones over everything alive (bench/RESULTS.md §10).
    `collect_first`: a full collection before the freeze."""
    if collect_first:
        gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 10)
    gc.enable()


def import_pydantic_plugin_loader() -> None:
    """Import pydantic's plugin loader without `importlib.metadata`.

    The loader binds `importlib.metadata.entry_points` at import time, which pulls in
    zipfile, email, csv, tempfile and the compression modules (~15 ms) for a function that is
    never called while plugins are disabled. A stand-in module serves that one import and is
    removed at once; its `entry_points` defers to the real one, so the loader stays correct
    even if it is called. Does nothing when plugins are enabled or the modules are loaded."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true"):
        return
    if "importlib.metadata" in sys.modules or "pydantic.plugin._loader" in sys.modules:
        return

    def entry_points(**selection: Any) -> Any:
        return importlib.import_module("importlib.metadata").entry_points(**selection)

    stand_in = types.ModuleType("importlib.metadata")
    stand_in.entry_points = entry_points  # type: ignore[attr-defined]
    sys.modules["importlib.metadata"] = stand_in
    try:
        importlib.import_module("pydantic.plugin._loader")
    finally:
        if sys.modules.get("importlib.metadata") is stand_in:
            del sys.modules["importlib.metadata"]
        if getattr(importlib, "metadata", None) is stand_in:
            delattr(importlib, "metadata")
