"""`soulwire serve`: argv → settings → a bound socket → uvicorn serving the app until SIGINT /
SIGTERM, when live sessions are wound down (turns cancelled, files closed)."""

from __future__ import annotations

import argparse
import errno
import gc
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from soulwire.hosts import is_loopback
from soulwire.server.security import Guard, load_or_create_token
from soulwire.session_flags import (
    add_config_flags,
    add_max_steps_flag,
    add_sandbox_flags,
    add_thinking_flags,
    add_work_dir_flag,
    add_yolo_flag,
)
from soulwire.usage import CommandParser
from soulwire.wire.environment import SERVER_TOKEN_ENV

if TYPE_CHECKING:
    import uvicorn

    from soulwire.server.app import ServerApp
    from soulwire.server.audit import AuditLog
    from soulwire.server.prefork import Copies
    from soulwire.server.runner import Server
    from soulwire.server.users import Directory
    from soulwire.sessions.backend import SessionStores

DEFAULT_LISTEN = "127.0.0.1:7437"


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="soulwire serve",
        description="Host many sessions in one process: Wire over WebSocket and an HTTP API.",
        examples=(
            "soulwire serve                              # 127.0.0.1:7437, prints the URL with its token",
            "soulwire serve --listen 127.0.0.1:0         # any free port",
            "soulwire serve --work-dir ~/src/app --model claude",
            "soulwire serve haproxy-config --replica HOST:PORT …   # HAProxy in front of replicas",
            "soulwire serve users add alice --role admin  # named users instead of one token",
            "soulwire serve drain --url http://HOST:PORT  # hand a replica's sessions to the others",
        ),
    )
    parser.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
        help=f"address to listen on (default {DEFAULT_LISTEN}; port 0 picks a free one)",
    )  # fmt: skip
    # The sessions' settings, declared once for `soulwire` and `serve` (so one server can host
    # a fleet's sessions, docs/fleet.md): here they are the defaults of every new session.
    add_work_dir_flag(parser)
    add_config_flags(parser)
    add_yolo_flag(parser)
    add_thinking_flags(parser)
    add_max_steps_flag(parser)
    add_sandbox_flags(parser)
    parser.add_argument(
        "--checkpoints", action=argparse.BooleanOptionalAction, default=None,
        help="checkpoints of the work dir in every session (default: config [checkpoints])",
    )  # fmt: skip
    parser.add_argument(
        "--exit-with-stdin", action="store_true", help="shut down when stdin ends (a parent process died)"
    )
    parser.add_argument(
        "--processes", type=int, default=1, metavar="N",
        help="N server processes forked from one loaded process, each on its own free port "
        "(needs --listen HOST:0; one `listening on` line each; sessions stay where created)",
    )  # fmt: skip
    parser.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME",
        help="another Host name clients use for this server, or NAME:PORT of a proxy in front; repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--token-file", metavar="PATH",
        help=f"read the token from this file instead of the share dir's (or set {SERVER_TOKEN_ENV})",
    )  # fmt: skip
    parser.add_argument(
        "--request-timeout", type=float, default=300.0, metavar="SECONDS",
        help="deadline of requests to clients (approvals, questions, tool calls); default 300",
    )  # fmt: skip
    parser.add_argument(
        "--on-timeout", choices=("reject", "cancel", "approve"), default="reject",
        help="what an unanswered request counts as when its deadline passes (default reject)",
    )  # fmt: skip
    parser.add_argument(
        "--idle-timeout", type=float, default=300.0, metavar="SECONDS",
        help="close a session this long after its last client left (default 300)",
    )  # fmt: skip
    parser.add_argument(
        "--ring-events", type=int, default=20_000, metavar="N",
        help="events kept per session for clients that re-attach (default 20000)",
    )  # fmt: skip
    parser.add_argument(
        "--max-message-bytes", type=int, default=1 << 20, metavar="N",
        help="larger events reach clients that negotiated it as a blob reference (default 1 MiB)",
    )  # fmt: skip
    parser.add_argument(
        "--store", metavar="URL",
        help="a PostgreSQL session store, postgresql://USER@HOST/DB (password from PGPASSWORD/PGPASSFILE)",
    )  # fmt: skip
    parser.add_argument(
        "--advertise", metavar="URL",
        help="this replica's address that other replicas send a session's clients to "
        "(default http://HOST:PORT of --listen)",
    )  # fmt: skip
    parser.add_argument(
        "--lease", type=float, default=10.0, metavar="SECONDS",
        help="with --store: how long a replica that hangs keeps its sessions from the others (default 10)",
    )  # fmt: skip
    parser.add_argument(
        "--workspaces", metavar="DIR", type=Path,
        help="with --store: a session's work dir under DIR that is missing on this replica is made "
        "from the session's latest checkpoint when the replica takes the session over",
    )  # fmt: skip
    parser.add_argument(
        "--migrate-only", action="store_true",
        help="create or upgrade the --store's schema, then exit (for operators, one replica at a time)",
    )  # fmt: skip
    parser.add_argument(
        "--client-buffer", type=int, default=16 << 20, metavar="BYTES",
        help="a client further behind than this is disconnected (code 4008) to re-attach (default 16 MiB)",
    )  # fmt: skip
    return parser


def _split_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise ValueError(f"--listen wants HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections whose socket names
    # the protocol, and accepted ones inherit it from this one. Without it Nagle held a small
    # answer back until the client's delayed ACK (40 ms) whenever the previous small write
    # was not yet acknowledged: an `initialize` sent right after the handshake waited 40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(256)
    sock.set_inheritable(True)
    return sock


_interrupted: list[int] = []
"""The signals that came during the start-up."""


def _interrupt_start_up(sig: int, _frame: object) -> None:
    """SIGINT/SIGTERM before the server runs: stop the start-up at once, and remember it, for
    the KeyboardInterrupt is lost where it lands in a weakref callback or a finalizer (as
    during imports: "Exception ignored in …"), and the server then ran on, signal or not."""
    _interrupted.append(sig)
    raise KeyboardInterrupt


def run_serve(argv: list[str]) -> int:
    """Entry point of `soulwire serve`; returns the exit code."""
    # Until the server is up, SIGINT and SIGTERM end the start-up as quietly as they end the
    # server later (exit 0): not SIGTERM's default death, nor nothing at all when SIGINT came
    # ignored (a background job of a non-interactive shell).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt_start_up)
    # The start-up imports build thousands of classes, and the cyclic collections they set
    # off find next to nothing: ~0.1 s of a forked server's way to its first session
    # (bench/RESULTS.md §11i). Off until `_tune_gc` gives the running server its thresholds.
    gc.disable()
    try:
        return _serve(argv)
    except KeyboardInterrupt:
        for sig in (signal.SIGINT, signal.SIGTERM):  # `soulwire web` forwards a Ctrl-C we got too
            signal.signal(sig, signal.SIG_IGN)
        sys.stderr.write("soulwire serve: stopped\n")
        return 0


def _serve(argv: list[str]) -> int:
    if argv[:1] == ["haproxy-config"]:
        from soulwire.server import haproxy

        return haproxy.run(argv[1:])
    if argv[:1] == ["users"]:
        from soulwire.server import users_cli

        return users_cli.run(argv[1:])
    if argv[:1] == ["drain"]:
        from soulwire.server import drain_cli

        return drain_cli.run(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.max_steps_per_turn is not None and args.max_steps_per_turn < 1:
        parser.error("--max-steps-per-turn must be at least 1")
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    if not 1 <= args.lease <= 3600:
        parser.error("--lease must be between 1 and 3600 seconds")
    if args.migrate_only and not args.store:
        parser.error("--migrate-only needs --store URL")
    if args.migrate_only:
        return _store_only(args.store)
    from soulwire.config.loader import ConfigError, load_raw_config, share_dir

    try:
        host, port = _split_listen(args.listen)
        work_dir = Path(os.path.abspath(Path(args.work_dir or os.getcwd()).expanduser()))
        if not work_dir.is_dir():
            raise ConfigError(f"--work-dir does not exist or is not a directory: {work_dir}")
        share = share_dir()
        raw, config_path = load_raw_config(config_file=args.config_file, config_text=args.config, share=share)
        token, created = _token(args.token_file, share, loopback=is_loopback(host))
    except (ValueError, ConfigError) as exc:
        sys.stderr.write(f"soulwire serve: error: {exc}\n")
        return 2
    stores = _open_store(args, raw)
    if isinstance(stores, int):
        return stores
    if args.workspaces is not None and not stores.shared:
        sys.stderr.write("soulwire serve: error: --workspaces needs a shared store (--store URL)\n")
        return 2
    if args.processes > 1 and port != 0:
        sys.stderr.write(
            "soulwire serve: error: --processes needs --listen HOST:0 (each process takes a free port)\n"
        )
        return 2
    try:
        socks = [_bind(host, port) for _ in range(args.processes)]
    except OSError as exc:
        in_use = exc.errno == errno.EADDRINUSE
        hint = (
            "; stop what uses it or pick another port (--listen HOST:0 takes any free one)" if in_use else ""
        )
        sys.stderr.write(
            f"soulwire serve: error: cannot listen on {args.listen}: {exc.strerror or exc}{hint}\n"
        )
        return 1
    ports = [sock.getsockname()[1] for sock in socks]
    shown = f"[{host}]" if ":" in host else host
    urls = [f"http://{shown}:{p}" for p in ports]
    base = urls[0]
    if not is_loopback(host):
        sys.stderr.write(f"soulwire serve: warning: listening on {host}, reachable from other machines\n")
    # Clients may connect now: the kernel queues them until the server (or its copy) accepts.
    for url in urls:
        sys.stderr.write(f"soulwire serve: listening on {url}\n")
    if created:
        sys.stderr.write(f"soulwire serve: open {base}/?token={token}  (token saved in the share dir)\n")
    sys.stderr.flush()

    from soulwire.server.app import create_app
    from soulwire.server.blobs import BlobStore
    from soulwire.server.messages import HubSettings
    from soulwire.server.registry import ServeSettings
    from soulwire.sessions.postgres import StoreError

    settings = ServeSettings(
        share=share,
        work_dir=work_dir,
        raw_config=raw,
        config_path=config_path,
        model=args.model,
        yolo=args.yolo,
        thinking=args.thinking,
        max_steps_per_turn=args.max_steps_per_turn,
        sandbox=args.sandbox,
        sandbox_network=None if args.sandbox_network is None else args.sandbox_network == "on",
        checkpoints=args.checkpoints,
        overlay=args.overlay,
        idle_timeout_s=args.idle_timeout,
        hub=HubSettings(
            deadline_ms=max(1, round(args.request_timeout * 1000)),
            on_timeout=args.on_timeout,
            ring_events=args.ring_events,
            client_queue_bytes=args.client_buffer,
            max_message_bytes=args.max_message_bytes,
            blobs=BlobStore(share / "blobs"),
        ),
        stores=stores,
        advertise=(args.advertise or base).rstrip("/"),
        lease_s=args.lease,
        workspaces=args.workspaces.expanduser().absolute() if args.workspaces else None,
    )
    guard = Guard.for_listen(token, host, ports, args.allow_host)
    try:
        guard.users, settings.hub.audit = _accounts(share, stores)
    except StoreError as exc:
        sys.stderr.write(f"soulwire serve: error: {exc}\n")
        return 1
    # One process: its HTTP API (the web UI's first page needs it) is built in a worker thread
    # as the server starts, alongside the first requests (the page's static files, a first
    # session). Forked copies build it at their first request for it: fleets never make one.
    app = create_app(settings, guard, build_api_at_start=len(socks) == 1)
    config = _uvicorn_config(app)
    if len(socks) == 1:
        return _run_uvicorn(app, config, socks[0], exit_with_stdin=args.exit_with_stdin)
    from soulwire.server import prefork

    prefork.preload(raw, args.model)
    # uvicorn's protocol classes (and the rest of uvicorn) imported once, before the fork: each
    # copy imported them on its way to serving (~50 ms), uvicorn loading its config there.
    config.load()
    _tune_gc(collect=False)  # before the fork: the copies share the frozen heap instead of each walking it
    index, copies, watch = prefork.fork_copies(socks, urls)
    return _run_uvicorn(
        app,
        config,
        socks[index],
        exit_with_stdin=args.exit_with_stdin,
        copies=copies,
        watch=watch,
        tune_gc=False,
    )


def _open_store(args: argparse.Namespace, raw: dict[str, object]) -> SessionStores | int:
    """The stores sessions are kept in: a PostgreSQL database from `--store` or the config's
    `[store] url` (connected and migrated now; an exit code when that fails), else files."""
    from soulwire.sessions.backend import FILE_STORES, store_url

    url = store_url(raw, args.store)
    if url is None:
        return FILE_STORES
    if args.processes > 1:
        sys.stderr.write("soulwire serve: error: --store runs one process per replica (no --processes)\n")
        return 2
    from soulwire.sessions.pg_catalog import PostgresStores
    from soulwire.sessions.postgres import StoreError, connect_from_argv

    try:
        backend = connect_from_argv(url)  # migrates, or refuses a newer schema
    except StoreError as exc:
        sys.stderr.write(f"soulwire serve: error: {exc}\n")
        return 1
    backend.pool.resize(min_size=2, max_size=20)  # every live session writes through it
    return PostgresStores(backend)


def _accounts(share: Path, stores: SessionStores) -> tuple[Directory, AuditLog]:
    """Where the named users and the audit trail are: the store's database (its pool), else
    the share dir."""
    from soulwire.server.audit import FileAudit, PostgresAudit
    from soulwire.server.users import Directory, FileUsers, PostgresUsers

    if not stores.shared:
        return Directory(FileUsers(share)), FileAudit(share)
    from soulwire.sessions.pg_catalog import PostgresStores

    assert isinstance(stores, PostgresStores)  # the one shared kind
    return Directory(PostgresUsers(stores.backend)), PostgresAudit(stores.backend)


def _store_only(url: str) -> int:
    """`--store URL --migrate-only`: bring the schema to this version and exit."""
    from soulwire.sessions.postgres import SCHEMA_VERSION, StoreError, connect_from_argv

    try:
        backend = connect_from_argv(url)  # migrates, or refuses a newer schema
    except StoreError as exc:
        sys.stderr.write(f"soulwire serve: error: {exc}\n")
        return 1
    backend.close()
    sys.stderr.write(f"soulwire serve: the session store's schema is at version {SCHEMA_VERSION}\n")
    return 0


def _token(token_file: str | None, share: Path, *, loopback: bool) -> tuple[str, bool]:
    """The token (and whether it was just generated). Off loopback it must be given explicitly."""
    if token_file:
        token = Path(token_file).expanduser().read_text(encoding="utf-8").strip()
        if len(token) < 16:
            raise ValueError("the token file must hold a token of at least 16 characters")
        return token, False
    env = os.environ.get(SERVER_TOKEN_ENV, "").strip()
    if env:
        if len(env) < 16:
            raise ValueError(f"{SERVER_TOKEN_ENV} must be at least 16 characters")
        return env, False
    if not loopback:
        raise ValueError(
            f"listening beyond loopback needs an explicit token: --token-file or {SERVER_TOKEN_ENV}"
        )

    return load_or_create_token(share)


async def _stop_at_stdin_eof(server: Server) -> None:
    """Shut down gracefully when stdin ends: the parent that holds the pipe is gone (a fleet
    worker killed with SIGKILL), so the server does not outlive it."""
    import asyncio
    import threading

    loop = asyncio.get_running_loop()  # uvicorn runs on asyncio
    ended = asyncio.Event()

    def read() -> None:
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        try:
            loop.call_soon_threadsafe(ended.set)
        except RuntimeError:
            pass  # the loop closed first: the server is already down

    # A daemon thread, not a worker thread: a read blocked on a pipe the parent still holds
    # must not keep the process alive after a SIGTERM shutdown (the interpreter joins
    # non-daemon threads at exit, and this one would wait until the parent closed the pipe).
    threading.Thread(target=read, name="stdin-eof", daemon=True).start()
    await ended.wait()
    server.stop()


def _uvicorn_config(app: ServerApp) -> uvicorn.Config:
    """How uvicorn serves `app` (loaded when the server starts, or before a fork)."""
    import logging

    import uvicorn

    # uvicorn's sans-io WebSocket protocol logs a denial response (our 404/409 before the
    # handshake) as an error although it was sent: drop that one misleading line.
    logging.getLogger("uvicorn.error").addFilter(
        lambda record: "returned without completing handshake" not in record.getMessage()
    )
    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        ws_max_size=16 << 20,
        # Compressing every small event costs more CPU than the whole engine spends on it
        # (measured in bench/serve_bench.py); JSON events are small and loopback is the default.
        ws_per_message_deflate=False,
    )


def _run_uvicorn(
    app: ServerApp,
    config: uvicorn.Config,
    sock: socket.socket,
    *,
    exit_with_stdin: bool = False,
    copies: Copies | None = None,
    watch: int | None = None,
    tune_gc: bool = True,
) -> int:
    """Serve `app` (with `config`) on `sock` until a signal (or stdin's end), then end the
    process (exit code 0; at once where every session was wound down, see `_exit_now`); with
    `copies` (the first of several processes), report copies that die and stop them with this
    one; with `watch` (a copy on a system that cannot signal it), stop when that parent is
    gone; `tune_gc=False` where it was done before a fork."""
    import anyio

    from soulwire.server.runner import Server

    # The copies are told to stop as the shutdown begins, to wind down alongside this process.
    server = Server(config, on_stop=copies.terminate if copies is not None else None)
    if tune_gc:
        _tune_gc()
    if watch is not None:
        from soulwire.server.prefork import watch_parent

        watch_parent(watch, server.stop)
    # From here on a signal only asks the server to stop, as uvicorn's handler does: an
    # exception raised into the event loop could land anywhere. One that comes before the
    # server serves stops it right after its start-up (lifespan and all).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, server.handle_exit)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            if exit_with_stdin:
                group.start_soon(_stop_at_stdin_eof, server)
            if copies is not None:
                group.start_soon(_report_copies, copies, server)
            await server.serve(sockets=[sock])
            group.cancel_scope.cancel()

    try:
        if _interrupted:  # its KeyboardInterrupt was swallowed
            raise KeyboardInterrupt
        anyio.run(main)
    finally:
        if copies is not None:
            copies.stop(timeout=config.timeout_graceful_shutdown or 5)
    sys.stderr.write("soulwire serve: stopped\n")
    if app.wound_down:
        _exit_now(0)
    # A forced stop (a second Ctrl-C) skipped the sessions' wind-down, or a session did not
    # finish in time: the interpreter's exit still waits for their pending writes.
    return 0


def _exit_now(code: int) -> NoReturn:
    """End the process without the interpreter's teardown: 50-75 ms per process of freeing a
    server's modules and heap, on the path of every stop (a fleet waits for its engines).
    Called only when nothing is left to lose: the lifespan's shutdown closed every session
    (turns cancelled, state saved, files closed, tool processes killed; session files are
    written unbuffered), the copies were reaped, and here the log handlers and the standard
    streams are flushed. A forked copy also skips, this way, the exit handlers it inherited
    from the process that forked it."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be written
            pass
    os._exit(code)


async def _report_copies(copies: Copies, server: Server) -> None:
    """Say on stderr which forked copy died (a fleet fails over the sessions it held), unless
    the server is stopping (a signal to the process group ends the copies too)."""
    import anyio

    def report(line: str) -> None:
        if not server.should_exit:
            sys.stderr.write(line)
            sys.stderr.flush()

    with anyio.open_signal_receiver(signal.SIGCHLD) as signals:
        copies.reap(report)  # one that died before the receiver was installed
        async for _ in signals:
            copies.reap(report)


def _tune_gc(*, collect: bool = True) -> None:
    """Fewer, cheaper cyclic collections for a long-lived process full of ring entries.

    With 100 sessions streaming, CPython's default thresholds (700, 10, 10) ran a collection
    every few events and full ones over every live session's ring: a third of the server's
    CPU (bench/RESULTS.md §10). Objects that exist at start-up are frozen out of collection;
    young cycles are still collected, every 20,000 allocations instead of 700. `collect=False`
    skips the full collection first (~0.1 s on the start-up path of forked servers: what
    garbage the imports left is not worth that wait before the first session)."""
    from soulwire.config.process_env import collect_rarely

    collect_rarely(collect_first=collect)  # (off since `run_serve` began)


__all__ = ["run_serve"]
