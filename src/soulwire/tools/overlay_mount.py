"""The overlay's mount holder, run as its own small process (`python -I overlay_mount.py
JSON`): it enters a new user and mount namespace (its user id mapped to itself), mounts one
kernel overlayfs over each workspace dir — the dir itself the lower layer, a dir of the
session's storage the upper one — prints `ready` and waits for its stdin to close. Commands
(through `nsenter`) and the engine's file tools (through `/proc/PID/root`) then see the same
merged view, and every write lands in the upper layer.

Standalone on purpose: no imports from soulwire (it starts in a few milliseconds), and one
thread (`unshare(CLONE_NEWUSER)` refuses a threaded process)."""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
# Options that keep the upper layer plain: no redirect xattrs for renamed dirs (a rename of
# a lower dir is refused with EXDEV and `mv` copies), no metadata-only copy-up, no index.
# `userxattr`: the only xattrs an unprivileged mount may use (`user.overlay.*`).
OPTIONS = "redirect_dir=nofollow,metacopy=off,index=off,userxattr"


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def _fail(what: str, libc: ctypes.CDLL) -> None:
    err = ctypes.get_errno()
    sys.stdout.write(f"error: {what}: {os.strerror(err)}\n")
    sys.stdout.flush()
    sys.exit(1)


def main() -> None:
    layers: list[list[str]] = json.loads(sys.argv[1])  # [[lower, upper, work], …]
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        _fail("cannot create a user and mount namespace", libc)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        _fail("cannot make the mounts private", libc)
    for lower, upper, work in layers:
        data = f"lowerdir={lower},upperdir={upper},workdir={work},{OPTIONS}".encode()
        if libc.mount(b"overlay", lower.encode(), b"overlay", 0, data) != 0:
            _fail(f"cannot mount an overlay on {lower}", libc)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.buffer.read()  # held until the engine closes the pipe (or dies)


if __name__ == "__main__":
    main()
