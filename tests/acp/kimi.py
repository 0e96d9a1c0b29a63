"""The reference `kimi acp` (kimi-cli 1.49.0, its own scripted model, offline) for the tests
that drive it as Soulwire's sub-agent or fleet worker.

kimi-cli needs Python ≥ 3.12, so it lives in a venv of its own: `$SOULWIRE_KIMI_BIN`, else
`.venv-kimi/bin/kimi` (what `.ci/run` installs before the test runs), else
`/work/kimi-venv/bin/kimi`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def kimi_bin() -> str | None:
    for candidate in (
        os.environ.get("SOULWIRE_KIMI_BIN"),
        ROOT / ".venv-kimi/bin/kimi",
        "/work/kimi-venv/bin/kimi",
    ):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


KIMI = kimi_bin()
needs_kimi = pytest.mark.skipif(
    KIMI is None, reason="kimi-cli 1.49.0 is not installed (.ci/run puts it in .venv-kimi, Python 3.13)"
)


def kimi_world(root: Path, *scripts: str, name: str = "kimi") -> dict[str, str]:
    """`kimi acp`'s own share dir under `root`: its scripted model and a stored login it
    insists on (a dummy token, never sent anywhere: the model is scripted). Returns its env."""
    share = root / f"{name}-share"
    (share / "credentials").mkdir(parents=True)
    scripts_path = root / f"{name}-scripts.json"
    scripts_path.write_text(json.dumps(list(scripts)))
    (share / "config.toml").write_text(
        'default_model = "scripted"\n[models.scripted]\nprovider = "p"\nmodel = "scripted_echo"\n'
        "max_context_size = 100000\ncapabilities = []\n"
        '[providers.p]\ntype = "_scripted_echo"\nbase_url = ""\napi_key = ""\n'
        f'[providers.p.env]\nKIMI_SCRIPTED_ECHO_SCRIPTS = "{scripts_path}"\n'
    )
    token = {"access_token": "offline", "refresh_token": "offline", "expires_at": time.time() + 86400,
             "scope": "", "token_type": "Bearer"}  # fmt: skip
    (share / "credentials" / "kimi-code.json").write_text(json.dumps(token))
    return {"KIMI_SHARE_DIR": str(share)}


def kimi_agent(root: Path, *scripts: str) -> dict[str, object]:
    """An `[acp_agents.kimi]` entry running `kimi acp` with `scripts`."""
    assert KIMI is not None
    return {"command": [KIMI, "acp"], "env": kimi_world(root, *scripts), "description": "the Kimi CLI"}
