"""`soulwire sessions checkpoints|changes|rewind|fork --new-work-dir`: a session's workspace
checkpoints from the shell (the session must not be running: its lock is taken)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from soulwire.sessions.checkpoints.book import CheckpointBook, CheckpointError, RewindConflict
from soulwire.sessions.listing import SessionSummary

EXIT_MISTAKE = 2


def add_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Register the subcommands (`fork` exists already: it gains `--new-work-dir`)."""
    listing = command("checkpoints", "the session's workspace checkpoints and rewinds")
    listing.add_argument("session", metavar="ID")
    listing.add_argument("--json", action="store_true", help="one JSON array")
    changes = command("changes", "what one turn changed in the work dir, as a diff")
    changes.add_argument("session", metavar="ID")
    changes.add_argument("--turn", type=int, metavar="N", required=True)
    changes.add_argument("--stat", action="store_true", help="only the paths and how each changed")
    changes.add_argument("--json", action="store_true")
    rewind = command("rewind", "back to the start of turn N: its files and/or the conversation")
    rewind.add_argument("session", metavar="ID")
    target = rewind.add_mutually_exclusive_group(required=True)
    target.add_argument("--turn", type=int, metavar="N")
    target.add_argument("--undo", action="store_true", help="undo the last rewind")
    only = rewind.add_mutually_exclusive_group()
    only.add_argument("--files-only", action="store_true", help="leave the conversation as it is")
    only.add_argument("--context-only", action="store_true", help="leave the files as they are")
    rewind.add_argument(
        "--force", action="store_true", help="overwrite files changed by hand (a copy of each is kept)"
    )
    rewind.add_argument("--json", action="store_true")


def fork_arguments(fork: argparse.ArgumentParser) -> None:
    fork.add_argument(
        "--new-work-dir",
        metavar="NEW",
        help="give the fork its own work dir holding the files as at the end of turn N "
        "(a git worktree when the work dir is a git repository, else a copy)",
    )


def _book(share: Path, work_dir: str, session: SessionSummary) -> CheckpointBook:
    from soulwire.runtime.checkpoints import stored_book

    return stored_book(share, work_dir, session.id)


@contextmanager
def _locked(share: Path, work_dir: str, session: SessionSummary) -> Generator[None]:
    from soulwire.sessions.lock import SessionLock

    lock = SessionLock.acquire(share, work_dir, session.id)  # SessionBusyError: in use
    try:
        yield
    finally:
        lock.release()


def _size(size: int) -> str:
    return (
        f"{size} B"
        if size < 1024
        else f"{size / 1024:.1f} KiB"
        if size < 1 << 20
        else f"{size / (1 << 20):.1f} MiB"
    )


_LABELS = {
    "turn": "start",
    "end": "end",
    "step": "before step {step}",
    "rewind-before": "before a rewind",
    "rewind": "after a rewind",
    "fork": "for a fork",
}


def _print_checkpoints(records: list[dict[str, Any]]) -> None:
    if not records:
        print("No checkpoints (they are taken when [checkpoints] enabled = true).")
        return
    for r in records:
        when = datetime.fromtimestamp(float(r.get("time", 0))).strftime("%Y-%m-%d %H:%M:%S")
        if r.get("type") == "rewind":
            what = f"undo of {r['undo_of']}" if r.get("undo_of") else f"rewind to turn {r.get('to_turn')}"
            parts = [p for p in ("files", "context") if r.get(p)]
            print(f"{r['id']:>6}  {when}  {what} ({', '.join(parts)})")
            continue
        label = str(_LABELS.get(r["kind"]) or r["kind"]).format(step=r.get("step"))
        line = (
            f"{r['id']:>6}  {when}  turn {r['turn']}, {label}: {r.get('files_changed', 0)} changed, "
            f"{_size(int(r.get('bytes_stored', 0)))} stored"
        )
        skipped = r.get("skipped") or []
        print(line + (f", {len(skipped)} skipped (size caps)" if skipped else ""))


def _print_changes(changes: dict[str, Any], stat: bool) -> None:
    files = changes["files"]
    if not files:
        print(f"Turn {changes['turn']} changed no files.")
        return
    for f in files:
        mode = (
            f" (mode {f['old_mode']} → {f['new_mode']})"
            if f["status"] == "mode"
            or (f.get("old_mode") and f.get("new_mode") and f["old_mode"] != f["new_mode"])
            else ""
        )
        if stat or f["status"] == "mode" or not f.get("diff"):
            kind = " binary" if f.get("binary") else " symlink" if f["kind"] == "symlink" else ""
            print(f"{f['status']:>8}{kind} {f['path']}{mode}")
        else:
            if mode:
                print(f"mode {f['old_mode']} → {f['new_mode']} {f['path']}")
            sys.stdout.write(f["diff"])


def run(args: argparse.Namespace, share: Path, work_dir: str, session: SessionSummary) -> int:
    """One of the checkpoint commands; returns the exit code."""
    from soulwire.sessions.lock import SessionBusyError

    try:
        if args.command == "checkpoints":
            records = _book(share, work_dir, session).checkpoints()
            print(json.dumps(records, ensure_ascii=False, indent=2)) if args.json else _print_checkpoints(
                records
            )
        elif args.command == "changes":
            changes = _book(share, work_dir, session).changes(args.turn)
            print(json.dumps(changes, ensure_ascii=False, indent=2)) if args.json else _print_changes(
                changes, args.stat
            )
        elif args.command == "rewind":
            return _rewind(args, share, work_dir, session)
        else:
            return _fork(args, share, work_dir, session)
    except SessionBusyError as exc:
        sys.stderr.write(f"soulwire sessions: {exc}\n")
        return 1
    except CheckpointError as exc:
        sys.stderr.write(f"soulwire sessions: {exc}\n")
        return EXIT_MISTAKE
    return 0


def _rewind(args: argparse.Namespace, share: Path, work_dir: str, session: SessionSummary) -> int:
    with _locked(share, work_dir, session):
        book = _book(share, work_dir, session)
        current = book.recorded_turns()
        try:
            if args.undo:
                result = book.undo(force=args.force, current_turn=current)
            else:
                result = book.rewind(
                    args.turn,
                    files=not args.context_only,
                    context=not args.files_only,
                    force=args.force,
                    current_turn=current,
                )
        except RewindConflict as exc:
            sys.stderr.write(
                f"soulwire sessions: rewind refused: changed since the session recorded them: "
                f"{', '.join(exc.paths)} (--force overwrites them, keeping a copy to undo)\n"
            )
            return 1
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    what = (
        f"Undid {result['undo_of']}"
        if args.undo
        else f"Rewound {session.id} to the start of turn {args.turn}"
    )
    print(
        f"{what}: {len(result['restored'])} file(s) restored"
        + (", conversation cut" if result["context"] and not args.undo else "")
    )
    if result["forced"]:
        undo = f"soulwire sessions rewind {session.id} --undo"
        print(f"Overwrote {', '.join(result['forced'])}; `{undo}` brings them back")
    return 0


def _fork(args: argparse.Namespace, share: Path, work_dir: str, session: SessionSummary) -> int:
    from soulwire.sessions.checkpoints.forking import fork_with_files

    result = fork_with_files(
        _book(share, work_dir, session),
        share,
        session.dir,
        turns=args.turn,
        new_work_dir=args.new_work_dir,
        title=args.title,
    )
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        how = "a git worktree" if result["git_worktree"] else "a copy"
        print(f"Forked {session.id} as {result['session_id']} in {result['work_dir']} ({how})")
    return 0
