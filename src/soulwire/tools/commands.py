"""Running a configured shell command (a hook) with a payload on stdin and capped output:
the process side of hooks, which the runtime hands to the engine's hook engine."""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import NamedTuple

from soulwire.config.process_env import child_environ
from soulwire.tools.builtin.process import Capture, run_captured

OUTPUT_CAP = 10_000


class CommandOutcome(NamedTuple):
    """How a command ended: its exit code (None if it had to be killed) and the head of its
    output streams."""

    returncode: int | None
    stdout: bytes
    stderr: bytes


async def run_shell_command(command: str, stdin: bytes, timeout: float, cwd: str) -> CommandOutcome:
    """Run `command` with bash in `cwd` (or this process's directory if that is gone),
    `stdin` as its input. Its whole process group is killed on timeout or cancellation.
    Raises OSError when it cannot be started."""
    # A one-byte tail keeps the pipes drained past the cap, so a chatty command still finishes.
    out, err = Capture(OUTPUT_CAP, 1), Capture(OUTPUT_CAP, 1)
    with tempfile.TemporaryFile() as stdin_file:
        stdin_file.write(stdin)
        stdin_file.seek(0)
        finished = await run_captured(
            [_bash(), "-c", command],
            cwd=Path(cwd) if os.path.isdir(cwd) else Path.cwd(),
            timeout=timeout,
            out=out,
            err=err,
            env=child_environ(),
            stdin=stdin_file,
        )
    return CommandOutcome(finished.returncode, bytes(out.head), bytes(err.head))


@cache
def _bash() -> str:
    return shutil.which("bash") or "bash"


__all__ = ["CommandOutcome", "run_shell_command"]
