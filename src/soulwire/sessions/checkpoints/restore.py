"""Putting files back as a manifest had them: each file written to a temporary name beside
it and renamed over it, so a process killed at any moment leaves every file either as it was
or as restored, never half-written."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from soulwire.sessions.checkpoints.scan import TEMP_SUFFIX, Entry, Manifest, content
from soulwire.sessions.jsonl import write_all

Fetch = Callable[[str], bytes]
"""The bytes of a file by digest (raises LookupError when they are not kept)."""


@dataclass
class Plan:
    writes: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Paths changed on disk since the session last recorded them, that the restore would change."""

    @property
    def paths(self) -> list[str]:
        return sorted(self.writes + self.deletes)


def plan(
    target: Manifest, disk: Manifest, known: Mapping[str, Entry | None], keys: Collection[str] | None = None
) -> Plan:
    """What restoring `target` over `disk` does; `known` is what the session last recorded
    (a path whose disk state differs from it was changed by someone else). `keys`, when
    known, are the only paths in which the three can differ (the others are not compared)."""
    result = Plan()

    def consider(key: str, want: Entry | None, have: Entry | None) -> None:
        if _skipped(want) or _skipped(have) or content(want) == content(have):
            return
        if content(have) != content(known.get(key)):
            result.conflicts.append(key)
        (result.writes if want is not None else result.deletes).append(key)

    get = disk.get
    if keys is not None:
        for key in keys:
            want, have = target.get(key), get(key)
            if have is not want and have != want:
                consider(key, want, have)
    else:
        for key, want in target.items():
            have = get(key)
            if have is not want and have != want:  # the same entry: nothing to do (the common case)
                consider(key, want, have)
        for key, have in disk.items():
            if key not in target:
                consider(key, None, have)
    for paths in (result.writes, result.deletes, result.conflicts):
        paths.sort()
    return result


def _skipped(entry: Entry | None) -> bool:
    return entry is not None and entry[0] == "s"


def apply(resolve: Callable[[str], str], target: Manifest, steps: Plan, fetch: Fetch) -> None:
    """Carry out a plan; `resolve` maps a key to its path on disk."""
    for key in steps.writes:
        _write(resolve(key), target[key], fetch)
    for key in steps.deletes:
        path = resolve(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            shutil.rmtree(path, ignore_errors=True)
        _prune_empty(os.path.dirname(path), resolve(""))


def _write(path: str, entry: Entry, fetch: Fetch) -> None:
    if entry[0] == "l":
        write_atomic(path, link=entry[1])
    else:
        write_atomic(path, data=fetch(entry[5]), mode=entry[1])


def write_atomic(
    path: str,
    *,
    data: bytes | None = None,
    copy_from: str | None = None,
    link: str | None = None,
    mode: int = 0o644,
) -> None:
    """Make `path` a file holding `data` (or `copy_from`'s bytes), or a symlink to `link`:
    written beside it under a temporary name, then renamed over it (a directory standing
    there is removed first)."""
    directory = os.path.dirname(path)
    _make_dirs(directory)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    tmp = os.path.join(directory, f".{os.path.basename(path)}{TEMP_SUFFIX}")
    _remove(tmp)
    if link is not None:
        os.symlink(link, tmp)
    else:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            if copy_from is not None:
                with open(copy_from, "rb") as source:
                    while chunk := source.read(1 << 20):
                        write_all(fd, chunk)
            else:
                write_all(fd, data or b"")
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    os.replace(tmp, path)


def _make_dirs(directory: str) -> None:
    """Create `directory`, replacing a file or symlink that stands where a directory must."""
    for _ in range(directory.count("/") + 1):
        try:
            os.makedirs(directory, exist_ok=True)
            return
        except (FileExistsError, NotADirectoryError):
            blocker = directory
            while not os.path.lexists(blocker):
                blocker = os.path.dirname(blocker)
            os.unlink(blocker)  # the lowest existing ancestor is not a directory


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _prune_empty(directory: str, stop: str) -> None:
    """Remove directories the restore emptied, up to (not including) `stop`."""
    stop = stop.rstrip("/")
    while directory and directory.rstrip("/") != stop and directory.startswith(stop + "/"):
        try:
            os.rmdir(directory)
        except OSError:
            return
        directory = os.path.dirname(directory)
