"""`soulwire acp --connect URL`: an editor that can only spawn a process reaches the sessions of
a remote `soulwire serve`. Each stdin line goes to the server's ACP WebSocket (`/acp`) as one
text frame and each frame comes back as one stdout line; the server does everything else."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from soulwire.usage import CommandParser, UsageError
from soulwire.wire.environment import SERVER_TOKEN_ENV, SERVER_TOKEN_FILE


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="soulwire acp --connect",
        description="Bridge this process's stdio (an editor's ACP connection) to a soulwire serve.",
        examples=[
            "soulwire acp --connect ws://127.0.0.1:8765/acp",
            "soulwire acp --connect wss://box.example/acp --token-file ~/.soulwire/box-token",
        ],
    )
    parser.add_argument("--connect", required=True, metavar="URL", help="the server's ACP WebSocket URL")
    parser.add_argument("--token", help=f"the server token (else --token-file or ${SERVER_TOKEN_ENV})")
    parser.add_argument("--token-file", help="a file holding the server token (default: the share dir's)")
    return parser


def _token(token: str | None, token_file: str | None) -> str:
    if token:
        return token
    from soulwire.config.loader import client_token, share_dir

    try:
        found = client_token(token_file)
    except OSError:
        found = None
    if found is None:
        path = Path(token_file).expanduser() if token_file else share_dir() / SERVER_TOKEN_FILE
        raise UsageError(
            f"no server token: give --token, --token-file or ${SERVER_TOKEN_ENV} ({path} is unreadable)",
            "soulwire acp --connect",
        )
    return found


async def _relay(url: str, token: str) -> None:
    from websockets.asyncio.client import connect

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with connect(
        url,
        additional_headers={"Authorization": f"Bearer {token}"},
        max_size=None,
        proxy=None,
        compression=None,
    ) as socket:

        async def upstream() -> None:
            while line := await reader.readline():
                if line.strip():
                    await socket.send(line.decode("utf-8", "replace").rstrip("\r\n"))
            await socket.close()

        async def downstream() -> None:
            async for frame in socket:
                text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
                os.write(1, (text.rstrip("\n") + "\n").encode())

        tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()


def run_connect(argv: list[str]) -> int:
    """Relay until stdin or the connection ends; one line on stderr when it cannot connect."""
    try:
        args = _parser().parse_args(argv)
        token = _token(args.token, args.token_file)
    except UsageError as exc:
        sys.stderr.write(exc.line() + "\n")
        return 2
    try:
        asyncio.run(_relay(args.connect, token))
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"soulwire acp: cannot reach {args.connect}: {exc}\n")
        return 1
    except Exception as exc:  # websockets' handshake errors (refused token, not a WebSocket)
        sys.stderr.write(f"soulwire acp: {args.connect} refused the connection: {exc}\n")
        return 1
    return 0
