"""A misbehaving ACP agent for the delegation tests: `bad_agent.py MODE PIDFILE`.

It writes its pid (and the pid of a child it starts, which must die with it) to PIDFILE, then
answers `initialize` and `session/new` properly and misbehaves at the prompt (`crash`: exits
with status 3; `garbage`: writes a line that is not JSON; `hang`: says one thing, then nothing
more) — or never answers at all (`silent`, from the first message on)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

mode, pidfile = sys.argv[1], sys.argv[2]
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with Path(pidfile).open("w", encoding="utf-8") as handle:
    handle.write(f"{child.pid}\n")


def reply(message: dict, result: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    if mode == "silent":
        continue
    method = message.get("method")
    if method == "initialize":
        reply(message, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []})
    elif method == "session/new":
        reply(message, {"sessionId": "s1"})
    elif method == "session/prompt":
        if mode == "crash":
            sys.stderr.write("bad_agent: giving up\n")
            sys.exit(3)
        if mode == "hang":
            update = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "thinking…"},
            }
            note = {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": "s1", "update": update},
            }
            sys.stdout.write(json.dumps(note) + "\n")
        else:
            sys.stdout.write("this is not json-rpc\n")
        sys.stdout.flush()
