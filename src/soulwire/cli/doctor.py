"""`soulwire doctor [--json]`: whether this machine can run what Soulwire relies on — the
sandbox (bubblewrap), ripgrep for Grep, a readable configuration. Exit status 1 when
something is missing."""

from __future__ import annotations

import json
import sys

from soulwire.config.loader import ConfigError, load_raw_config, share_dir


def checks() -> dict[str, dict[str, object]]:
    """Each check: `ok` and a one-line `detail`."""
    from soulwire.tools.builtin.search import ripgrep
    from soulwire.tools.sandbox import bubblewrap_problem

    found: dict[str, dict[str, object]] = {}
    problem = bubblewrap_problem()
    found["sandbox"] = {
        "ok": problem is None,
        "detail": problem or "bubblewrap can sandbox commands (--sandbox read-only | workspace-write)",
    }
    rg = ripgrep()
    found["ripgrep"] = {"ok": rg is not None, "detail": rg or "`rg` not found: install the `ripgrep` package"}
    share = share_dir()
    try:
        _, path = load_raw_config(config_file=None, config_text=None, share=share)
        found["config"] = {"ok": True, "detail": str(path) if path else f"none in {share} (defaults)"}
    except ConfigError as exc:
        found["config"] = {"ok": False, "detail": str(exc).splitlines()[0]}
    return found


def run_doctor(argv: list[str]) -> int:
    if argv not in ([], ["--json"]):
        sys.stdout.write("usage: soulwire doctor [--json]\n")
        return 2
    found = checks()
    if argv:
        sys.stdout.write(json.dumps(found) + "\n")
    else:
        for name, check in found.items():
            sys.stdout.write(f"{'ok' if check['ok'] else 'MISSING':8} {name}: {check['detail']}\n")
    return 0 if all(c["ok"] for c in found.values()) else 1
