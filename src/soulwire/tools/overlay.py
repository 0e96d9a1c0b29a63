"""A turn's overlay: the workspace dirs seen through kernel overlayfs, every write in an upper
layer kept in the session's storage, until the turn's changes are committed or discarded.

bubblewrap 0.8 (Debian's) has no `--overlay`, so the overlay is mounted by a small holder
process in its own unprivileged user and mount namespace (`overlay_mount.py`; Linux ≥ 5.11
lets an unprivileged user mount overlayfs there). Commands enter that namespace with
`nsenter` and run under bubblewrap as before, which binds the merged dir; the file tools
reach the same merged dir through `/proc/PID/root`. One mount for both, so a file a command
changed reads back changed in the file tools and the other way round.

Where the overlay cannot work, `overlay_problem` says why (probed once per process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from soulwire.errors import SoulwireError

HOLDER = Path(__file__).with_name("overlay_mount.py")
_READY_TIMEOUT_S = 10.0
UPPER = "upper"
WORK = "work"
"""The storage's layout, as `soulwire.sessions.checkpoints.overlay` reads it (a sibling layer:
neither imports the other)."""
_UNSAFE = (",", ":", "\\", "\n")
"""Characters overlayfs options cannot carry unescaped: such dirs cannot be layers."""


class OverlayUnavailable(SoulwireError, RuntimeError):
    """The overlay cannot be mounted here (the message says why)."""


def layer_dirs(storage: Path, index: int) -> tuple[Path, Path]:
    """The upper and work dirs of workspace root number `index` in the overlay's storage."""
    return storage / UPPER / str(index), storage / WORK / str(index)


@dataclass(eq=False)
class Overlay:
    """The overlay of one turn (or several, while its changes stay pending)."""

    roots: tuple[Path, ...]
    """The workspace dirs, symlinks resolved (dirs inside another one are covered by it)."""
    storage: Path
    """Where the upper layers live: `upper/N` holds root N's changes."""
    _holder: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @classmethod
    def for_roots(cls, roots: Sequence[Path], storage: Path) -> Overlay:
        """The overlay of `roots` (the work dir first), layers kept in `storage`."""
        real = list(dict.fromkeys(Path(os.path.realpath(r)) for r in roots))
        kept = [r for r in real if not any(r != o and r.is_relative_to(o) for o in real)]
        return cls(tuple(kept), storage)

    @property
    def mounted(self) -> bool:
        return self._holder is not None and self._holder.poll() is None

    @property
    def pid(self) -> int:
        if self._holder is None:
            raise OverlayUnavailable("the overlay is not mounted")
        return self._holder.pid

    def mount(self) -> None:
        """Start the holder and wait until the overlays are mounted (raises OverlayUnavailable)."""
        if self.mounted:
            return
        layers: list[list[str]] = []
        for index, root in enumerate(self.roots):
            if any(c in str(root) for c in _UNSAFE) or any(c in str(self.storage) for c in _UNSAFE):
                raise OverlayUnavailable(f"overlayfs cannot name the dir {root} (',' ':' or '\\' in it)")
            upper, work = layer_dirs(self.storage, index)
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            layers.append([str(root), str(upper), str(work)])
        holder = subprocess.Popen(
            [sys.executable, "-I", "-S", str(HOLDER), json.dumps(layers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal is the engine's, not the holder's
        )
        assert holder.stdout is not None
        line = _read_line(holder, _READY_TIMEOUT_S)
        if line != "ready":
            _stop(holder)
            raise OverlayUnavailable(line.removeprefix("error: ") or "the overlay holder exited")
        self._holder = holder

    def unmount(self) -> None:
        """Let the holder go: its namespace (and the mounts) end with the last process in it."""
        holder, self._holder = self._holder, None
        if holder is not None:
            _stop(holder)

    def covers(self, real: Path) -> Path | None:
        """The root whose overlay holds `real` (a resolved path), or None."""
        return next((r for r in self.roots if real == r or real.is_relative_to(r)), None)

    def view(self, real: Path) -> Path:
        """The path through which this process reads and writes `real` as the turn sees it."""
        if not self.mounted or self.covers(real) is None:
            return real
        return Path(f"/proc/{self.pid}/root{real}")

    def enter_argv(self, cwd: Path) -> list[str]:
        """The argv prefix that runs a command in the overlay's namespace (its uid kept), in
        `cwd` as the namespace sees it: entering a mount namespace moves a process to its
        root, and a dir opened before (`nsenter --wd=DIR`) would be the one under the overlay,
        so a shell inside changes into it."""
        nsenter = shutil.which("nsenter") or "nsenter"
        enter = [nsenter, f"--target={self.pid}", "--user", "--mount", "--preserve-credentials", "--"]
        return [*enter, "/bin/sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", str(cwd)]


def _read_line(holder: subprocess.Popen[bytes], timeout: float) -> str:
    import selectors

    assert holder.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(holder.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return "error: the overlay holder did not answer"
    return holder.stdout.readline().decode("utf-8", "replace").strip()


def _stop(holder: subprocess.Popen[bytes]) -> None:
    try:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=_READY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        holder.kill()
        holder.wait()
    if holder.stdout is not None:
        holder.stdout.close()


@cache
def overlay_problem() -> str | None:
    """Why a turn cannot run in an overlay here, or None when it can: mounts a throwaway
    overlay and runs one command through it."""
    if not sys.platform.startswith("linux"):
        return f"the overlay needs Linux; this system is {sys.platform}"
    if shutil.which("nsenter") is None:
        return "`nsenter` (util-linux) is not installed"
    scratch = Path(tempfile.mkdtemp(prefix="soulwire-overlay-probe-"))
    try:
        (scratch / "lower").mkdir()
        probe = Overlay.for_roots([scratch / "lower"], scratch / "layers")
        try:
            probe.mount()
        except OverlayUnavailable as exc:
            return f"overlayfs cannot be mounted in a user namespace (Linux ≥ 5.11 needed): {exc}"
        try:
            done = subprocess.run(
                [*probe.enter_argv(scratch / "lower"), "sh", "-c", "echo x > probe"],
                capture_output=True,
                timeout=_READY_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot enter the overlay's namespace: {exc}"
        finally:
            probe.unmount()
        if done.returncode != 0 or not (scratch / "layers" / UPPER / "0" / "probe").is_file():
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"cannot enter the overlay's namespace: {detail[-1] if detail else done.returncode}"
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
