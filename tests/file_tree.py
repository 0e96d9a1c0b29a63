"""A work dir as data, for the checkpoint tests: relative path → (bytes, mode) of each file, or
("link", target) of each symlink; git's own `.git` (directory or file) left out."""

from __future__ import annotations

import os
from pathlib import Path


def tree(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames + [d for d in dirnames if (here / d).is_symlink()]:
            path = here / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", str(path.readlink()))
            elif rel != ".git":
                out[rel] = (path.read_bytes(), path.stat().st_mode & 0o777)
    return out
