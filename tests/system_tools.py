"""The system programs some tests drive (tmux, Chromium, the shells, bubblewrap, Node.js).

`.ci/run` installs each of them, so a test that needs one fails, not skips, when it is
missing: a skip would turn a machine that lost the tool into a green run of tests that never
ran. To leave such tests out on purpose, deselect them (`-m "not tui"`, `-k`, a path)."""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest


def require(program: str, package: str | None = None) -> str:
    """The path of `program`, or the test fails saying what to install."""
    found = shutil.which(program)
    if found is None:
        pytest.fail(
            f"`{program}` is not installed (apt-get install -y {package or program}; .ci/run installs it)",
            pytrace=False,
        )
    return found


@functools.cache
def bwrap_refused() -> str | None:
    """Why an installed bubblewrap cannot sandbox on this machine (its kernel refuses the
    namespaces: the one reason the sandbox's tests skip), or None."""
    if shutil.which("bwrap") is None:
        return None  # not a reason to skip: `require_bwrap` fails
    try:
        probe = subprocess.run(
            ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot run here: {exc}"
    return None if probe.returncode == 0 else f"bubblewrap cannot sandbox here: {probe.stderr.strip()}"


def require_bwrap() -> None:
    """Fails when bubblewrap is not installed; skips where the kernel refuses it."""
    require("bwrap", "bubblewrap")
    if (reason := bwrap_refused()) is not None:
        pytest.skip(reason)
