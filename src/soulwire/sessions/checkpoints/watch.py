"""Which names changed since the last look, from the kernel (Linux inotify).

The scanner's cost on an unchanged tree is one `lstat` per file. With a watch on every kept
directory, a checkpoint looks at the changed names only. The kernel queues an event while
the write that causes it runs, so every change finished before `drain()` is in the queue: the
answer is exact, not eventually consistent (no debounce, unlike watchers built for reloaders).

Where the answer could be incomplete, `drain()` says so (None) and the scanner walks the whole
tree again: the event queue overflowed, a directory was moved (its watch would follow it under
a name the scanner no longer knows), a watch could not be added (the per-user watch limit), or
the platform has no inotify. Writes through a shared memory mapping make no event (as for git's
fsmonitor); the size/mtime rule of a full walk would miss most of them too."""

from __future__ import annotations

import errno
import os
import struct
import weakref
from typing import Any

_EVENT = struct.Struct("iIII")
"""`struct inotify_event` before its name: wd, mask, cookie, length of the (padded) name."""
_BUFFER = 64 * 1024
_LONGEST = _EVENT.size + 256
"""An event with the longest name (NAME_MAX) and its terminating NUL."""
_CHANGES = ("MODIFY", "ATTRIB", "CREATE", "DELETE", "MOVED_FROM", "MOVED_TO", "DELETE_SELF", "MOVE_SELF")


class Watcher:
    """Watches directories; `drain()` names the children changed since the previous drain."""

    def __init__(self) -> None:
        self._inotify: Any = None
        self._closer: weakref.finalize[..., Any] | None = None
        self._paths: dict[int, str] = {}
        self._broken = False
        self._mask = 0
        self._dir_moved = 0
        self._isdir = 0
        self._moves = 0
        self._overflow = 0
        self._ignored = 0
        self._open()

    def _open(self) -> None:
        try:
            # Linux only; imported at the first checkpoint
            from inotify_simple import INotify, flags

            inotify = INotify(nonblocking=True)
        except (ImportError, OSError):
            self._broken = True
            return
        self._inotify = inotify
        # the scanner may be dropped without a close(): the descriptor goes with it, silently
        self._closer = weakref.finalize(self, inotify.close)
        self._mask = 0
        for name in _CHANGES:
            self._mask |= getattr(flags, name)
        self._mask |= flags.ONLYDIR | flags.DONT_FOLLOW
        self._isdir = flags.ISDIR
        self._dir_moved = flags.MOVE_SELF
        self._moves = flags.MOVED_FROM | flags.MOVED_TO
        self._overflow = flags.Q_OVERFLOW | flags.UNMOUNT
        self._ignored = flags.IGNORED

    @property
    def usable(self) -> bool:
        return not self._broken

    def reset(self) -> None:
        """Forget every watch (before a full walk adds them again)."""
        self.close()
        if not self._broken:
            self._open()

    def add(self, directory: str) -> None:
        """Watch `directory` (its children's changes). A failure breaks the watcher for good:
        from then on every scan walks the whole tree."""
        if self._broken or self._inotify is None:
            return
        try:
            wd = self._inotify.add_watch(directory, self._mask)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return  # removed since it was listed: its parent's event tells the scanner
            self._broken = True  # ENOSPC: the per-user watch limit
            self.close()
            return
        self._paths[wd] = directory

    def drain(self) -> dict[str, set[str] | None] | None:
        """Each directory with a change since the last drain and the names of its children that
        changed (None: the directory itself, read it all again), or None when only a full walk
        can tell (see the module's docstring)."""
        if self._broken or self._inotify is None:
            return None
        dirty: dict[str, set[str] | None] = {}
        complete = True
        fd, unpack, header = self._inotify.fileno(), _EVENT.unpack_from, _EVENT.size
        while True:
            try:
                data = os.read(fd, _BUFFER)
            except BlockingIOError:
                break
            at = 0
            while at < len(data):
                wd, mask, _, length = unpack(data, at)
                name = data[at + header : at + header + length].rstrip(b"\0")
                at += header + length
                if mask & self._overflow:
                    complete = False
                elif mask & self._ignored:
                    self._paths.pop(wd, None)
                elif mask & self._dir_moved or (mask & self._isdir and mask & self._moves):
                    complete = False
                else:
                    directory = self._paths.get(wd)
                    if directory is None:
                        continue
                    names = dirty.get(directory, set())
                    if names is None:
                        continue
                    if name:
                        names.add(os.fsdecode(name))
                        dirty[directory] = names
                    else:
                        dirty[directory] = None
            if len(data) <= _BUFFER - _LONGEST:
                break  # all that was queued when read: a change finished before is in it
        return dirty if complete else None

    def close(self) -> None:
        if self._closer is not None:
            self._closer()  # closes the descriptor, once, and unregisters the finaliser
            self._closer = None
        self._inotify = None
        self._paths.clear()
