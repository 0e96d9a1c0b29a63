"""A fork with its own world: the new session keeps the first N turns (sessions/fork.py) and
its checkpoints up to the end of turn N; with a new work dir, that directory holds the files
as they were then — a git worktree (detached, no branch or ref created) when the work dir is
a git repository with a commit, else a plain copy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from soulwire.sessions.checkpoints.book import CheckpointBook, CheckpointError
from soulwire.sessions.checkpoints.files import CHECKPOINTS_DIR, LOG_FILE
from soulwire.sessions.checkpoints.scan import Manifest
from soulwire.sessions.fork import fork_from_store
from soulwire.sessions.jsonl import encode_record, fast_decoder, read_jsonl
from soulwire.sessions.store import SessionStore


def _git_worktree(source: str, target: str) -> bool:
    """Add a detached worktree of `source`'s HEAD at `target`; False when that cannot be."""
    try:
        inside = subprocess.run(
            ["git", "-C", source, "rev-parse", "--verify", "-q", "HEAD"], capture_output=True, check=False
        )
        if inside.returncode != 0:
            return False
        added = subprocess.run(
            ["git", "-C", source, "worktree", "add", "-q", "--detach", target, "HEAD"],
            capture_output=True,
            check=False,
        )
    except OSError:  # no git
        return False
    return added.returncode == 0


def fork_with_files(
    book: CheckpointBook,
    share: Path,
    source: Path,
    *,
    turns: int | None,
    new_work_dir: str | None = None,
    title: str | None = None,
    checkpoint: str | None = None,
) -> dict[str, Any]:
    """Fork the session in `source` (whose checkpoints `book` reads) as sessions/fork.py
    does; with `new_work_dir`, the fork lives there with its files. `checkpoint` forks at
    that checkpoint instead of a turn: its files, and the turns finished before it (see
    `CheckpointBook.files_at`). Returns `{session_id, work_dir, files, git_worktree}`."""
    target_files: Manifest | None = None
    if checkpoint is not None:
        target_files, turns = book.files_at(checkpoint)
    elif new_work_dir is not None:
        if turns is None:  # the files as they are now
            book.take(turn=book.recorded_turns(), kind="fork")
        target_files = book.files_at_end(turns)
    if new_work_dir is None:
        target_files = None
    work_dir = book.work_dir
    worktree = False
    if new_work_dir is not None:
        new_work_dir = os.path.abspath(new_work_dir)
        if os.path.exists(new_work_dir) and os.listdir(new_work_dir):
            raise CheckpointError(f"{new_work_dir} exists and is not empty")
        if os.path.exists(new_work_dir):
            os.rmdir(new_work_dir)
        worktree = _git_worktree(work_dir, new_work_dir)
        os.makedirs(new_work_dir, exist_ok=True)
        work_dir = new_work_dir
    new_id = fork_from_store(book.store, work_dir, turns=turns, title=title, share=share, source=source)
    written = 0
    if new_work_dir is not None and target_files is not None:
        written = len(book.export_manifest(target_files, new_work_dir))
    return {"session_id": new_id, "work_dir": work_dir, "files": written, "git_worktree": worktree}


def cut_log(session_dir: Path, turns: int) -> None:
    """A fork's checkpoint log ends where its conversation does (turn `turns`)."""
    from soulwire.sessions.checkpoints.book import records_through

    log = session_dir / CHECKPOINTS_DIR / LOG_FILE
    if not log.exists():
        return
    records = list(read_jsonl(log, decode=fast_decoder()))
    kept = records_through(records, turns)
    if len(kept) == len(records):
        return
    tmp = log.with_name(f".{LOG_FILE}.fork")
    tmp.write_text("".join(encode_record(r) + "\n" for r in kept), "utf-8")
    os.replace(tmp, log)


def materialise(store: SessionStore, work_dir: str) -> int:
    """Make the missing `work_dir` hold the session's files as its latest checkpoint recorded
    them (a replica taking over a session whose work dir is not on its disk); returns how many
    paths were written (0 for a session without checkpoints: an empty work dir)."""
    os.makedirs(work_dir, mode=0o700, exist_ok=True)
    book = CheckpointBook(store, work_dir)
    if not book.records():
        return 0
    return len(book.export_manifest(book.files_at_end(None), work_dir))
