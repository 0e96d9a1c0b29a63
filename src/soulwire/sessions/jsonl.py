"""Append-only JSON-lines files: one record per write(2), so a crash leaves at most one
partial last line, which readers skip."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_encoder = json.JSONEncoder(ensure_ascii=False)  # ", " and ": " separators, as the reference writes


class JsonlAppender:
    """Appends records to a file opened lazily with O_APPEND and mode 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
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
        data = "".join(_encoder.encode(r) + "\n" for r in records).encode("utf-8")
        fd = self._open()
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSON-lines file, skipping blank and malformed lines (with a warning)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                sys.stderr.write(f"soulwire: skipping malformed line {number} of {path}\n")
                continue
            if isinstance(record, dict):
                yield record
