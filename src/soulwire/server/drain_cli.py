"""`soulwire serve drain --url URL`: hand every session of a running replica over to the other
replicas before it is stopped (an upgrade, one replica at a time: docs/deploy.md). It asks the
replica (`POST /api/drain`), which fails its health checks from then on, opens no session, and
releases each live one as soon as it is idle; clients re-attach on another replica."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

from soulwire.usage import CommandParser
from soulwire.wire.environment import SERVER_TOKEN_ENV


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="soulwire serve drain",
        description="Hand a running replica's sessions over to the other replicas of its store, "
        "then exit 0 (1 when a turn was still running when --wait ran out).",
        examples=(
            "soulwire serve drain --url http://10.0.0.11:7437 --token-file /etc/soulwire/token",
            "soulwire serve drain --url http://127.0.0.1:7437 --wait 300",
        ),
    )
    parser.add_argument("--url", required=True, help="the replica's own address (not the load balancer's)")
    parser.add_argument(
        "--token-file", metavar="PATH",
        help=f"the replica's token (an admin's with named users); default ${SERVER_TOKEN_ENV}, "
        "else the share dir's",
    )  # fmt: skip
    parser.add_argument(
        "--wait", type=float, default=60.0, metavar="SECONDS",
        help="how long running turns may finish before the command gives up on them (default 60)",
    )  # fmt: skip
    return parser


def _token(token_file: str | None) -> str:
    from soulwire.config.loader import client_token

    token = client_token(token_file)
    if token is None:
        raise OSError(f"no token: give --token-file or set {SERVER_TOKEN_ENV} (the share dir has none)")
    return token


def run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if not args.url.startswith(("http://", "https://")):
        sys.stderr.write("soulwire serve drain: error: --url wants the replica's http(s):// address\n")
        return 2
    if not 0 <= args.wait <= 3600:
        sys.stderr.write("soulwire serve drain: error: --wait must be between 0 and 3600 seconds\n")
        return 2
    try:
        token = _token(args.token_file)
    except OSError as exc:
        sys.stderr.write(f"soulwire serve drain: error: cannot read the token: {exc.strerror or exc}\n")
        return 2
    url = f"{args.url.rstrip('/')}/api/drain?wait={args.wait:g}"
    request = urllib.request.Request(url, method="POST", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=args.wait + 30) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = _detail(exc.read()) or exc.reason
        sys.stderr.write(f"soulwire serve drain: error: the replica answered {exc.code}: {detail}\n")
        return 1
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        sys.stderr.write(f"soulwire serve drain: error: cannot reach {args.url}: {reason}\n")
        return 1
    handed, running = int(answer["handed_over"]), int(answer["running"])
    sys.stderr.write(
        f"soulwire serve drain: {handed} session(s) handed over"
        + (f"; {running} still running a turn\n" if running else "; the replica can be stopped\n")
    )
    return 1 if running else 0


def _detail(body: bytes) -> str:
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return ""
    return detail if isinstance(detail, str) else ""


__all__ = ["run"]
