"""The cyclic collector during start-up: off from `tune_startup`, back on (with what exists
frozen) at `startup_finished`, or later while start-up work that goes on beside the first
answers (a provider SDK's preload) holds it. Each case runs in a fresh interpreter: the
collector's state is the process's."""

from __future__ import annotations

import subprocess
import sys

_PRELUDE = """
import gc
from soulwire.config.process_env import hold_collector, startup_finished, tune_startup
"""


def _run(code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PRELUDE + code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok", done.stdout


def test_a_hold_keeps_the_collector_off_past_startup_until_released() -> None:
    _run("""
tune_startup()
assert not gc.isenabled()
release = hold_collector()
startup_finished()
assert not gc.isenabled(), "a held collector came back at startup_finished"
frozen = gc.get_freeze_count()
kept = [object() for _ in range(10)]  # made while held: frozen at the release
release()
assert gc.isenabled() and gc.get_freeze_count() > frozen
release()  # a second release changes nothing
assert gc.isenabled()
print("ok")
""")


def test_the_last_of_two_holds_turns_it_back_on() -> None:
    _run("""
tune_startup()
first, second = hold_collector(), hold_collector()
startup_finished()
first()
first()  # (once only: it does not release the other hold)
assert not gc.isenabled()
second()
assert gc.isenabled()
print("ok")
""")


def test_a_hold_released_during_startup_waits_for_startup_finished() -> None:
    _run("""
tune_startup()
hold_collector()()
assert not gc.isenabled(), "start-up is not over"
startup_finished()
assert gc.isenabled()
print("ok")
""")


def test_outside_startup_a_hold_changes_nothing() -> None:
    _run("""
assert gc.isenabled()
release = hold_collector()
assert gc.isenabled()
release()
assert gc.isenabled()
print("ok")
""")
