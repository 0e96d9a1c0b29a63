"""The engine as a child process: spawn it in its own process group, write lines to its
stdin, hand its stdout to a callback in batches of complete lines, keep the tail of its
stderr for error messages, and end it without leaving anything behind."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import signal
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from soulwire.sdk.errors import EngineExitedError, EngineNotFoundError

log = logging.getLogger("soulwire.sdk")

READ_CHUNK = 1 << 18
"""Bytes asked for per read: large enough that a fast stream costs one wake-up per batch."""
STDERR_TAIL_BYTES = 16 * 1024
TERM_GRACE_S = 2.0
_POSIX = sys.platform != "win32"

LinesCallback = Callable[[list[bytes]], None]


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
    """One running engine. Create with `await EngineProcess.spawn(...)`."""

    def __init__(self, proc: asyncio.subprocess.Process, argv: Sequence[str]) -> None:
        self._proc = proc
        self.argv = list(argv)
        self._stderr_tail = bytearray()
        self._on_stderr: Callable[[str], None] | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._stdin_closed = False
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
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(env),
                cwd=cwd,
                start_new_session=_POSIX,
                limit=READ_CHUNK,
            )
        except FileNotFoundError as exc:
            raise EngineNotFoundError(argv[0], exc.strerror or "no such file") from exc
        except PermissionError as exc:
            raise EngineNotFoundError(argv[0], "not executable") from exc
        except NotADirectoryError as exc:
            raise EngineNotFoundError(str(cwd), "work dir is not a directory") from exc
        engine = cls(proc, argv)
        engine._on_stderr = on_stderr
        engine._stderr_task = asyncio.get_running_loop().create_task(engine._pump_stderr())
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

    # -- stdin ------------------------------------------------------------------
    @property
    def writable(self) -> bool:
        stdin = self._proc.stdin
        return not self._stdin_closed and stdin is not None and not stdin.is_closing()

    def write(self, data: bytes) -> bool:
        """Queue bytes for the engine's stdin; False when the pipe is gone."""
        stdin = self._proc.stdin
        if not self.writable or stdin is None:
            return False
        try:
            stdin.write(data)
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            return False
        return True

    def close_stdin(self) -> None:
        """End of input: a Wire engine shuts down cleanly when its stdin reaches EOF."""
        if self._stdin_closed:
            return
        self._stdin_closed = True
        stdin = self._proc.stdin
        if stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
                stdin.close()

    # -- stdout / stderr --------------------------------------------------------
    async def pump_stdout(self, on_lines: LinesCallback) -> None:
        """Read stdout until EOF, calling `on_lines` with every batch of complete lines."""
        stdout = self._proc.stdout
        assert stdout is not None
        partial: list[bytes] = []
        while True:
            chunk = await stdout.read(READ_CHUNK)
            if not chunk:
                break
            lines = chunk.split(b"\n")
            if partial:
                partial.append(lines[0])
                if len(lines) == 1:
                    continue
                lines[0] = b"".join(partial)
                partial.clear()
            last = lines.pop()
            if last:
                partial.append(last)
            if lines:
                on_lines(lines)
        if partial:
            on_lines([b"".join(partial)])

    async def _pump_stderr(self) -> None:
        stderr = self._proc.stderr
        assert stderr is not None
        tail = self._stderr_tail
        decoder = codecs.getincrementaldecoder("utf-8")("replace")  # chunks may split a character
        while True:
            chunk = await stderr.read(65536)
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

    async def wait(self) -> int:
        return await self._proc.wait()

    # -- shutdown ---------------------------------------------------------------
    async def close(self, timeout: float) -> int | None:
        """stdin EOF, up to `timeout` s for a clean exit, then SIGTERM, then SIGKILL; finally
        anything left in the engine's process group is killed. Safe to call twice and safe
        under cancellation (the kill happens even if the caller is cancelled)."""
        try:
            self.close_stdin()
            if self._proc.returncode is None:
                try:
                    await asyncio.wait_for(self._proc.wait(), timeout)
                except TimeoutError:
                    log.warning("engine did not exit %.1f s after stdin EOF; terminating it", timeout)
                    _kill_group(self._proc.pid, signal.SIGTERM)
                    try:
                        await asyncio.wait_for(self._proc.wait(), TERM_GRACE_S)
                    except TimeoutError:
                        _kill_group(self._proc.pid, signal.SIGKILL)
                        await self._proc.wait()
        finally:
            # Whether the leader is still running (the caller was cancelled) or gone, nothing
            # of its group may outlive it: a tool process left behind would be an orphan.
            _kill_group(self._proc.pid, signal.SIGKILL)
            self._finalizer.detach()
        if self._stderr_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        return self._proc.returncode


__all__ = ["EngineProcess"]
