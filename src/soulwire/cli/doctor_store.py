"""The session store's health for `soulwire doctor`: torn or malformed JSON lines in
`context.jsonl`/`wire.jsonl` (what a killed writer or a full disk leaves), and `state.json`
files that do not parse. `repair` keeps every good line, moves the original aside as
`<name>.damaged` and never touches a session another process holds open."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from soulwire.sessions.lock import session_dir_locked
from soulwire.sessions.paths import CONTEXT_FILE, STATE_FILE, WIRE_FILE

JSONL_FILES = (CONTEXT_FILE, WIRE_FILE)


@dataclass
class Damage:
    """One damaged file: how many lines are bad (0 for a state file that does not parse)."""

    path: Path
    bad_lines: int
    good_lines: int


@dataclass
class StoreReport:
    sessions: int = 0
    damaged: list[Damage] = field(default_factory=list[Damage])
    repaired: list[Path] = field(default_factory=list[Path])
    skipped_busy: list[Path] = field(default_factory=list[Path])


def _bad_lines(path: Path) -> tuple[int, int]:
    bad = good = 0
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError:
                bad += 1
            else:
                good += 1 if line.endswith(b"\n") else 0
                bad += 0 if line.endswith(b"\n") else 1  # a valid record the writer did not finish
    return bad, good


def scan(share: Path) -> StoreReport:
    """Every session directory under `<share>/sessions`, checked line by line."""
    report = StoreReport()
    root = share / "sessions"
    if not root.is_dir():
        return report
    for work in sorted(p for p in root.iterdir() if p.is_dir()):
        for session in sorted(p for p in work.iterdir() if p.is_dir()):
            report.sessions += 1
            for name in JSONL_FILES:
                path = session / name
                if path.is_file():
                    bad, good = _bad_lines(path)
                    if bad:
                        report.damaged.append(Damage(path, bad, good))
            state = session / STATE_FILE
            if state.is_file():
                try:
                    json.loads(state.read_bytes())
                except ValueError:
                    report.damaged.append(Damage(state, 0, 0))
    return report


def repair(share: Path, report: StoreReport) -> None:
    """Rewrite each damaged file with its good lines only (a damaged state file is moved
    aside, the session then starts from a fresh state); the original stays as `.damaged`."""
    for damage in report.damaged:
        path = damage.path
        if session_dir_locked(share, path.parent):
            report.skipped_busy.append(path)
            continue
        aside = path.with_name(path.name + ".damaged")
        if path.name == STATE_FILE:
            path.replace(aside)
            report.repaired.append(path)
            continue
        kept: list[bytes] = []
        with path.open("rb") as f:
            for line in f:
                if not line.endswith(b"\n") or not line.strip():
                    continue
                try:
                    json.loads(line)
                except ValueError:
                    continue
                kept.append(line)
        fresh = path.with_name(path.name + ".repairing")
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"".join(kept))
            os.fsync(fd)
        finally:
            os.close(fd)
        aside.unlink(missing_ok=True)  # from an earlier repair: this copy is the newer original
        os.link(path, aside)
        fresh.replace(path)
        report.repaired.append(path)
