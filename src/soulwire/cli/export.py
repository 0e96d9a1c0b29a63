"""`soulwire export [SESSION_ID]`: a session as a ZIP archive, as `kimi export` makes it
(`manifest.json`, every file of the session directory — sub-agents and tasks included — and the
recent logs under `logs/`); and `soulwire import ZIP`: such an archive unpacked as a session of a
work dir, ready for `soulwire --session ID` (the reference has no import command; its archives
import too)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from soulwire import __version__
from soulwire.config.loader import share_dir
from soulwire.sessions.listing import SessionNotFound, find_session, list_sessions
from soulwire.sessions.paths import is_valid_session_id, normalise_work_dir, session_dir
from soulwire.usage import CommandFailed, CommandParser

LOG_WINDOW_S = 2 * 24 * 3600
MAX_LOG_BYTES = 100 * 1024 * 1024
MAX_IMPORT_BYTES = 2 * 1024 * 1024 * 1024
"""An archive that unpacks to more than this is refused (a ZIP bomb, not a session)."""


_Parser = CommandParser  # one-line usage errors (exit 2) and examples in --help, as every command


def run_export(argv: list[str]) -> int:
    parser = _Parser(
        prog="soulwire export",
        description="Export a session as a ZIP archive.",
        examples=[
            "soulwire export",
            "soulwire export 3f2a… -o session.zip",
            "soulwire export --yes -w ~/repo",
        ],
    )
    parser.add_argument("session", nargs="?", metavar="SESSION_ID", help="default: the previous session")
    parser.add_argument("--output", "-o", metavar="PATH", help="default: session-<id>.zip here")
    parser.add_argument("--yes", "-y", action="store_true", help="no confirmation for the previous session")
    parser.add_argument("--work-dir", "-w", metavar="PATH", help="the sessions' work dir (default: here)")
    args = parser.parse_args(argv)
    try:
        print(_export(args))
    except CommandFailed as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    return 0


def run_import(argv: list[str]) -> int:
    parser = _Parser(
        prog="soulwire import",
        description="Import a session archive made by `soulwire export` or `kimi export`.",
        examples=["soulwire import session.zip", "soulwire import session.zip -w ~/repo --session my-copy"],
    )
    parser.add_argument("archive", metavar="ZIP")
    parser.add_argument("--work-dir", "-w", metavar="PATH", help="the work dir it belongs to (default: here)")
    parser.add_argument("--session", metavar="ID", help="store it under this id (default: its own)")
    args = parser.parse_args(argv)
    try:
        session_id, where = _import(args)
    except CommandFailed as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    print(f"Imported session {session_id} into {where}")
    print(f"Resume it with: soulwire --session {session_id}")
    return 0


# ------------------------------------------------------------------ export


def _export(args: argparse.Namespace) -> str:
    share = share_dir()
    work_dir = normalise_work_dir(Path(args.work_dir or os.getcwd()).expanduser())
    try:
        if args.session is None:
            last = [s for s in list_sessions(share, work_dir) if s.is_last]
            if not last:
                raise CommandFailed("no previous session found for the working directory.")
            session = last[0]
            if not args.yes and not _confirm(session.id, session.title, work_dir):
                return "Export cancelled."
        else:
            session = find_session(share, work_dir, args.session)
    except SessionNotFound:
        found = _anywhere(share, args.session) if args.session else None
        if found is None:
            raise CommandFailed(f"session '{args.session}' not found.") from None
        directory, session_id = found, str(args.session)
    else:
        directory, session_id = session.dir, session.id
    files = sorted(f for f in directory.rglob("*") if f.is_file())
    if not files:
        raise CommandFailed(f"session '{session_id}' has no files.")
    output = Path(args.output or f"session-{session_id}.zip").expanduser()
    logs = _recent_logs(share)
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(_manifest(session_id, work_dir), indent=2))
        for path in files:
            try:
                archive.write(path, arcname=path.relative_to(directory).as_posix())
            except OSError:
                continue  # a file that vanished meanwhile
        for path in logs:
            archive.write(path, arcname=f"logs/{path.name}")
    if logs:
        sys.stderr.write(
            "\nNote: This archive includes recent diagnostic logs that may contain file paths, "
            "commands, or configuration from other sessions. Please review the contents before sharing.\n"
        )
    return str(output)


def _anywhere(share: Path, session_id: str) -> Path | None:
    """A session of another work dir, by its exact id."""
    root = share / "sessions"
    if not is_valid_session_id(session_id) or not root.is_dir():
        return None
    return next((d / session_id for d in root.iterdir() if (d / session_id).is_dir()), None)


def _confirm(session_id: str, title: str | None, work_dir: str) -> bool:
    print("About to export the previous session for this working directory:\n")
    print(f"Work dir: {work_dir}\nSession ID: {session_id}\nTitle: {title or '(untitled)'}\n")
    if not sys.stdin.isatty():
        raise CommandFailed(
            "confirmation needed: run with --yes (or name the session) when not in a terminal."
        )
    return input("Export this session? [y/N]: ").strip().lower() in ("y", "yes")


def _manifest(session_id: str, work_dir: str) -> dict[str, str]:
    return {
        "session_id": session_id,
        "work_dir": work_dir,
        "exported_at": datetime.now(UTC).isoformat(),
        "soulwire_version": __version__,
        "python_version": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.machine(),
    }


def _recent_logs(share: Path) -> list[Path]:
    logs = share / "logs"
    if not logs.is_dir():
        return []
    cutoff = time.time() - LOG_WINDOW_S
    found = sorted(
        (p for p in logs.iterdir() if p.is_file() and p.suffix == ".log" and p.stat().st_mtime >= cutoff),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    chosen: list[Path] = []
    total = 0
    for path in found:
        total += path.stat().st_size
        if total > MAX_LOG_BYTES:
            break
        chosen.append(path)
    return chosen


# ------------------------------------------------------------------ import


def _import(args: argparse.Namespace) -> tuple[str, Path]:
    share = share_dir()
    work_dir = normalise_work_dir(Path(args.work_dir or os.getcwd()).expanduser())
    try:
        archive = zipfile.ZipFile(Path(args.archive).expanduser())
    except (OSError, zipfile.BadZipFile) as exc:
        raise CommandFailed(f"cannot read {args.archive}: {exc}") from None
    with archive:
        names = [i for i in archive.infolist() if not i.is_dir()]
        manifest: dict[str, object] = {}
        if "manifest.json" in archive.namelist():
            try:
                manifest = json.loads(archive.read("manifest.json"))
            except ValueError:
                manifest = {}
        session_id = str(args.session or manifest.get("session_id") or "")
        if not is_valid_session_id(session_id):
            raise CommandFailed("the archive names no session id: give one with --session ID.")
        if not any(i.filename in ("context.jsonl", "wire.jsonl") for i in names):
            raise CommandFailed(f"{args.archive} is not a session archive (no context.jsonl or wire.jsonl).")
        if sum(i.file_size for i in names) > MAX_IMPORT_BYTES:
            raise CommandFailed(f"{args.archive} unpacks to more than {MAX_IMPORT_BYTES >> 30} GiB.")
        target = session_dir(share, work_dir, session_id)
        if target.exists():
            raise CommandFailed(
                f"session '{session_id}' already exists in {work_dir}: choose another id with --session."
            )
        members = [(i, _safe_member(i.filename)) for i in names]
        staging = target.with_name(f".{session_id}.importing")
        try:
            for info, relative in members:
                if relative is None:
                    continue  # manifest, logs, or a path that would leave the session directory
                destination = staging / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(archive.read(info))
            staging.rename(target)
        except OSError as exc:
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
            raise CommandFailed(f"cannot write the session: {exc}") from None
    return session_id, target


def _safe_member(name: str) -> PurePosixPath | None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or "\\" in name:
        return None
    if path.parts[0] in ("manifest.json", "logs"):
        return None
    return path
