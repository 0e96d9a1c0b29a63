"""Large payloads by reference: content-addressed files under `<share>/blobs/`, so that no
message on the wire exceeds what a client negotiated. A client reads a blob back in chunks
(`blob/read`) or whole over HTTP."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from soulwire.sessions.jsonl import ensure_private_dir

BLOB_ID = re.compile(r"^[0-9a-f]{64}$")
PREVIEW_CHARS = 1000
MAX_CHUNK = 1 << 18


class BlobStore:
    """Write-once files named by the sha256 of their content."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, blob_id: str) -> Path | None:
        """The file of a well-formed id that exists, else None."""
        if not BLOB_ID.match(blob_id):
            return None
        path = self.root / blob_id[:2] / blob_id
        return path if path.is_file() else None

    def put(self, data: bytes) -> str:
        blob_id = hashlib.sha256(data).hexdigest()
        directory = self.root / blob_id[:2]
        target = directory / blob_id
        if target.exists():
            return blob_id
        ensure_private_dir(directory)
        tmp = directory / f".{blob_id}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, target)
        return blob_id

    def read(self, blob_id: str, offset: int, length: int) -> tuple[bytes, int] | None:
        """(up to `length` bytes from `offset`, the blob's size), or None for no such blob."""
        path = self.path(blob_id)
        if path is None:
            return None
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(offset)
            return handle.read(min(length, MAX_CHUNK)), size


def preview(data: bytes) -> str:
    """The start of a payload, as text, for a client that shows something before it reads."""
    return data[: PREVIEW_CHARS * 4].decode("utf-8", "ignore")[:PREVIEW_CHARS]


__all__ = ["MAX_CHUNK", "BlobStore", "preview"]
