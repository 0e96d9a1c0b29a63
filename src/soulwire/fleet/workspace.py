"""Per-task workspaces: a private copy of the task's source directory in the run dir, and the
diff of that copy against the source once the agent (and the check) are done."""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Iterable
from pathlib import Path

IGNORED_IN_DIFF = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
MAX_DIFF_CHARS = 200_000
_MAX_TEXT_BYTES = 2_000_000


def prepare_workspace(source: Path | None, dest: Path) -> None:
    """A fresh copy of `source` at `dest` (an empty directory without a source). Whatever an
    earlier, interrupted run left at `dest` is removed first, so a task always starts clean."""
    if dest.exists():
        shutil.rmtree(dest)
    if source is None:
        dest.mkdir(parents=True)
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, dest, symlinks=True)


def _files(root: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if IGNORED_IN_DIFF.intersection(relative.parts):
            continue
        if path.is_file() or path.is_symlink():
            found[relative.as_posix()] = path
    return found


def _lines(path: Path) -> list[str] | None:
    """The file's lines, or None when it is not text worth diffing."""
    if path.is_symlink():
        return [f"-> {path.readlink()}\n"]
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if len(data) > _MAX_TEXT_BYTES or b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def workspace_diff(source: Path | None, workspace: Path) -> tuple[str, bool]:
    """A unified diff (paths relative, `a/` the source, `b/` the workspace) and whether it was
    cut at MAX_DIFF_CHARS. Binary files that differ get one line, as git prints them."""
    before = _files(source) if source is not None else {}
    after = _files(workspace)
    chunks: list[str] = []
    size = 0
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is not None and new is not None and _same(old, new):
            continue
        old_lines = _lines(old) if old is not None else []
        new_lines = _lines(new) if new is not None else []
        if old_lines is None or new_lines is None:
            left = f"a/{name}" if old is not None else "/dev/null"
            right = f"b/{name}" if new is not None else "/dev/null"
            chunk = f"Binary files {left} and {right} differ\n"
        else:
            chunk = "".join(
                _terminated(
                    difflib.unified_diff(
                        old_lines,
                        new_lines,
                        fromfile=f"a/{name}" if old is not None else "/dev/null",
                        tofile=f"b/{name}" if new is not None else "/dev/null",
                    )
                )
            )
        if size + len(chunk) > MAX_DIFF_CHARS:
            return "".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return "".join(chunks), False


def _terminated(lines: Iterable[str]) -> list[str]:
    out: list[str] = []
    for text in lines:
        out.append(text if text.endswith("\n") else text + "\n\\ No newline at end of file\n")
    return out


def _same(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and a.readlink() == b.readlink()
    try:
        if a.stat().st_size != b.stat().st_size:
            return False
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


__all__ = ["MAX_DIFF_CHARS", "prepare_workspace", "workspace_diff"]
