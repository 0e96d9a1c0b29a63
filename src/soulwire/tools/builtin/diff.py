"""Diff display blocks: one block per change hunk with 3 lines of context (spec §3.2)."""

from __future__ import annotations

from soulwire.wire.types import DiffDisplayBlock

CONTEXT_LINES = 3
SUMMARY_ABOVE_LINES = 10_000


def diff_blocks(path: str, old: str, new: str) -> list[DiffDisplayBlock]:
    """The change from `old` to `new` as display blocks; none when nothing changed. Sides
    longer than 10 000 lines are summarised by their line counts instead."""
    if old == new:
        return []
    a, b = old.splitlines(), new.splitlines()
    if len(a) > SUMMARY_ABOVE_LINES or len(b) > SUMMARY_ABOVE_LINES:
        same_length = len(a) == len(b)
        return [
            DiffDisplayBlock(
                path=path,
                old_text=f"({len(a)} lines)",
                new_text=f"({len(b)} lines, modified)" if same_length else f"({len(b)} lines)",
                is_summary=True,
            )
        ]
    blocks: list[DiffDisplayBlock] = []
    from difflib import SequenceMatcher  # at the first edit: not worth its import at every start

    matcher = SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        i1, i2 = group[0][1], group[-1][2]
        j1, j2 = group[0][3], group[-1][4]
        blocks.append(
            DiffDisplayBlock(
                path=path,
                old_text="\n".join(a[i1:i2]),
                new_text="\n".join(b[j1:j2]),
                old_start=i1 + 1,
                new_start=j1 + 1,
            )
        )
    if not blocks:  # only line endings differ: show the whole text
        blocks.append(DiffDisplayBlock(path=path, old_text=old, new_text=new))
    return blocks
