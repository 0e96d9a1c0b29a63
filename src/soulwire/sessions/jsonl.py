"""Append-only JSON-lines files.

Writers put one batch of whole records into one write(2) on a file opened with O_APPEND, so a
process killed at any moment leaves at most one partial last line. Readers skip blank and
malformed lines with a warning, and the next writer first ends such a partial line, so the
records appended after a crash never fuse with it.

Stdlib only at import time: the lean start-up path uses this module."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from soulwire.logtags import FILE_ONLY

_encoder = json.JSONEncoder(ensure_ascii=False)  # ", " and ": " separators, as the reference writes
encode_record = _encoder.encode
READ_CHUNK = 1 << 20

Decoder = Callable[[bytes], Any]
Warn = Callable[[str], None]


_EARLY_WARNINGS: list[str] = []
"""Warnings given before the log file was set up (it is, at the end of start-up)."""


def warn_stderr(text: str) -> None:
    """A warning for the person, on stderr, and in the log file too: a served or fleet
    engine's stderr is seldom read, a bug report's log file is. One given during start-up,
    before the CLI sets the file up, is written there when it does (`log_early_warnings`)."""
    sys.stderr.write(f"soulwire: {text}\n")
    import logging  # (here: warnings are rare, and this module stays off logging's import)

    logger = logging.getLogger("soulwire")
    if logger.handlers:  # (else Python would print it to stderr a second time)
        logger.getChild("diagnostics").warning(text, extra={FILE_ONLY: True})
    elif len(_EARLY_WARNINGS) < 100:
        _EARLY_WARNINGS.append(text)


def log_early_warnings() -> None:
    """Write the warnings given before the log file was set up to it (once it is)."""
    import logging

    logger = logging.getLogger("soulwire.diagnostics")
    while _EARLY_WARNINGS:
        logger.warning(_EARLY_WARNINGS.pop(0), extra={FILE_ONLY: True})


def fast_decoder() -> Decoder:
    """The fastest available JSON decoder (pydantic-core's parser is ~2.5x the stdlib's)."""
    try:
        from pydantic_core import from_json
    except ImportError:  # pragma: no cover - pydantic is a dependency
        return json.loads
    return from_json


class JsonlAppender:
    """Appends records to a file opened lazily with O_APPEND and mode 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            ensure_private_dir(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            _end_partial_line(fd)
            self._fd = fd
        return self._fd

    def is_empty(self) -> bool:
        try:
            return self.path.stat().st_size == 0
        except FileNotFoundError:
            return True

    def append(self, record: dict[str, Any]) -> None:
        self.append_many([record])

    def append_many(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        data = "".join(encode_record(r) + "\n" for r in records).encode("utf-8")
        write_all(self._open(), data)

    def sync(self) -> None:
        """Flush to stable storage (survives a power cut, not just a killed process)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _end_partial_line(fd: int) -> None:
    """A crash may have left a last line without its newline: end it, so it stays one
    (skipped) malformed line instead of swallowing the next record."""
    size = os.lseek(fd, 0, os.SEEK_END)
    if size and os.pread(fd, 1, size - 1) != b"\n":
        write_all(fd, b"\n")


def ensure_private_dir(path: Path) -> Path:
    """Create a directory and its missing parents, each readable by the user only."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
    return path


def iter_lines(path: Path, *, chunk_size: int = READ_CHUNK) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a file read in large chunks: bounded memory, few syscalls, and
    linear time however long a line is. A final line without a newline is yielded too (it may
    be partial)."""
    try:
        handle = path.open("rb", buffering=0)
    except FileNotFoundError:
        return
    number = 0
    pending: list[bytes] = []  # pieces of a line that spans chunks, joined once it ends
    with handle:
        while chunk := handle.read(chunk_size):
            if chunk.find(b"\n") < 0:
                pending.append(chunk)
                continue
            lines = chunk.split(b"\n")
            if pending:
                pending.append(lines[0])
                lines[0] = b"".join(pending)
            tail = lines.pop()
            pending = [tail] if tail else []
            for line in lines:
                number += 1
                yield number, line
    if pending:
        yield number + 1, b"".join(pending)


def read_jsonl(
    path: Path, *, decode: Decoder = json.loads, warn: Warn = warn_stderr
) -> Iterator[dict[str, Any]]:
    """Records (JSON objects) of a JSON-lines file; blank lines are skipped silently,
    malformed ones with a warning."""
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            record = decode(line)
        except ValueError:
            warn(f"skipping malformed line {number} of {path}")
            continue
        if isinstance(record, dict):
            yield record
        else:
            warn(f"skipping line {number} of {path}: not a JSON object")


def last_lines(path: Path, *, contains: tuple[bytes, ...], chunk_size: int = 1 << 16) -> Iterator[bytes]:
    """Lines containing any of `contains`, from the end of the file backwards. Only the tail
    that is needed is read."""
    try:
        handle = path.open("rb", buffering=0)
    except FileNotFoundError:
        return
    with handle:
        position = handle.seek(0, os.SEEK_END)
        tail = b""
        while position > 0:
            step = min(chunk_size, position)
            position -= step
            handle.seek(position)
            block = handle.read(step) + tail
            lines = block.split(b"\n")
            tail = lines.pop(0) if position > 0 else b""
            for line in reversed(lines):
                if any(needle in line for needle in contains):
                    yield line
        if tail and any(needle in tail for needle in contains):
            yield tail
