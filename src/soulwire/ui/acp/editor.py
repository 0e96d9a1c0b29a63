"""The editor's side of the file tools: `fs/read_text_file` and `fs/write_text_file`, so the
agent reads and edits what the user sees, unsaved changes included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import RequestError

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
