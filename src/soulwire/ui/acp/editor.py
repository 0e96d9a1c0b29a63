"""The editor's side of the tools: files through `fs/read_text_file` and `fs/write_text_file`,
so the agent reads and edits what the user sees (unsaved changes included), and Shell commands
in the editor's terminals."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from acp import RequestError
from acp.schema import EnvVariable

from soulwire.tools.base import CommandResult

_ENCODING, _ERRORS = "utf-8", "surrogateescape"


def _disk_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode(_ENCODING, _ERRORS)
    except FileNotFoundError:
        return None


class EditorFiles:
    """A `FileAccess` for the engine's file tools over the editor's ACP client methods. What
    the editor did not declare (or cannot serve: a file it does not know) is the disk's."""

    def __init__(self, client: Any, session_id: str, *, read: bool, write: bool) -> None:
        self._client = client
        self._session_id = session_id
        self._read = read
        self._write = write

    async def read_text(self, path: Path) -> str | None:
        if self._read:
            try:
                response = await self._client.read_text_file(session_id=self._session_id, path=str(path))
                return str(response.content)
            except (RequestError, ValueError):
                pass  # e.g. a file that does not exist yet: the disk says so
        return _disk_text(path)

    async def write_text(self, path: Path, text: str) -> None:
        if not self._write:
            path.write_bytes(text.encode(_ENCODING, _ERRORS))
            return
        try:
            await self._client.write_text_file(session_id=self._session_id, path=str(path), content=text)
        except (RequestError, ConnectionError, ValueError) as exc:
            raise OSError(f"the editor could not write it: {exc}") from None


_OUTPUT_LIMIT = 1 << 20  # bytes of a command's output the editor keeps for us
_STOP_WAIT_S = 1.0  # how long a cancelled command's kill/release may take


def _returncode(exit_code: int | None, signal_name: str | None) -> int | None:
    if exit_code is not None:
        return exit_code
    if signal_name:
        try:
            return -int(signal.Signals[signal_name if signal_name.startswith("SIG") else f"SIG{signal_name}"])
        except KeyError:
            return -1
    return None


class EditorTerminal:
    """A `CommandRunner` for Shell over the editor's terminals (`terminal/create`,
    `wait_for_exit`, `output`, `kill`, `release`): the user watches the command in the editor,
    the model gets its output. A cancelled call kills the command before it returns."""

    def __init__(self, client: Any, session_id: str, show: Callable[[str, str], None]) -> None:
        self._client = client
        self._session_id = session_id
        self._show = show  # (tool call id, terminal id): embed the terminal in the call

    async def run(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float, tool_call_id: str
    ) -> CommandResult:
        ids = {"session_id": self._session_id}
        try:
            created = await self._client.create_terminal(
                command=argv[0],
                args=argv[1:],
                cwd=str(cwd),
                env=[EnvVariable(name=k, value=v) for k, v in env.items()],
                output_byte_limit=_OUTPUT_LIMIT,
                **ids,
            )
        except (RequestError, ConnectionError, ValueError) as exc:
            return CommandResult(output=f"The editor could not start the command: {exc}", returncode=127)
        ids["terminal_id"] = created.terminal_id
        self._show(tool_call_id, created.terminal_id)
        try:
            timed_out, returncode = False, None
            with anyio.move_on_after(timeout) as deadline:
                status = await self._client.wait_for_terminal_exit(**ids)
                returncode = _returncode(status.exit_code, status.signal)
            if deadline.cancelled_caught:
                timed_out = True
                await self._client.kill_terminal(**ids)
            output = await self._client.terminal_output(**ids)
            return CommandResult(output.output, returncode, timed_out=timed_out, truncated=output.truncated)
        except (RequestError, ConnectionError, ValueError) as exc:
            return CommandResult(output=f"The editor's terminal failed: {exc}", returncode=1)
        except BaseException:
            with anyio.move_on_after(_STOP_WAIT_S, shield=True):
                await self._client.kill_terminal(**ids)
            raise
        finally:
            with anyio.move_on_after(_STOP_WAIT_S, shield=True):
                try:
                    await self._client.release_terminal(**ids)
                except (RequestError, ConnectionError, ValueError):
                    pass
