"""What changed between two manifests: each path added, modified, deleted or only its mode
changed, with a unified diff when both sides are text."""

from __future__ import annotations

from collections.abc import Callable

from soulwire.sessions.checkpoints.scan import Entry, Manifest, content
from soulwire.wire.checkpoints import FileChange

MAX_DIFF_BYTES = 1 << 20
"""A side larger than this is not diffed (the change is listed without its text)."""


def changed_paths(old: Manifest, new: Manifest) -> list[str]:
    return sorted(k for k in set(old) | set(new) if content(old.get(k)) != content(new.get(k)))


def compare(
    old: Manifest, new: Manifest, fetch: Callable[[str], bytes | None], *, diffs: bool = True
) -> list[FileChange]:
    return [_change(path, old.get(path), new.get(path), fetch, diffs) for path in changed_paths(old, new)]


def _mode(entry: Entry | None) -> str | None:
    return f"{entry[1]:o}" if entry is not None and entry[0] == "f" else None


def _change(
    path: str, old: Entry | None, new: Entry | None, fetch: Callable[[str], bytes | None], diffs: bool
) -> FileChange:
    if old is None:
        status = "added"
    elif new is None:
        status = "deleted"
    elif old[0] == new[0] == "f" and old[5] == new[5]:
        status = "mode"
    else:
        status = "modified"
    side = new if new is not None else old
    assert side is not None
    change = FileChange(
        path=path,
        status=status,
        kind="symlink" if side[0] == "l" else "file",
        old_mode=_mode(old),
        new_mode=_mode(new),
    )
    if status == "mode" or not diffs:
        return change
    before, after = _text(old, fetch), _text(new, fetch)
    if before is None or after is None:
        change.binary = not (_skipped(old) or _skipped(new))
        return change
    from difflib import unified_diff

    a_name = "/dev/null" if old is None else f"a/{path}"
    b_name = "/dev/null" if new is None else f"b/{path}"
    lines = unified_diff(before.splitlines(True), after.splitlines(True), a_name, b_name)
    change.diff = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
    return change


def _skipped(entry: Entry | None) -> bool:
    return entry is not None and entry[0] == "s"


def _text(entry: Entry | None, fetch: Callable[[str], bytes | None]) -> str | None:
    """The entry as text: '' when absent, a symlink as `-> target`; None when binary."""
    if entry is None:
        return ""
    if entry[0] == "l":
        return f"-> {entry[1]}\n"
    if entry[0] != "f" or entry[2] > MAX_DIFF_BYTES:
        return None
    data = fetch(entry[5])
    if data is None or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
