"""Caps on what a tool hands to the model: long lines are cut, long outputs are clipped, and
the result says so (spec §9: about 50 000 characters, 2 000 per line)."""

from __future__ import annotations

MAX_OUTPUT_CHARS = 50_000
MAX_LINE_CHARS = 2_000
LINE_MARK = " …[line truncated]"
OMITTED = "\n[… output omitted …]\n"


def cap_line(line: str, limit: int = MAX_LINE_CHARS) -> tuple[str, bool]:
    """`line` cut to `limit` characters (its line break kept); True when something was cut."""
    if len(line) <= limit:
        return line, False
    ending = "\n" if line.endswith("\n") else ""
    return line[:limit] + LINE_MARK + ending, True


def cap_lines(text: str, limit: int = MAX_LINE_CHARS) -> tuple[str, int]:
    """Every line of `text` cut to `limit` characters; returns the text and how many were cut."""
    if len(text) <= limit:
        return text, 0
    cut = 0
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if len(line) > limit:
            lines[index], _ = cap_line(line, limit)
            cut += 1
    return ("".join(lines), cut) if cut else (text, 0)


def clip_middle(text: str, limit: int = MAX_OUTPUT_CHARS) -> tuple[str, int]:
    """Keep the head and the tail of `text` (errors and summaries tend to be at the end);
    returns the text and the number of characters dropped from the middle."""
    if len(text) <= limit:
        return text, 0
    head = limit * 2 // 5
    tail = limit - head
    dropped = len(text) - head - tail
    return f"{text[:head]}{OMITTED}{text[-tail:]}", dropped


def clip_head(text: str, limit: int = MAX_OUTPUT_CHARS) -> tuple[str, bool]:
    """The first `limit` characters of `text`, cut at a line break when one is near."""
    if len(text) <= limit:
        return text, False
    head = text[:limit]
    newline = head.rfind("\n")
    if newline > limit // 2:
        head = head[: newline + 1]
    return head, True


def clip_output(text: str, dropped_already: bool, total: int) -> tuple[str, list[str]]:
    """A command's output for the model: long lines cut, the middle of a long output dropped;
    with the notes that say so. `dropped_already`: the capture kept only the ends of `total`
    bytes."""
    notes: list[str] = []
    text, cut_lines = cap_lines(text)
    text, dropped = clip_middle(text)
    if dropped_already or dropped:
        notes.append(f"Output was too long ({total} bytes); only its beginning and end are shown.")
    if cut_lines:
        notes.append(f"{cut_lines} overlong line(s) were truncated.")
    return text, notes
