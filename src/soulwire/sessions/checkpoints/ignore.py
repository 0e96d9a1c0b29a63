"""Which paths a checkpoint leaves out: the configured exclude patterns and every
`.gitignore` on the way down (gitignore semantics by `pathspec`, as git matches them)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "dist",
    "build",
    "target",
    ".next",
)
"""Version control's own data and the usual build outputs and caches."""


def compile_patterns(lines: Sequence[str]) -> GitIgnoreSpec:
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(lines)


class IgnoreRules:
    """The patterns that apply inside one directory: each level's spec with the path of that
    level relative to the scanned root, deepest last (a deeper `.gitignore` may re-include)."""

    __slots__ = ("levels", "stamp")

    def __init__(self, levels: tuple[tuple[str, GitIgnoreSpec], ...], stamp: tuple[object, ...]) -> None:
        self.levels = levels
        self.stamp = stamp
        """Identifies these rules: a cached listing filtered under other rules is stale."""

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether `rel` (relative to the root, `/`-separated) is left out."""
        verdict = False
        for base, spec in self.levels:
            sub = rel[len(base) + 1 :] if base else rel
            if is_dir:
                sub += "/"
            result = spec.check_file(sub)
            if result.include is not None:
                verdict = result.include
        return verdict

    def descend(
        self, directory: str, rel: str, cache: dict[str, tuple[object, GitIgnoreSpec | None]]
    ) -> IgnoreRules:
        """The rules inside `rel` (at `directory` on disk): these plus its `.gitignore`."""
        path = os.path.join(directory, ".gitignore")
        try:
            st = os.stat(path)
        except OSError:
            return self
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = cache.get(path)
        if cached is None or cached[0] != key:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    spec: GitIgnoreSpec | None = compile_patterns(handle.read().splitlines())
            except OSError:
                spec = None
            cached = (key, spec)
            cache[path] = cached
        if cached[1] is None:
            return self
        return IgnoreRules((*self.levels, (rel, cached[1])), (*self.stamp, rel, key))


def root_rules(excludes: Sequence[str]) -> IgnoreRules:
    """The rules at a scanned root: the exclude list, as gitignore patterns."""
    if not excludes:
        return IgnoreRules((), ())
    return IgnoreRules((("", compile_patterns(excludes)),), ("excludes", tuple(excludes)))
