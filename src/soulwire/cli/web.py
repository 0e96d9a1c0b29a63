"""`soulwire web` and `soulwire vis`: open the web app of a local `soulwire serve` in the browser
— the one already listening on the address, or one started now and kept in the foreground
until Ctrl-C. The browser gets a one-time login URL whose token the server trades for an
HttpOnly cookie, so the token leaves the address bar at once."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

from soulwire.usage import CommandParser

DEFAULT_LISTEN = "127.0.0.1:7437"


def _parser(command: str) -> argparse.ArgumentParser:
    what = "the trace view of a session" if command == "vis" else "sessions in the browser"
    examples = (
        ["soulwire vis", "soulwire vis 3f2a…", "soulwire vis --no-browser"]
        if command == "vis"
        else ["soulwire web", "soulwire web -w ~/repo", "soulwire web --listen 127.0.0.1:8080 --no-browser"]
    )
    parser = CommandParser(
        prog=f"soulwire {command}",
        description=f"Open {what} (starts `soulwire serve` if needed).",
        examples=examples,
    )
    if command == "vis":
        parser.add_argument("session", nargs="?", help="session id (default: pick one in the browser)")
    parser.add_argument("--work-dir", "-w", metavar="PATH", help="work dir of new sessions (default: cwd)")
    parser.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help=f"default {DEFAULT_LISTEN}"
    )
    parser.add_argument(
        "--no-browser", action="store_true", help="print the URL instead of opening a browser"
    )
    parser.add_argument("--config-file", metavar="PATH", help="configuration file of a server started now")
    parser.add_argument("--model", "-m", metavar="NAME", help="model alias of a server started now")
    parser.add_argument("--yolo", action="store_true", help="a server started now approves every tool call")
    return parser


def run_web(command: str, argv: list[str]) -> int:
    """Entry point of `soulwire web` / `soulwire vis`; returns the exit code."""
    # Ctrl-C and SIGTERM both stop a server started here (SIGTERM's default would orphan it),
    # also when this process came with SIGINT ignored, as a background job of a
    # non-interactive shell does: Python then raises no KeyboardInterrupt and both ran on.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)
    args = _parser(command).parse_args(argv)
    from soulwire.config.loader import share_dir

    share = share_dir()
    work_dir = Path(os.path.abspath(Path(args.work_dir or os.getcwd()).expanduser()))
    if not work_dir.is_dir():
        sys.stderr.write(f"soulwire {command}: error: --work-dir is not a directory: {work_dir}\n")
        return 2
    session = getattr(args, "session", None)
    if session is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,128}", session):
        sys.stderr.write(f"soulwire {command}: error: not a session id: {session!r}\n")
        return 2
    target = f"/web/#/trace/{session}" if session else "/web/#/trace" if command == "vis" else "/web/"
    if command == "web" and args.work_dir:
        target = f"/web/#/new?work_dir={quote(str(work_dir))}"

    host, _, port = args.listen.rpartition(":")
    base = f"http://{host}:{port}"
    token = _read_token(share)
    listen = args.listen
    if port != "0":
        status, body = _get(base, token or "-", "/")
        if status == 200 and isinstance(body, dict) and body.get("name") == "soulwire":
            assert token is not None
            if session and not _session_exists(base, token, session):
                sys.stderr.write(f"soulwire {command}: error: no session {session!r}\n")
                return 2
            _open(base, token, target, args.no_browser, command)
            return 0
        # Taken by another program, or a server with another token (or one too busy to answer
        # the probe in time: a refused connection is the only sign of a free port).
        if status != 0 or _accepts_connections(host, int(port)):
            sys.stderr.write(f"soulwire {command}: {args.listen} is taken; starting on a free port\n")
            listen = f"{host}:0"

    serve = [sys.executable, "-m", "soulwire", "serve", "--listen", listen, "--work-dir", str(work_dir)]
    if args.config_file:
        serve += ["--config-file", args.config_file]
    if args.model:
        serve += ["--model", args.model]
    if args.yolo:
        serve.append("--yolo")
    # Its own session: a Ctrl-C in the terminal reaches this process only, which passes it on
    # once (the terminal's copy and ours both arriving made uvicorn skip the graceful stop).
    # It holds our pipe instead, and stops when we are gone however we end.
    serve.append("--exit-with-stdin")
    proc = subprocess.Popen(serve, stdin=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace")
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                base = found.group(1)
                token = _read_token(share) or ""
                if session and not _session_exists(base, token, session):
                    sys.stderr.write(f"soulwire {command}: warning: no session {session!r} yet\n")
                _open(base, token, target, args.no_browser, command)
                sys.stderr.write(f"soulwire {command}: serving until Ctrl-C\n")
                sys.stderr.flush()
            elif "open http" not in line:  # the token line: our own URL replaces it
                sys.stderr.write(line)
                sys.stderr.flush()
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # a second Ctrl-C does not wait
            proc.kill()
            proc.wait()
        return 0


def _read_token(share: Path) -> str | None:
    from soulwire.config.loader import client_token

    return client_token(share=share)


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=2):
            return True
    except OSError:
        return False


def _get(base: str, token: str, path: str) -> tuple[int, object]:
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


def _session_exists(base: str, token: str, session: str) -> bool:
    return _get(base, token, f"/api/sessions/{session}")[0] == 200


def _open(base: str, token: str, target: str, no_browser: bool, command: str) -> None:
    url = f"{base}/web/login?token={quote(token)}&next={quote(target, safe='')}"
    if not no_browser:
        import webbrowser

        if webbrowser.open(url):
            sys.stderr.write(f"soulwire {command}: opened {base}{target}\n")
            sys.stderr.flush()
            return
    sys.stderr.write(f"soulwire {command}: open {url}\n")
    sys.stderr.flush()


__all__ = ["run_web"]
