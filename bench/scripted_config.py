"""The configuration every engine benchmark runs with: one model, the offline `_scripted_echo`
provider replaying a scripts file (kimi's config format, so `kimi` reads it too). Stdlib only,
imported by the bench scripts, which run from this directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def scripted_config(scripts: Path, *, max_context_size: int = 100_000, **more: Any) -> dict[str, Any]:
    """A config whose default model `scripted` replays `scripts` (a JSON list of steps); `more`
    adds top-level keys (`loop_control`, `checkpoints`, …)."""
    return {
        "default_model": "scripted",
        "models": {
            "scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": max_context_size}
        },
        "providers": {
            "p": {
                "type": "_scripted_echo",
                "base_url": "",
                "api_key": "",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(scripts)},
            }
        },
        **more,
    }
