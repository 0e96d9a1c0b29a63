"""`soulwire info [--json]`: versions, for humans or for clients (VS Code, Go SDK) that check
compatibility before spawning `--wire`. Prints nothing on stderr."""

from __future__ import annotations

import json
import platform
import sys

from soulwire import __version__
from soulwire.wire import PROTOCOL_VERSION

KIMI_COMPAT_VERSION = "1.49.0"
"""The kimi-cli release whose Wire behaviour soulwire reproduces; clients gate on it."""


def info() -> dict[str, object]:
    return {
        "soulwire_version": __version__,
        "wire_protocol_version": PROTOCOL_VERSION,
        "python_version": platform.python_version(),
        "kimi_cli_version": KIMI_COMPAT_VERSION,
        "agent_spec_versions": ["1"],
    }


def run_info(argv: list[str]) -> int:
    from soulwire.usage import CommandParser

    parser = CommandParser(
        prog="soulwire info",
        description="Versions of Soulwire, its Wire protocol and the kimi-cli release it matches.",
        examples=("soulwire info", "soulwire info --json | jq -r .wire_protocol_version"),
    )
    parser.add_argument("--json", action="store_true", help="one JSON object (for clients)")
    args = parser.parse_args(argv)
    data = info()
    if args.json:
        sys.stdout.write(json.dumps(data) + "\n")
    else:
        for key, value in data.items():
            sys.stdout.write(f"{key}: {value}\n")
    return 0
