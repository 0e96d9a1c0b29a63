"""The engine as a child process: spawn it in its own process group, write lines to its
stdin, read its stdout as a message stream, keep the tail of its
stderr for error messages, and end it without leaving anything behind."""

from __future__ import annotations

import codecs
import logging
import os
import signal
import subprocess
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
import anyio.abc

from soulwire.sdk.errors import EngineExitedError, EngineNotFoundError
from soulwire.wire.streams import CLOSED_ERRORS, ProcessStream

log = logging.getLogger("soulwire.sdk")

STDERR_TAIL_BYTES = 16 * 1024
TERM_GRACE_S = 2.0
_POSIX = sys.platform != "win32"


def _kill_group(pid: int, sig: int) -> None:
    """Signal the engine's whole process group (its tools' processes included)."""
    try:
        if _POSIX:
            os.killpg(pid, sig)
        else:  # pragma: no cover - no process groups
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class EngineProcess:
    """One running engine. Create with `await EngineProcess.spawn(...)`; run `pump_stderr`
    in a task while it lives."""

    def __init__(self, proc: anyio.abc.Process, argv: Sequence[str]) -> None:
        self._proc = proc
        self.argv = list(argv)
        self.stream = ProcessStream(proc)
        """Its stdin/stdout as a message stream."""
        self._stderr_tail = bytearray()
        self._on_stderr: Callable[[str], None] | None = None
        self._stderr_done = anyio.Event()
        # Safety net for a session that is never closed: the group dies with the SDK's process.
        self._finalizer = weakref.finalize(self, _kill_group, proc.pid, signal.SIGKILL)

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | Path | None,
        on_stderr: Callable[[str], None] | None = None,
    ) -> EngineProcess:
        """Start the engine; raises EngineNotFoundError when it cannot be executed."""
        try:
            proc = await anyio.open_process(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env),
                cwd=cwd,
                start_new_session=_POSIX,
            )
        except FileNotFoundError as exc:
            missing = exc.filename if exc.filename is not None else argv[0]
            if cwd is not None and not Path(cwd).is_dir():
                raise EngineNotFoundError(str(cwd), "work dir is not a directory") from exc
            raise EngineNotFoundError(str(missing), exc.strerror or "no such file") from exc
        except PermissionError as exc:
            raise EngineNotFoundError(argv[0], "not executable") from exc
        except NotADirectoryError as exc:
            raise EngineNotFoundError(str(cwd), "work dir is not a directory") from exc
        engine = cls(proc, argv)
        engine._on_stderr = on_stderr
        return engine

    # -- state ------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def stderr_tail(self) -> str:
        return self._stderr_tail.decode("utf-8", "replace")

    def exited_error(self, during: str = "") -> EngineExitedError:
        return EngineExitedError(self._proc.returncode, self.stderr_tail(), during=during)

    # -- stderr -----------------------------------------------------------------
    async def pump_stderr(self) -> None:
        """Keep the tail of stderr (for error messages) and pass it to `on_stderr`."""
        stderr = self._proc.stderr
        assert stderr is not None
        tail = self._stderr_tail
        decoder = codecs.getincrementaldecoder("utf-8")("replace")  # chunks may split a character
        try:
            while True:
                try:
                    chunk = await stderr.receive(65536)
                except CLOSED_ERRORS:
                    chunk = b""
                tail += chunk
                if len(tail) > STDERR_TAIL_BYTES:
                    del tail[: len(tail) - STDERR_TAIL_BYTES]
                if self._on_stderr is not None:
                    text = decoder.decode(chunk, final=not chunk)
                    try:
                        if text:
                            self._on_stderr(text)
                    except Exception:  # a logging callback must not kill the pump
                        log.exception("on_stderr callback failed")
                if not chunk:
                    return
        finally:
            self._stderr_done.set()

    async def wait(self) -> int:
        return await self._proc.wait()

    # -- shutdown ---------------------------------------------------------------
    async def close(self, timeout: float) -> int | None:
        """stdin EOF, up to `timeout` s for a clean exit, then SIGTERM, then SIGKILL; finally
        anything left in the engine's process group is killed. Safe to call twice and safe
        under cancellation (the kill happens even if the caller is cancelled)."""
        try:
            with anyio.CancelScope(shield=True):
                await self.stream.aclose()
            if self._proc.returncode is None:
                with anyio.move_on_after(timeout) as waited:
                    await self._proc.wait()
                if waited.cancelled_caught:
                    log.warning("engine did not exit %.1f s after stdin EOF; terminating it", timeout)
                    _kill_group(self._proc.pid, signal.SIGTERM)
                    with anyio.move_on_after(TERM_GRACE_S) as termed:
                        await self._proc.wait()
                    if termed.cancelled_caught:
                        _kill_group(self._proc.pid, signal.SIGKILL)
                        await self._proc.wait()
        finally:
            # Whether the leader is still running (the caller was cancelled) or gone, nothing
            # of its group may outlive it: a tool process left behind would be an orphan.
            _kill_group(self._proc.pid, signal.SIGKILL)
            self._finalizer.detach()
        with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
            await self._stderr_done.wait()
            await self._proc.aclose()  # the pipes' transports, before the event loop goes
        return self._proc.returncode


__all__ = ["EngineProcess"]
