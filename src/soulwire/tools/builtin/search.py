"""`Glob` (file names by pattern) and `Grep` (file contents by regex, through ripgrep).

ripgrep comes from the `ripgrep` wheel (installed next to the interpreter) or from PATH;
nothing is downloaded at run time. Secret files never show up in Grep results."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import sysconfig
import time
from functools import cache
from pathlib import Path, PurePath
from typing import Literal

import anyio.to_thread
from pydantic import ConfigDict, Field, field_validator

from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.tools.builtin.output import MAX_OUTPUT_CHARS, cap_lines, clip_head
from soulwire.tools.builtin.paths import (
    SEARCH_OUTSIDE,
    approve_outside,
    hidden_by_sandbox,
    hidden_refusal,
    is_sensitive,
    resolve,
    sensitive_refusal,
)
from soulwire.tools.builtin.process import Capture, run_captured
from soulwire.wire.types import ToolReturnValue, tool_error, tool_ok

MAX_GLOB_MATCHES = 1000
GLOB_TIME_LIMIT_S = 10.0
GREP_TIMEOUT_S = 20.0
_GREP_CAPTURE_BYTES = 8 * 1024 * 1024


# ---------------------------------------------------------------- Glob


class GlobParams(ToolParams):
    pattern: str = Field(
        description="Glob relative to the directory, e.g. `*.py`, `src/**/*.ts`; `**` matches any depth."
    )
    directory: str | None = Field(
        default=None, description="Where to search (absolute or relative); default: the working directory."
    )
    include_dirs: bool = Field(default=True, description="Also list matching directories (shown with a `/`).")


def _glob(root: Path, pattern: str, include_dirs: bool) -> tuple[list[str], bool]:
    """Sorted matches under `root` (directories end with `/`) and whether the search stopped
    early (too many matches, or too long)."""
    found: list[str] = []
    deadline = time.monotonic() + GLOB_TIME_LIMIT_S
    stopped = False
    for relative in glob.iglob(pattern, root_dir=root, recursive=True):
        is_dir = (root / relative).is_dir()
        if is_dir and not include_dirs:
            continue
        found.append(relative.rstrip("/") + "/" if is_dir else relative)
        if len(found) > MAX_GLOB_MATCHES or time.monotonic() > deadline:
            stopped = True
            break
    found.sort()
    return found[:MAX_GLOB_MATCHES], stopped


def _top_level(root: Path) -> str:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return ""
    return "\n".join(e.name + ("/" if e.is_dir() else "") for e in entries[:200])


class Glob(TypedTool[GlobParams]):
    name = "Glob"
    description = (
        "Find files and directories whose paths match a glob pattern, e.g. `*.md` or "
        "`src/**/test_*.py`. Patterns may not start with `**` (that would walk every directory, "
        f"dependencies included). Returns up to {MAX_GLOB_MATCHES} sorted paths relative to the "
        "searched directory; directories end with `/`."
    )
    params = GlobParams

    async def execute(self, params: GlobParams, ctx: ToolContext) -> ToolReturnValue:
        target = resolve(params.directory or ".", ctx)
        if hidden_by_sandbox(ctx, target):
            return hidden_refusal(params.directory or ".")
        if not target.io.is_dir():
            return tool_error(f"`{params.directory}` is not a directory.", brief="Not a directory")
        pattern = params.pattern
        if pattern.startswith("**"):
            return tool_error(
                f"Pattern `{pattern}` starts with `**`, which would walk every directory "
                "(dependencies and build output included). Start from a directory, e.g. `src/**/*.py`. "
                "The top level of the directory is listed below.",
                brief="Pattern too broad",
                output=_top_level(target.io),
            )
        if PurePath(pattern).is_absolute() or ".." in PurePath(pattern).parts:
            return tool_error(
                "The pattern must be relative and stay inside the directory; pass another "
                "`directory` to search elsewhere.",
                brief="Invalid pattern",
            )
        refused = await approve_outside(
            ctx, target, sender=self.name, action=SEARCH_OUTSIDE, description=f"List files in {target.quoted}"
        )
        if refused is not None:
            return refused
        found, stopped = await anyio.to_thread.run_sync(
            _glob, target.io, pattern, params.include_dirs, abandon_on_cancel=True
        )
        if ctx.sandbox is not None and ctx.sandbox.active:  # what the sandbox hides is not there
            hides = ctx.sandbox.hidden_check()
            found = [f for f in found if not hides(Path(os.path.realpath(target.real / f)))]
        if not found:
            return tool_ok(message=f"No matches for `{pattern}`.")
        message = f"{len(found)} match(es) for `{pattern}`."
        if stopped:
            message = (
                f"Showing the first {len(found)} matches for `{pattern}`; the search stopped there. "
                "Use a narrower pattern."
            )
        return tool_ok(output="\n".join(found), message=message)


# ---------------------------------------------------------------- Grep


@cache
def ripgrep() -> str | None:
    """The `rg` executable: the wheel's copy beside this interpreter, else one on PATH."""
    names = ("rg.exe", "rg") if os.name == "nt" else ("rg",)
    for folder in {sysconfig.get_path("scripts"), str(Path(sys.executable).parent)}:
        for name in names:
            candidate = Path(folder) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which("rg")


OutputMode = Literal["content", "files_with_matches", "count_matches"]


class GrepParams(ToolParams):
    model_config = ConfigDict(populate_by_name=True)

    pattern: str = Field(description="Regular expression (Rust regex syntax, as in ripgrep).")
    path: str = Field(default=".", description="File or directory to search; default: the working directory.")
    glob: str | None = Field(
        default=None, description="Only files matching this glob, e.g. `*.py` or `*.{ts,tsx}`."
    )
    output_mode: OutputMode = Field(
        default="files_with_matches",
        description=(
            "`files_with_matches`: paths only; `content`: matching lines; `count_matches`: matches per file."
        ),
    )
    before: int | None = Field(
        default=None, ge=0, alias="-B", description="content mode: lines before each match."
    )
    after: int | None = Field(
        default=None, ge=0, alias="-A", description="content mode: lines after each match."
    )
    context: int | None = Field(
        default=None, ge=0, alias="-C", description="content mode: lines before and after each match."
    )
    line_numbers: bool = Field(default=True, alias="-n", description="content mode: show line numbers.")
    ignore_case: bool = Field(default=False, alias="-i", description="Case-insensitive search.")
    type: str | None = Field(
        default=None, description="Only files of this ripgrep type, e.g. `py`, `js`, `rust`."
    )
    head_limit: int | None = Field(
        default=250, ge=0, description="Return at most this many lines/entries (0 = no limit)."
    )
    offset: int = Field(default=0, ge=0, description="Skip this many lines/entries first (for paging).")
    multiline: bool = Field(default=False, description="Let patterns span lines (`.` also matches newlines).")
    include_ignored: bool = Field(
        default=False, description="Also search files ignored by .gitignore and similar."
    )

    @field_validator("output_mode", mode="before")
    @classmethod
    def _count_alias(cls, value: object) -> object:
        return "count_matches" if value == "count" else value


def _rg_argv(rg: str, params: GrepParams) -> list[str]:
    argv = [rg, "--no-config", "--null", "--with-filename", "--hidden", "--glob=!.git", "--sort=path"]
    argv += ["--color=never", "--no-messages"]
    if params.output_mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif params.output_mode == "count_matches":
        argv.append("--count-matches")
    else:
        if params.line_numbers:
            argv.append("--line-number")
        for flag, value in (("-B", params.before), ("-A", params.after), ("-C", params.context)):
            if value is not None:
                argv.append(f"{flag}{value}")
    if params.ignore_case:
        argv.append("--ignore-case")
    if params.multiline:
        argv += ["--multiline", "--multiline-dotall"]
    if params.include_ignored:
        argv.append("--no-ignore")
    if params.glob:
        argv.append(f"--glob={params.glob}")
    if params.type:
        argv.append(f"--type={params.type}")
    # rg does not expand `~`; other paths go as given so that results read the same way.
    where = os.path.expanduser(params.path) if params.path.startswith("~") else params.path
    return [*argv, "--regexp", params.pattern, "--", where]


def _shown_path(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _entries(raw: str, mode: str, numbered: bool) -> tuple[list[str], set[str], int]:
    """Output entries with secret files removed, the removed paths, and (count mode) the
    total number of matches."""
    skipped: set[str] = set()
    entries: list[str] = []
    total = 0
    if mode == "files_with_matches":
        for path in filter(None, raw.split("\0")):
            path = path.strip("\n")
            if is_sensitive(path):
                skipped.add(path)
            elif path:
                entries.append(_shown_path(path))
        return entries, skipped, total
    for line in raw.splitlines():
        if "\0" not in line:  # `--` between context groups
            if entries and entries[-1] != "--":
                entries.append(line)
            continue
        path, rest = line.split("\0", 1)
        if is_sensitive(path):
            skipped.add(path)
            continue
        if mode == "content":
            separator = ":"
            if numbered:
                digits = len(rest) - len(rest.lstrip("0123456789"))
                if rest[digits : digits + 1] == "-":
                    separator = "-"
            entries.append(f"{_shown_path(path)}{separator}{rest}")
        else:
            entries.append(f"{_shown_path(path)}:{rest}")
            total += int(rest) if rest.isdigit() else 0
    while entries and entries[-1] == "--":
        entries.pop()
    return entries, skipped, total


class Grep(TypedTool[GrepParams]):
    name = "Grep"
    description = (
        "Search file contents with a regular expression (ripgrep). By default lists the files "
        "that match; output_mode `content` shows matching lines (with -A/-B/-C context and line "
        "numbers), `count_matches` counts matches per file. Filter with `glob` or `type`; page "
        "with head_limit and offset. Hidden files are searched, .gitignore'd ones only with "
        "include_ignored; files holding secrets are always skipped."
    )
    params = GrepParams

    async def execute(self, params: GrepParams, ctx: ToolContext) -> ToolReturnValue:
        rg = ripgrep()
        if rg is None:
            return tool_error(
                "ripgrep (`rg`) is not installed; install the `ripgrep` package.", brief="Grep unavailable"
            )
        target = resolve(params.path, ctx)
        if hidden_by_sandbox(ctx, target):
            return hidden_refusal(params.path)
        if not target.io.exists():
            return tool_error(f"`{params.path}` does not exist.", brief="Path not found")
        if target.io.is_file() and target.sensitive():
            return sensitive_refusal(params.path)
        refused = await approve_outside(
            ctx, target, sender=self.name, action=SEARCH_OUTSIDE, description=f"Search {target.quoted}"
        )
        if refused is not None:
            return refused
        out, err = Capture(head=_GREP_CAPTURE_BYTES), Capture(head=64 * 1024)
        argv, env = _rg_argv(rg, params), None
        if ctx.sandbox is not None:  # ripgrep sees what commands see: secrets hidden
            argv, env = ctx.sandbox.command_argv(argv, cwd=ctx.work_dir), ctx.sandbox.command_env(None)
        finished = await run_captured(
            argv, cwd=ctx.work_dir, timeout=GREP_TIMEOUT_S, out=out, err=err, env=env
        )
        if finished.returncode == 2 and not out.total:
            problem = err.text().strip() or "ripgrep failed"
            return tool_error(f"Search failed: {problem}", brief="Grep failed")
        entries, skipped, total = _entries(out.text(), params.output_mode, params.line_numbers)
        notes: list[str] = []
        if finished.timed_out:
            notes.append(f"The search timed out after {GREP_TIMEOUT_S:.0f} s; results are partial.")
        elif not finished.complete:
            notes.append("The search produced too much output; results are partial. Narrow it down.")
        if skipped:
            names = ", ".join(sorted(_shown_path(p) for p in skipped)[:5])
            notes.append(f"Skipped {len(skipped)} file(s) that may hold secrets ({names}).")
        if not entries:
            return tool_ok(message=" ".join(["No matches found.", *notes]))
        if params.output_mode == "count_matches":
            notes.insert(0, f"{total} match(es) in {len(entries)} file(s).")
        shown = entries[params.offset :]
        if not shown:
            notes.append(f"No entries at offset {params.offset}; there are {len(entries)}.")
            return tool_ok(message=" ".join(notes))
        limit = params.head_limit or None
        if limit is not None and len(shown) > limit:
            shown = shown[:limit]
            last = params.offset + limit
            notes.append(
                f"Showing entries {params.offset + 1}-{last} of {len(entries)}; use offset={last} for more."
            )
        elif params.offset:
            notes.append(f"Showing entries {params.offset + 1}-{len(entries)} of {len(entries)}.")
        text, cut = cap_lines("\n".join(shown))
        text, clipped = clip_head(text, MAX_OUTPUT_CHARS)
        if cut:
            notes.append(f"{cut} long line(s) were cut.")
        if clipped:
            notes.append("Output was clipped; narrow the search or page with head_limit/offset.")
        return tool_ok(output=text, message=" ".join(notes))
