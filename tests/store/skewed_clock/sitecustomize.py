"""Loaded by a replica started with this directory on PYTHONPATH (tests/store/test_clock_skew.py):
its clock is off by SOULWIRE_TEST_CLOCK_SKEW_S seconds, as a host's would be."""

import os
import time

_skew = float(os.environ.get("SOULWIRE_TEST_CLOCK_SKEW_S", "0"))
if _skew:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _skew
    time.time_ns = lambda: _time_ns() + int(_skew * 1e9)
