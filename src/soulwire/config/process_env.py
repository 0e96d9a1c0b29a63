"""Environment variables that tune this process only, never the commands it runs."""

from __future__ import annotations

import os

_OWN: set[str] = set()


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


def tune_startup() -> None:
    """Skip pydantic's plugin discovery, which reads the metadata of every installed
    distribution (tens of ms) to find plugins an agent engine never uses."""
    set_for_this_process("PYDANTIC_DISABLE_PLUGINS", "__all__")
