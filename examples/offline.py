"""Shared by the examples: run them offline against a scripted model, or for real.

By default an example starts `soulwire` with a throw-away share directory whose
config.toml selects the offline `_scripted_echo` model, which replays the example's
`demo_replies` (one reply per model call). With `--real` it uses your configuration
(~/.soulwire/config.toml, or $SOULWIRE_SHARE_DIR / $KIMI_SHARE_DIR) and a real model;
`--engine PATH` runs another Wire engine, e.g. `kimi`."""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any


def call(call_id: str, name: str, arguments: dict[str, Any]) -> str:
    """A scripted reply line in which the model calls a tool."""
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": json.dumps(arguments)})


def session_options(
    demo_replies: list[str], description: str = "", *, echo_model: bool = False
) -> dict[str, Any]:
    """Keyword arguments for `Session(...)` from the command line. `echo_model` adds a second
    offline model, `echo`, which answers with the prompt's own echo-DSL script."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--real", action="store_true", help="use your own config and model")
    parser.add_argument("--engine", help="engine executable (default: soulwire)")
    parser.add_argument("--work-dir", default=None, help="working directory for the agent")
    args = parser.parse_args()
    options: dict[str, Any] = {}
    if args.engine:
        options["executable"] = args.engine
    if args.real:
        options["work_dir"] = args.work_dir or "."
        return options
    root = Path(tempfile.mkdtemp(prefix="soulwire-example-"))
    atexit.register(shutil.rmtree, root, True)
    (root / "work").mkdir()
    (root / "share").mkdir()
    replies = root / "replies.json"
    replies.write_text(json.dumps(demo_replies))
    (root / "share" / "config.toml").write_text(
        'default_model = "demo"\n'
        "[models.demo]\n"
        'provider = "offline"\nmodel = "scripted_echo"\nmax_context_size = 100000\n'
        'capabilities = ["thinking"]\n'
        "[providers.offline]\n"
        'type = "_scripted_echo"\nbase_url = ""\napi_key = ""\n'
        f"env = {{ KIMI_SCRIPTED_ECHO_SCRIPTS = {json.dumps(str(replies))} }}\n"
        + (
            '[models.echo]\nprovider = "echo"\nmodel = "echo"\nmax_context_size = 100000\n'
            '[providers.echo]\ntype = "_echo"\nbase_url = ""\napi_key = ""\n'
            if echo_model
            else ""
        )
    )
    options.update(share_dir=root / "share", work_dir=args.work_dir or root / "work")
    return options
