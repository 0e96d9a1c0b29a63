"""A scripted ACP agent that reports what its turn spent, for the budget tests:
`usage_agent.py NAME DIR [--tokens N] [--cost USD] [--wait FILE] [--hold FILE]`.

It answers `initialize`; with `--wait FILE` it answers `session/new` only once `DIR/FILE`
exists (the test makes it when it has seen what it waits for). At `session/prompt` it writes
`DIR/NAME.prompted`, with `--hold FILE` works until `DIR/FILE` exists, says one line, sends a
`usage_update` with the cost (if any) and answers `end_turn` with the token usage."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("name")
parser.add_argument("dir", type=Path)
parser.add_argument("--tokens", type=int, default=0)
parser.add_argument("--cost", type=float, default=None)
parser.add_argument("--hold", default=None)
parser.add_argument("--wait", default=None)
args = parser.parse_args()
WAIT_S = 60.0


def send(message: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def update(session_id: str, body: dict) -> None:
    send({"method": "session/update", "params": {"sessionId": session_id, "update": body}})


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            sys.exit(f"usage_agent: {path} never appeared")
        time.sleep(0.02)


for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        send(
            {
                "id": message["id"],
                "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []},
            }
        )
    elif method == "session/new":
        if args.wait:
            wait_for(args.dir / args.wait)
        send({"id": message["id"], "result": {"sessionId": args.name}})
    elif method == "session/prompt":
        (args.dir / f"{args.name}.prompted").touch()
        if args.hold:
            wait_for(args.dir / args.hold)
        text = {"type": "text", "text": f"{args.name} did its part"}
        update(args.name, {"sessionUpdate": "agent_message_chunk", "content": text})
        if args.cost is not None:
            cost = {"amount": args.cost, "currency": "USD"}
            update(args.name, {"sessionUpdate": "usage_update", "used": 10, "size": 1000, "cost": cost})
        output = args.tokens // 5
        usage = {"inputTokens": args.tokens - output, "outputTokens": output, "totalTokens": args.tokens}
        send({"id": message["id"], "result": {"stopReason": "end_turn", "usage": usage}})
