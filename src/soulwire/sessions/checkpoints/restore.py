"""Putting files back as a manifest had them: each file written to a temporary name beside
it and swapped into place, so a process killed at any moment leaves every file either as it
was or as restored, never half-written.

Over an existing file the swap is an exchange of the two names (`renameat2(RENAME_EXCHANGE)`)
and the old file, now under the temporary name, is then removed. A plain rename over an
existing file is just as atomic, but on ext4 it also starts writing the new file's data to
the disk at once (`auto_da_alloc`, a guard against a power cut) and waits for the block
allocation: that was most of a rewind's wall time (2 to 10 ms a file on a loaded disk). Removing
the old files is the rest of it (freeing their blocks): given a `trash` directory on the same
file system, `apply` moves each old file there (a rename, nothing freed) and a thread of its
own removes them once the restore is complete (`wait_retired` waits for it); the work dir holds
exactly the restored files when `apply` returns. The restore is as durable as the session's
own records, whole against a killed process; a temporary file a kill leaves in the work dir is
removed by the next rewind (the scanner notes it). Where the exchange is not supported, a
rename over the file."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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


def apply(
    resolve: Callable[[str], str],
    target: Manifest,
    steps: Plan,
    fetch: Fetch,
    leftovers: Iterable[str] = (),
    trash: str | None = None,
) -> None:
    """Carry out a plan; `resolve` maps a key to its path on disk. `leftovers`: temporary
    files an earlier restore left (killed mid-way), removed first. `trash`: a directory the
    old files are moved to, removed from there on a thread (None: removed at once)."""
    for path in leftovers:
        if path.endswith(TEMP_SUFFIX):
            _remove(path)
    retired: list[str] | None = None
    if trash is not None:
        try:
            os.makedirs(trash, mode=0o700, exist_ok=True)
            retired = []
        except OSError:
            trash = None
    for key in steps.writes:
        _write(resolve(key), target[key], fetch, retired)
    for key in steps.deletes:
        path = resolve(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            shutil.rmtree(path, ignore_errors=True)
        _prune_empty(os.path.dirname(path), resolve(""))
    if trash is not None and retired is not None:
        for number, path in enumerate(retired):
            try:
                os.rename(path, os.path.join(trash, f"{os.getpid()}-{number}-{os.path.basename(path)}"))
            except OSError:  # another file system: removed here
                _remove(path)
        thread = threading.Thread(target=_empty, args=(trash,), name="soulwire-retire")
        _RETIRING.append(thread)
        thread.start()  # not a daemon: a process that ends waits for it


_RETIRING: list[threading.Thread] = []


def wait_retired() -> None:
    """Return once the old files of every restore so far are removed."""
    while _RETIRING:
        _RETIRING.pop().join()


def _empty(trash: str) -> None:
    try:
        names = os.listdir(trash)
    except OSError:
        return
    for name in names:
        _remove(os.path.join(trash, name))


def _write(path: str, entry: Entry, fetch: Fetch, retired: list[str] | None) -> None:
    if entry[0] == "l":
        write_atomic(path, link=entry[1], retired=retired)
    else:
        write_atomic(path, data=fetch(entry[5]), mode=entry[1], retired=retired)


def write_atomic(
    path: str,
    *,
    data: bytes | None = None,
    copy_from: str | None = None,
    link: str | None = None,
    mode: int = 0o644,
    retired: list[str] | None = None,
) -> None:
    """Make `path` a file holding `data` (or `copy_from`'s bytes), or a symlink to `link`:
    written beside it under a temporary name, then swapped into place (a directory standing
    there is removed first). `retired`: where to leave the old file's (temporary) path for
    the caller to remove (None: removed here)."""
    directory = os.path.dirname(path)
    _make_dirs(directory)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(4).hex()}{TEMP_SUFFIX}")
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
    if not _exchange(tmp, path):
        os.replace(tmp, path)
        return
    if retired is None:  # the old file, now under the temporary name
        _remove(tmp)
    else:
        retired.append(tmp)


_EXCHANGE: list[Any] = []
"""`renameat2` from the C library once looked up (None in it: not available here)."""
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(tmp: str, path: str) -> bool:
    """Swap the names `tmp` and `path` atomically; False when `path` does not exist or the
    system cannot (then a rename does the job)."""
    if not _EXCHANGE:
        import ctypes

        try:
            renameat2: Any = ctypes.CDLL(None, use_errno=True).renameat2
        except (AttributeError, OSError):
            renameat2 = None
        _EXCHANGE.append(renameat2)
    renameat2 = _EXCHANGE[0]
    if renameat2 is None:
        return False
    import ctypes
    import errno

    if renameat2(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(path), _RENAME_EXCHANGE) == 0:
        return True
    if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP):
        _EXCHANGE[0] = None  # not on this file system or kernel: renames from now on
    return False


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
