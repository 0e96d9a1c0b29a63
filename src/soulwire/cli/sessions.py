"""`soulwire sessions list|show|delete|export|import|fork|…`: the sessions of a work dir, from
the shell (export/import --store move a session to and from a PostgreSQL store; the workspace
checkpoint commands are in cli/checkpoints.py)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulwire.cli import checkpoints
from soulwire.config.loader import share_dir
from soulwire.sessions.export import context_to_markdown
from soulwire.sessions.fork import ForkError, fork_session
from soulwire.sessions.listing import (
    SessionNotFound,
    SessionSummary,
    delete_session,
    find_session,
    list_sessions,
    summarise_session,
)
from soulwire.sessions.paths import normalise_work_dir
from soulwire.sessions.store import FileSessionStore
from soulwire.sessions.transfer import Copied, TransferError, copy_session
from soulwire.usage import CommandParser

if TYPE_CHECKING:
    from soulwire.sessions.postgres import PostgresBackend


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="soulwire sessions",
        description="Sessions of a work dir (default: the current directory).",
        examples=(
            "soulwire sessions list",
            "soulwire sessions list --work-dir ~/src/app --json",
            "soulwire sessions show 3f2a        # an id or a unique prefix",
            "soulwire sessions export 3f2a --out notes.md",
            "soulwire sessions export 3f2a --store postgresql://me@db/soulwire   # copy it there",
            "soulwire sessions import 3f2a --store postgresql://me@db/soulwire   # and back",
            "soulwire sessions changes 3f2a --turn 2      # what turn 2 did to the files",
            "soulwire sessions rewind 3f2a --turn 2       # back to before turn 2",
            "soulwire --session 3f2a            # resume it in the terminal UI",
        ),
    )
    work_dir_help = "the work dir whose sessions to use"
    parser.add_argument("--work-dir", "-w", metavar="PATH", help=work_dir_help)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        # accepted after the command too; SUPPRESS keeps a value given before it
        sub.add_argument("--work-dir", "-w", metavar="PATH", default=argparse.SUPPRESS, help=work_dir_help)
        return sub

    listing = command("list", "list sessions, most recent first")
    listing.add_argument("--json", action="store_true", help="one JSON array")
    show = command("show", "details of one session")
    show.add_argument("session", metavar="ID", help="session id or a unique prefix")
    show.add_argument("--json", action="store_true")
    delete = command("delete", "delete a session and its files")
    delete.add_argument("session", metavar="ID")
    delete.add_argument("--json", action="store_true")
    history = command("history", "the session's recorded Wire messages, one JSON object a line")
    history.add_argument("session", metavar="ID")
    fork = command("fork", "a new session with a copy of this one's history")
    fork.add_argument("session", metavar="ID")
    fork.add_argument("--turn", type=int, metavar="N", help="keep only the first N turns (default: all)")
    fork.add_argument("--title", help="the new session's title (default: 'Fork of …')")
    fork.add_argument("--json", action="store_true", help="print the new session as JSON")
    checkpoints.fork_arguments(fork)
    checkpoints.add_commands(command)
    export = command("export", "the session's context as Markdown")
    export.add_argument("session", metavar="ID")
    export.add_argument(
        "--out", "--output", "-o", dest="output", metavar="FILE", help="write here instead of stdout"
    )
    export.add_argument(
        "--full", action="store_true", help="include contexts archived by /clear or compaction"
    )
    store_help = "a PostgreSQL session store, postgresql://USER@HOST/DB (password from PGPASSWORD/PGPASSFILE)"
    export.add_argument("--store", metavar="URL", help=f"copy the whole session into {store_help}")
    imported = command("import", "copy a session from a PostgreSQL store into this work dir's sessions")
    imported.add_argument("session", metavar="ID", help="the session's id in the store (or a unique prefix)")
    imported.add_argument("--store", metavar="URL", required=True, help=store_help)
    return parser


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


def _size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _list(sessions: list[SessionSummary], as_json: bool) -> None:
    if as_json:
        print(json.dumps([s.to_json() for s in sessions], ensure_ascii=False, indent=2))
        return
    if not sessions:
        print("No sessions for this work dir.")
        return
    for s in sessions:
        mark = "*" if s.is_last else " "
        title = s.title or "(untitled)"
        turns = f"{s.turns} turn" + ("" if s.turns == 1 else "s")
        print(f"{mark} {s.id}  {_when(s.updated)}  {turns:>10}  {_size(s.size):>9}  {title}")


def _show(share: Path, work_dir: str, session: SessionSummary, as_json: bool) -> None:
    store = FileSessionStore(share, work_dir, session.id, protocol_version="")
    state = store.load_state()
    details: dict[str, Any] = {
        **session.to_json(),
        "work_dir": work_dir,
        "wire_protocol_version": store.wire_protocol_version(),
        "archived_contexts": store.archived_contexts(),
        "messages": sum(1 for r in store.load_context() if not str(r.get("role", "_")).startswith("_")),
        "state": state,
    }
    if as_json:
        print(json.dumps(details, ensure_ascii=False, indent=2))
        return
    print(f"Session   {session.id}{'  (last)' if session.is_last else ''}")
    print(f"Title     {session.title or '(untitled)'}")
    print(f"Work dir  {work_dir}")
    print(f"Files     {session.dir}")
    print(f"Created   {_when(session.created)}   Updated {_when(session.updated)}")
    print(f"Turns     {session.turns}   Messages {details['messages']}   Size {_size(session.size)}")
    print(f"Contexts  1 current + {details['archived_contexts']} archived")
    approval = state.get("approval") or {}
    rules = len(approval.get("auto_approve_actions") or [])
    print(f"Approval  yolo={approval.get('yolo', False)} rules={rules}")
    todos = state.get("todos") or []
    if todos:
        print("Todos")
        for todo in todos:
            if isinstance(todo, dict):
                print(f"  [{todo.get('status', '?')}] {todo.get('title', '')}")


def _export(share: Path, work_dir: str, session: SessionSummary, output: str | None, full: bool) -> None:
    store = FileSessionStore(share, work_dir, session.id, protocol_version="")

    def records() -> Any:
        if full:
            for index in range(1, store.archived_contexts() + 1):
                yield from store.load_archived_context(index)
        yield from store.load_context()

    text = context_to_markdown(records(), session_id=session.id, title=session.title, work_dir=work_dir)
    if output is None:
        sys.stdout.write(text)
        return
    Path(output).write_text(text, encoding="utf-8")
    print(f"Exported {session.id} to {output}", file=sys.stderr)


def _copy_to_store(share: Path, work_dir: str, session: SessionSummary, url: str) -> int:
    source = FileSessionStore(share, work_dir, session.id, protocol_version="")

    def copy(backend: PostgresBackend) -> tuple[str, Copied]:
        return session.id, copy_session(source, backend.open(session.id, work_dir=work_dir))

    return _with_store(url, copy, "Copied {id} to {url}: {copied.wire_messages} messages")


def _import(share: Path, work_dir: str, wanted: str, url: str) -> int:
    def copy(backend: PostgresBackend) -> tuple[str, Copied]:
        from soulwire.sessions.postgres import redact

        matches = [i for i in backend.session_ids() if i.startswith(wanted)]
        if len(matches) != 1:
            found = "no session" if not matches else f"{len(matches)} sessions"
            raise TransferError(f"{found} in {redact(url)} match {wanted!r}")
        target = FileSessionStore(share, work_dir, matches[0], protocol_version="")
        try:
            return matches[0], copy_session(backend.open(matches[0]), target)
        finally:
            target.close()

    return _with_store(
        url,
        copy,
        "Imported {id} from {url}: {copied.wire_messages} messages (resume it: soulwire --session {id})",
    )


def _with_store(url: str, copy: Callable[[PostgresBackend], tuple[str, Copied]], done: str) -> int:
    """Connect to the store a person named, make the copy, say what was done in one line."""
    from soulwire.sessions.postgres import StoreError, connect_from_argv, redact

    try:
        backend = connect_from_argv(url)
        try:
            session_id, copied = copy(backend)
        finally:
            backend.close()
    except (StoreError, TransferError) as exc:
        sys.stderr.write(f"soulwire sessions: {exc}\n")
        return 1
    print(done.format(id=session_id, url=redact(url), copied=copied))
    return 0


def _history(share: Path, work_dir: str, session: SessionSummary) -> None:
    store = FileSessionStore(share, work_dir, session.id, protocol_version="")
    out = sys.stdout
    for message in store.wire_records():
        out.write(json.dumps(message, ensure_ascii=False) + "\n")


def _fork(
    share: Path, work_dir: str, session: SessionSummary, turn: int | None, title: str | None, as_json: bool
) -> None:
    new_id, directory = fork_session(share, work_dir, session.dir, turns=turn, title=title)
    summary = summarise_session(directory)
    if as_json:
        print(json.dumps(summary.to_json() if summary else {"id": new_id}, ensure_ascii=False))
    else:
        print(f"Forked {session.id} as {new_id}")


def run_sessions(argv: list[str]) -> int:
    """Entry point of `soulwire sessions`; returns the exit code."""
    args = _parser().parse_args(argv)
    work_dir = normalise_work_dir(Path(args.work_dir or os.getcwd()).expanduser())
    share = share_dir()
    try:
        if args.command == "list":
            _list(list_sessions(share, work_dir), args.json)
            return 0
        if args.command == "import":
            return _import(share, work_dir, args.session, args.store)
        session = find_session(share, work_dir, args.session)
        if args.command == "show":
            _show(share, work_dir, session, args.json)
        elif args.command == "delete":
            delete_session(share, work_dir, session)
            print(json.dumps({"deleted": session.id}) if args.json else f"Deleted session {session.id}")
        elif args.command == "history":
            _history(share, work_dir, session)
        elif args.command in ("checkpoints", "changes", "rewind") or getattr(args, "new_work_dir", None):
            return checkpoints.run(args, share, work_dir, session)
        elif args.command == "fork":
            _fork(share, work_dir, session, args.turn, args.title, args.json)
        elif args.store:
            return _copy_to_store(share, work_dir, session, args.store)
        else:
            _export(share, work_dir, session, args.output, args.full)
    except (SessionNotFound, ForkError) as exc:
        sys.stderr.write(f"soulwire sessions: {exc}\n")
        return 1
    except BrokenPipeError:
        raise  # the reader went away (`| head`): the CLI ends quietly
    except OSError as exc:
        sys.stderr.write(f"soulwire sessions: {exc}\n")
        return 1
    return 0
