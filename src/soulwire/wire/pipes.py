"""A child process spoken to in JSON lines, as a message transport (used to drive other
agents over ACP: the Agent tool's delegates, fleet tasks on an ACP agent)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

_LINE_LIMIT = 64 << 20


class JsonLinesPipe:
    """JSON-RPC messages over a child process's stdin/stdout, one per line (the ACP SDK's
    `Transport` shape: send / receive / close). A line that is not a JSON object ends the
    stream (the other side is not speaking JSON-RPC): `problem` says why."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdout is not None and process.stdin is not None
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self.problem: str | None = None

    async def send(self, message: dict[str, Any]) -> None:
        try:
            await self._stdin.send((json.dumps(message, separators=(",", ":")) + "\n").encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise ConnectionError(f"the process's input is closed: {exc}") from None

    async def receive(self) -> dict[str, Any] | None:
        while True:
            try:
                line = await self._stdout.receive_until(b"\n", _LINE_LIMIT)
            except (
                anyio.EndOfStream,
                anyio.IncompleteRead,
                anyio.ClosedResourceError,
                anyio.BrokenResourceError,
            ):
                return None
            except anyio.DelimiterNotFound:
                self.problem = "the process wrote a line longer than 64 MiB"
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                self.problem = f"the process wrote something that is not JSON-RPC: {line[:80]!r}"
                return None
            if not isinstance(message, dict):
                self.problem = f"the process wrote something that is not JSON-RPC: {line[:80]!r}"
                return None
            return message

    async def close(self) -> None:
        try:
            await self._stdin.aclose()
        except (OSError, anyio.BrokenResourceError):
            pass


__all__ = ["JsonLinesPipe"]
