"""An overlay's upper layers read back and carried out: what the turn changed (`pending`),
applied to the work dir (`commit`) or thrown away (`discard`).

An upper layer (overlayfs, mounted with `redirect_dir=off,metacopy=off,userxattr`) holds each
changed file whole, a character device 0/0 (a whiteout) for each deleted path, and the xattr
`user.overlay.opaque` on a dir that replaced the one below. A commit writes every file with
the restore code's atomic write (a temporary name, then a rename), so a killed process leaves
each file old or new. It is marked first (`COMMITTING` in the storage) and applying the same
upper layer twice gives the same result: a commit a crash cut short is finished when the
session opens again (`finish_interrupted`)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from soulwire.sessions.checkpoints.restore import write_atomic
from soulwire.wire.checkpoints import FileChange

UPPER = "upper"
WORK = "work"
MARKER = "COMMITTING"
OPAQUE_XATTR = "user.overlay.opaque"


def _is_whiteout(info: os.stat_result) -> bool:
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _opaque(path: str) -> bool:
    try:
        return os.getxattr(path, OPAQUE_XATTR, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _uppers(storage: Path, roots: Sequence[Path]) -> Iterator[tuple[Path, str]]:
    for index, root in enumerate(roots):
        upper = storage / UPPER / str(index)
        if upper.is_dir():
            yield root, str(upper)


def _walk(upper: str, rel: str = "") -> Iterator[tuple[str, os.stat_result, bool]]:
    """(relative path, lstat, opaque) of every entry of an upper layer, parents first."""
    with os.scandir(os.path.join(upper, rel)) as entries:
        items = sorted(entries, key=lambda e: e.name)
    for entry in items:
        path = f"{rel}/{entry.name}" if rel else entry.name
        info = entry.stat(follow_symlinks=False)
        opaque = stat.S_ISDIR(info.st_mode) and _opaque(entry.path)
        yield path, info, opaque
        if stat.S_ISDIR(info.st_mode):
            yield from _walk(upper, path)


def _key(root: Path, roots: Sequence[Path], rel: str) -> str:
    """How checkpoints name a path: relative to the work dir, absolute in an added dir."""
    return rel if root == roots[0] else str(root / rel)


def pending(storage: Path, roots: Sequence[Path]) -> list[dict[str, Any]]:
    """The files the overlay changed: `{path, status}` with status added, modified or
    deleted (dirs left out unless deleted), sorted by path."""
    found: dict[str, str] = {}
    for root, upper in _uppers(storage, roots):
        for rel, info, opaque in _walk(upper):
            below = root / rel
            exists = os.path.lexists(below)
            if _is_whiteout(info):
                if below.is_dir() and not below.is_symlink():
                    _deleted_below(root, roots, rel, found)
                elif exists:
                    found[_key(root, roots, rel)] = "deleted"
                continue
            below_dir = below.is_dir() and not below.is_symlink()
            if stat.S_ISDIR(info.st_mode):
                if opaque and below_dir:
                    _deleted_below(root, roots, rel, found, keep=os.path.join(upper, rel))
                elif exists and not below_dir:  # a file (or link) replaced by a dir
                    found[_key(root, roots, rel)] = "deleted"
                continue
            if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                if below_dir:  # a dir replaced by a file (or link)
                    _deleted_below(root, roots, rel, found)
                    found[_key(root, roots, rel)] = "added"
                elif not exists:
                    found[_key(root, roots, rel)] = "added"
                elif _differs(os.path.join(upper, rel), info, str(below)):
                    found[_key(root, roots, rel)] = "modified"
    return [{"path": p, "status": s} for p, s in sorted(found.items())]


def changes(storage: Path, roots: Sequence[Path], *, diffs: bool = True) -> list[FileChange]:
    """The pending files as a turn's changes are shown (`changes.compare`): status, kind,
    modes and, with `diffs`, a unified diff of the work dir's file against the overlay's."""
    from hashlib import sha256

    from soulwire.sessions.checkpoints.changes import MAX_DIFF_BYTES, compare

    objects: dict[str, bytes] = {}

    def entry(path: str) -> tuple[Any, ...] | None:
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISLNK(info.st_mode):
            return ("l", os.readlink(path))
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > MAX_DIFF_BYTES:  # listed, not read (too large to diff)
            return ("f", stat.S_IMODE(info.st_mode), info.st_size, -1, 0, f"large:{path}")
        with open(path, "rb") as handle:
            data = handle.read()
        digest = sha256(data).hexdigest()
        objects[digest] = data
        return ("f", stat.S_IMODE(info.st_mode), len(data), -1, 0, digest)

    uppers = dict(_uppers(storage, roots))
    old: dict[str, tuple[Any, ...]] = {}
    new: dict[str, tuple[Any, ...]] = {}
    for found in pending(storage, roots):
        key = str(found["path"])
        root = next((r for r in roots[1:] if key.startswith(f"{r}/")), roots[0])
        rel = key if root == roots[0] else key[len(str(root)) + 1 :]
        before = entry(str(root / rel)) if found["status"] != "added" else None
        upper = uppers.get(root) if found["status"] != "deleted" else None
        after = entry(os.path.join(upper, rel)) if upper is not None else None
        if before is not None:
            old[key] = before
        if after is not None:
            new[key] = after
    return compare(old, new, objects.get, diffs=diffs)


def _deleted_below(
    root: Path, roots: Sequence[Path], rel: str, found: dict[str, str], keep: str | None = None
) -> None:
    """The files under a deleted (or replaced) dir of the lower layer count as deleted."""
    below = root / rel
    if not below.is_dir() or below.is_symlink():
        return
    for dirpath, dirnames, filenames in os.walk(below):
        for name in [*filenames, *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))]:
            sub = os.path.relpath(os.path.join(dirpath, name), root)
            if keep is None or not os.path.lexists(os.path.join(keep, os.path.relpath(sub, rel))):
                found[_key(root, roots, sub)] = "deleted"


def _differs(upper: str, info: os.stat_result, below: str) -> bool:
    try:
        old = os.lstat(below)
    except OSError:
        return True
    if stat.S_IFMT(old.st_mode) != stat.S_IFMT(info.st_mode) or stat.S_IMODE(old.st_mode) != stat.S_IMODE(
        info.st_mode
    ):
        return True
    if stat.S_ISLNK(info.st_mode):
        return os.readlink(upper) != os.readlink(below)
    if old.st_size != info.st_size:
        return True
    with open(upper, "rb") as a, open(below, "rb") as b:
        while True:
            x, y = a.read(1 << 20), b.read(1 << 20)
            if x != y:
                return True
            if not x:
                return False


def commit(storage: Path, roots: Sequence[Path]) -> list[dict[str, Any]]:
    """Apply the overlay to the work dir, then drop it; returns what it changed."""
    changed = pending(storage, roots)
    marker = storage / MARKER
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fsync(fd)
    os.close(fd)
    for root, upper in _uppers(storage, roots):
        _apply(str(root), upper)
    discard(storage)
    return changed


def finish_interrupted(storage: Path, roots: Sequence[Path]) -> bool:
    """Finish a commit a killed process left half done; True when there was one."""
    if not (storage / MARKER).exists():
        return False
    commit(storage, roots)
    return True


def discard(storage: Path) -> None:
    """Throw the overlay's changes away (the marker last: a commit is over only then)."""
    for name in (UPPER, WORK):
        _remove_tree(storage / name)
    (storage / MARKER).unlink(missing_ok=True)


def _remove_tree(path: Path) -> None:
    def unlock(_func: Callable[..., Any], failed: str, _exc: Any) -> None:
        # overlayfs leaves its work dir's `work` subdir with mode 000
        os.chmod(os.path.dirname(failed), 0o700)
        os.chmod(failed, 0o700) if os.path.isdir(failed) and not os.path.islink(failed) else None
        shutil.rmtree(failed, ignore_errors=True) if os.path.isdir(failed) else os.unlink(failed)

    if path.exists():
        shutil.rmtree(path, onerror=unlock)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _apply(root: str, upper: str) -> None:
    for rel, info, opaque in _walk(upper):
        target = os.path.join(root, rel)
        source = os.path.join(upper, rel)
        if _is_whiteout(info):
            _remove(target)
        elif stat.S_ISDIR(info.st_mode):
            if os.path.lexists(target) and not (os.path.isdir(target) and not os.path.islink(target)):
                _remove(target)
            os.makedirs(target, exist_ok=True)
            if opaque:  # it replaced the dir below: what only the old one held goes
                for name in os.listdir(target):
                    mine = os.path.join(source, name)
                    if not os.path.lexists(mine) or _is_whiteout(os.lstat(mine)):
                        _remove(os.path.join(target, name))
            os.chmod(target, stat.S_IMODE(info.st_mode))
        elif stat.S_ISLNK(info.st_mode):
            write_atomic(target, link=os.readlink(source))
        elif stat.S_ISREG(info.st_mode):
            write_atomic(target, copy_from=source, mode=stat.S_IMODE(info.st_mode))
