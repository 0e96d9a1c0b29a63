"""`soulwire serve users add|list|remove|rotate-token`: the named users of a server, in the
share dir (the file store) or in a PostgreSQL store (`--store URL`)."""

from __future__ import annotations

import sys
from collections.abc import Generator
from contextlib import contextmanager
from datetime import UTC, datetime

from soulwire.server.users import (
    ROLES,
    FileUsers,
    PostgresUsers,
    UserBackend,
    UserError,
    add_user,
    rotate_token,
)
from soulwire.usage import CommandParser


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="soulwire serve users",
        description="Named users of `soulwire serve`: each has a token and a role. With none defined, "
        "the server keeps its single token; once one is, only users' tokens are accepted.",
        examples=(
            "soulwire serve users add alice --role admin     # prints alice's token, once",
            "soulwire serve users add bob                    # a member",
            "soulwire serve users list",
            "soulwire serve users rotate-token bob           # a new token; the old one stops working",
            "soulwire serve users remove bob",
            "soulwire serve users --store postgresql://soulwire@db/soulwire add carol --role observer",
        ),
    )
    parser.add_argument(
        "--store", metavar="URL",
        help="the replicas' PostgreSQL store (password from PGPASSWORD/PGPASSFILE); default: the share dir",
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = commands.add_parser("add", help="add a user and print their token (shown only this once)")
    add.add_argument("name")
    add.add_argument(
        "--role", choices=ROLES, default="member",
        help="admin: everything and the audit; member: own and shared sessions; observer: watch only",
    )  # fmt: skip
    commands.add_parser("list", help="the users and their roles (never their tokens)")
    remove = commands.add_parser("remove", help="remove a user (their token stops working)")
    remove.add_argument("name")
    rotate = commands.add_parser("rotate-token", help="a new token for a user; the old one stops working")
    rotate.add_argument("name")
    return parser


@contextmanager
def _backend(store: str | None) -> Generator[UserBackend]:
    if store is None:
        from soulwire.config.loader import share_dir

        yield FileUsers(share_dir())
        return
    from soulwire.sessions.postgres import connect_from_argv

    backend = connect_from_argv(store)  # migrates (the users' tables are in schema 3)
    try:
        yield PostgresUsers(backend)
    finally:
        backend.close()


def run(argv: list[str]) -> int:
    """Entry point of `soulwire serve users`; returns the exit code."""
    from soulwire.sessions.postgres import StoreError

    args = _parser().parse_args(argv)
    try:
        with _backend(args.store) as backend:
            return _command(backend, args.command, getattr(args, "name", ""), getattr(args, "role", ""))
    except (UserError, StoreError) as exc:
        sys.stderr.write(f"soulwire serve users: error: {exc}\n")
        return 1


def _command(backend: UserBackend, command: str, name: str, role: str) -> int:
    if command == "add":
        token = add_user(backend, name, role)
        sys.stdout.write(token + "\n")
        sys.stderr.write(f"soulwire serve users: added {name} ({role}); the token above is shown only once\n")
    elif command == "rotate-token":
        token = rotate_token(backend, name)
        sys.stdout.write(token + "\n")
        sys.stderr.write(f"soulwire serve users: new token for {name}; the old one no longer works\n")
    elif command == "remove":
        if not backend.remove(name):
            raise UserError(f"no user {name!r}")
        sys.stderr.write(f"soulwire serve users: removed {name}\n")
    else:
        users = backend.load()
        if not users:
            sys.stderr.write("soulwire serve users: no users: the server uses its single token\n")
        for user in users:
            created = datetime.fromtimestamp(user.created, UTC).strftime("%Y-%m-%d %H:%M UTC")
            sys.stdout.write(f"{user.name}\t{user.role}\t{created}\n")
    return 0


__all__ = ["run"]
