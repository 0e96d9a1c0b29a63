"""Per-task workspaces: a private copy of the task's source directory in the run dir (or a git
worktree of the source's HEAD), and the diff of that workspace against the source once the
agent (and the check) are done."""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import NamedTuple

from soulwire.fleet.errors import FleetError

IGNORED_IN_DIFF = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
MAX_DIFF_CHARS = 200_000
_MAX_TEXT_BYTES = 2_000_000


class WorkspaceError(FleetError):
    """The workspace could not be prepared or compared (one line)."""


def _git(*args: str, cwd: Path) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise WorkspaceError(f"cannot run git: {exc}") from None
    if done.returncode != 0:
        message = " ".join(done.stderr.split())[:300]
        raise WorkspaceError(f"git {args[0]} failed in {cwd}: {message}")
    return done.stdout


def prepare_workspace(
    source: Path | None, dest: Path, mode: str = "copy", leave_out: Collection[str] = ()
) -> None:
    """A fresh workspace at `dest`: a copy of `source` (an empty directory without a source)
    without the absolute paths in `leave_out`, or with mode `worktree` a detached git worktree
    of the source repository's HEAD. Whatever an earlier, interrupted run left at `dest` is
    removed first, so a task always starts clean."""
    if dest.exists():
        shutil.rmtree(dest)
    if mode == "worktree":
        if source is None:
            raise WorkspaceError("a worktree workspace needs a source git repository")
        _git("worktree", "prune", cwd=source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git("worktree", "add", "--detach", "--force", str(dest), "HEAD", cwd=source)
        return
    if source is None:
        dest.mkdir(parents=True)
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, dest, symlinks=True, ignore=_ignoring(leave_out) if leave_out else None)


def _ignoring(leave_out: Collection[str]) -> Callable[[str, list[str]], set[str]]:
    def ignore(directory: str, names: list[str]) -> set[str]:
        return {name for name in names if os.path.join(directory, name) in leave_out}

    return ignore


class _Entry(NamedTuple):
    path: Path
    size: int
    mtime_ns: int
    link: bool


def _files(root: Path, leave_out: Collection[str] = ()) -> dict[str, _Entry]:
    """Every file and symlink under `root` (by relative posix path) with its lstat facts, in one
    `scandir` pass: the diff runs after every task, and pathlib's walk cost more than the diff.
    Absolute paths in `leave_out` are not walked."""
    found: dict[str, _Entry] = {}
    pending = [(str(root), "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name in IGNORED_IN_DIFF or (leave_out and entry.path in leave_out):
                continue
            name = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, name + "/"))
                    continue
                facts = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            link = entry.is_symlink()
            if link or entry.is_file(follow_symlinks=False):
                found[name] = _Entry(Path(entry.path), facts.st_size, facts.st_mtime_ns, link)
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


def worktree_diff(workspace: Path) -> tuple[str, bool]:
    """What changed in a git worktree since its HEAD, new files included."""
    _git("add", "--all", "--intent-to-add", cwd=workspace)
    text = _git("diff", "--no-color", "--no-ext-diff", "HEAD", cwd=workspace)
    if len(text) > MAX_DIFF_CHARS:
        return text[:MAX_DIFF_CHARS], True
    return text, False


def workspace_diff(
    source: Path | None, workspace: Path, mode: str = "copy", leave_out: Collection[str] = ()
) -> tuple[str, bool]:
    """The diff of a worktree workspace against its HEAD (mode `worktree`), else a unified diff
    of the copy against `source` (paths relative, `a/` the source, `b/` the workspace; the
    source's absolute paths in `leave_out`, not copied, left out) — and whether it was cut at
    MAX_DIFF_CHARS. Binary files that differ get one line, as in git."""
    if mode == "worktree":
        return worktree_diff(workspace)
    before = _files(source, leave_out) if source is not None else {}
    after = _files(workspace)
    chunks: list[str] = []
    size = 0
    for name in sorted(before.keys() | after.keys()):
        old_entry, new_entry = before.get(name), after.get(name)
        if old_entry is not None and new_entry is not None and _same(old_entry, new_entry):
            continue
        old = old_entry.path if old_entry is not None else None
        new = new_entry.path if new_entry is not None else None
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


def _same(a: _Entry, b: _Entry) -> bool:
    """Whether a workspace file is its source's, unchanged. The copy keeps the source's
    modification time (copy2), and any write sets it to the time of the write: the same size
    and time mean an untouched copy, read by nobody. Otherwise the contents decide."""
    if a.link or b.link:
        try:
            return a.link and b.link and a.path.readlink() == b.path.readlink()
        except OSError:
            return False
    if a.size != b.size:
        return False
    if a.mtime_ns == b.mtime_ns:
        return True
    try:
        return a.path.read_bytes() == b.path.read_bytes()
    except OSError:
        return False


__all__ = ["MAX_DIFF_CHARS", "WorkspaceError", "prepare_workspace", "workspace_diff"]
