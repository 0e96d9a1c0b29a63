"""`ReadFile`: numbered lines of a text file, from a line offset or from the end."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from io import BufferedReader, BytesIO
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import Field, field_validator

from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.tools.builtin.output import MAX_LINE_CHARS, cap_line
from soulwire.tools.builtin.paths import Target, file_to_read
from soulwire.wire.types import ToolReturnValue, tool_error, tool_ok

MAX_LINES = 1000
MAX_TAIL_LINES = 1000
MAX_BYTES = 100 * 1024
_BINARY_SNIFF_BYTES = 8192


class ReadFileParams(ToolParams):
    path: str = Field(description="The file: absolute, or relative to the working directory.")
    line_offset: int = Field(
        default=1,
        ge=-MAX_TAIL_LINES,
        description="First line to read, 1-based. Negative counts from the end: -50 reads the last 50 lines.",
    )
    n_lines: int = Field(
        default=MAX_LINES, ge=1, description=f"How many lines to read (at most {MAX_LINES} per call)."
    )

    @field_validator("line_offset")
    @classmethod
    def _not_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("line_offset cannot be 0: use 1 for the first line or -1 for the last")
        return value


@dataclass
class _Slice:
    start: int = 1
    total: int = 0
    lines: list[bytes] = field(default_factory=list[bytes])
    size: int = 0
    hit_byte_cap: bool = False
    binary: bool = False

    def add(self, line: bytes) -> bool:
        """Keep `line` unless it would pass MAX_BYTES (the first line is always kept); False
        once the cap is hit."""
        if self.hit_byte_cap:
            return False
        if self.size + len(line) > MAX_BYTES and self.lines:
            self.hit_byte_cap = True
            return False
        self.lines.append(line)
        self.size += len(line)
        return True


def _read_slice(path: Path, offset: int, count: int) -> _Slice:
    """Lines [offset, offset+count) — or the last -offset lines — and the file's line count."""
    with path.open("rb") as handle:
        return _slice(handle, offset, count)


def _slice(handle: BufferedReader[Any], offset: int, count: int) -> _Slice:
    result = _Slice()
    if b"\0" in handle.peek(_BINARY_SNIFF_BYTES)[:_BINARY_SNIFF_BYTES]:
        result.binary = True
        return result
    if offset > 0:
        result.start = offset
        for number, line in enumerate(handle, start=1):
            result.total = number  # every line is counted, also after the window
            if offset <= number < offset + count:
                result.add(line)
        return result
    tail: deque[bytes] = deque(maxlen=-offset)
    for line in handle:
        result.total += 1
        tail.append(line)
    result.start = result.total - len(tail) + 1
    for line in list(tail)[:count]:
        if not result.add(line):
            break
    return result


class ReadFile(TypedTool[ReadFileParams]):
    name = "ReadFile"
    description = (
        "Read a text file. Lines come back numbered (`<number>\\t<text>`); read a window with "
        "line_offset and n_lines, or the end of a file with a negative line_offset. At most "
        f"{MAX_LINES} lines or {MAX_BYTES // 1024} KiB per call; lines longer than "
        f"{MAX_LINE_CHARS} characters are cut. Files that hold secrets (.env, keys, "
        "credentials) are refused. Reading outside the workspace needs the user's approval."
    )
    params = ReadFileParams

    async def execute(self, params: ReadFileParams, ctx: ToolContext) -> ToolReturnValue:
        target = await file_to_read(
            params.path,
            ctx,
            sender=self.name,
            not_a_file=(
                f"`{params.path}` is not a regular file (use Glob to list a directory).",
                "Not a file",
            ),
        )
        if not isinstance(target, Target):
            return target
        count = min(params.n_lines, MAX_LINES)
        try:
            text = await ctx.files.read_text(target.real) if ctx.files is not None else None
            if text is not None:  # the editor's buffer
                handle = BufferedReader(BytesIO(text.encode("utf-8", "surrogateescape")))
                piece = _slice(handle, params.line_offset, count)
            else:
                piece = await anyio.to_thread.run_sync(
                    _read_slice, target.io, params.line_offset, count, abandon_on_cancel=True
                )
        except OSError as exc:
            return tool_error(f"Could not read `{params.path}`: {exc.strerror or exc}", brief="Read failed")
        if piece.binary:
            return tool_error(
                f"`{params.path}` looks like a binary file; ReadFile only reads text.", brief="Binary file"
            )
        return _render(piece)


def _render(piece: _Slice) -> ToolReturnValue:
    out: list[str] = []
    cut = 0
    for number, raw in enumerate(piece.lines, start=piece.start):
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        text, was_cut = cap_line(text)
        cut += was_cut
        out.append(f"{number:6d}\t{text}\n")
    if piece.total == 0:
        return tool_ok(output="", message="The file is empty.")
    if not out:
        return tool_ok(
            output="",
            message=f"No lines read: the file has {piece.total} line(s), fewer than line_offset asks for.",
        )
    last = piece.start + len(out) - 1
    notes = [f"Read lines {piece.start}-{last} of {piece.total}."]
    if last >= piece.total:
        notes.append("End of file.")
    if piece.hit_byte_cap:
        notes.append(f"Stopped at the {MAX_BYTES // 1024} KiB limit; continue with line_offset={last + 1}.")
    elif last < piece.total:
        notes.append(f"More lines follow; continue with line_offset={last + 1}.")
    if cut:
        notes.append(f"{cut} line(s) longer than {MAX_LINE_CHARS} characters were cut.")
    return tool_ok(output="".join(out), message=" ".join(notes))
