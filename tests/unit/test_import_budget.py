"""Start-up is a feature: the lean path answers `initialize` with the stdlib only, and the
engine never loads a provider SDK, MCP or a terminal library before it needs one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY_FOR_LEAN_PATH = ("pydantic", "asyncio", "anyio", "jsonschema", "soulwire.wire.types")
NEVER_AT_START = ("openai", "anthropic", "mcp", "rich", "prompt_toolkit", "httpx", "httpx2", "jsonschema")
PROVIDER_SDKS = ("openai", "anthropic", "httpx", "httpx2", "google.genai")
REAL_PROVIDERS = ("kimi", "openai_legacy", "openai_responses", "anthropic", "gemini")


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nimport json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_lean_path_imports_no_heavy_module():
    modules = loaded_after("import soulwire.cli, soulwire.cli.args, soulwire.ui.wire.launch")
    assert not [m for m in HEAVY_FOR_LEAN_PATH if m in modules]


def test_fleet_run_spawns_its_first_engines_with_the_standard_library_alone(tmp_path: Path):
    """`soulwire fleet run` spawns the first task's engine group before anything heavy is
    imported: the spawn (and what it imports) must stay on the lean path."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "hi", "approval": "yolo"}) + "\n")
    engine = tmp_path / "engine.sh"
    engine.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "argv"}\n')
    engine.chmod(0o755)
    modules = loaded_after(
        "import soulwire.cli.fleet\n"
        "from soulwire.fleet.spawn import spawn_first_group\n"
        f"group = spawn_first_group(__import__('pathlib').Path({str(tasks)!r}), engine={str(engine)!r}, per_group=2)\n"
        "assert group is not None and group.process.wait() == 0"
    )
    assert not [m for m in HEAVY_FOR_LEAN_PATH if m in modules]
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:3] == ["serve", "--listen", "127.0.0.1:0"]
    assert "--yolo" in argv and argv[argv.index("--processes") + 1] == "2"


def test_engine_imports_no_provider_sdk_or_ui_library():
    modules = loaded_after("import soulwire.ui.wire.server, soulwire.runtime.builder")
    assert "pydantic" in modules  # the check itself works
    assert not [m for m in NEVER_AT_START if m in modules]


def test_a_session_with_a_real_provider_loads_its_sdk_only_at_the_first_prompt(tmp_path: Path):
    """Building the whole runtime (config → adapter → soul) for every real provider type
    imports our adapter modules but none of the SDKs: those wait for the first request."""
    configs = {
        kind: {
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": "some-model"}},
            "providers": {"p": {"type": kind, "api_key": "k"}},
        }
        for kind in REAL_PROVIDERS
    }
    statement = (
        "from pathlib import Path\n"
        "from soulwire.runtime.builder import build_runtime\n"
        "from soulwire.runtime.options import SessionOptions\n"
        f"for raw in {configs!r}.values():\n"
        f"    options = SessionOptions(Path({str(tmp_path)!r}), Path({str(tmp_path / 'share')!r}), raw)\n"
        "    assert build_runtime(options).soul.model is not None"
    )
    modules = loaded_after(statement)
    assert {"soulwire.llm.openai_chat", "soulwire.llm.openai_responses", "soulwire.llm.anthropic"} <= modules
    assert not [m for m in PROVIDER_SDKS if m in modules]
    # FetchURL's HTML reduction and ReadMediaFile (no media capability here) load at first use.
    assert "soulwire.tools.builtin.fetch" in modules
    assert not {"html.parser", "soulwire.tools.builtin.htmltext", "soulwire.tools.builtin.media"} & modules


def test_wire_mode_preloads_a_real_providers_sdk_in_the_background(tmp_path: Path):
    """After start-up the SDK import (0.5 to 1.5 s) runs in a worker thread, so the first
    prompt does not pay for it; the scripted provider preloads nothing."""
    raw = {
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "some-model"}, "s": {"provider": "s", "model": "x"}},
        "providers": {"p": {"type": "openai_legacy", "api_key": "k"}, "s": {"type": "_echo"}},
    }
    statement = (
        "import anyio\n"
        "from pathlib import Path\n"
        "from soulwire.runtime.builder import build_runtime\n"
        "from soulwire.runtime.options import SessionOptions\n"
        "from soulwire.ui.wire.server import WireServer\n"
        f"echo = SessionOptions(Path({str(tmp_path)!r}), Path({str(tmp_path / 'share')!r}), {raw!r}, model='s')\n"
        "anyio.run(WireServer(build_runtime(echo))._preload_provider)\n"
        "assert 'openai' not in sys.modules\n"
        f"real = SessionOptions(Path({str(tmp_path)!r}), Path({str(tmp_path / 'share')!r}), {raw!r})\n"
        "anyio.run(WireServer(build_runtime(real))._preload_provider)\n"
    )
    modules = loaded_after(statement)
    assert {"openai", "httpx2"} <= modules


def test_wire_warm_up_preloads_the_sdk_once_initialize_is_answered(tmp_path: Path):
    """`--wire`'s warm-up sets the SDK up itself (its import and client, with the collector
    still off) when the lean path has answered `initialize`; before that answer, or for the
    scripted provider, it leaves the SDK alone (the server's `_preload_provider` does it)."""
    raw = {
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "some-model"}, "s": {"provider": "s", "model": "x"}},
        "providers": {"p": {"type": "openai_legacy", "api_key": "k"}, "s": {"type": "_echo"}},
    }
    statement = (
        "import gc\n"
        "from pathlib import Path\n"
        "from soulwire.config.process_env import tune_startup\n"
        "from soulwire.runtime.options import SessionOptions\n"
        "from soulwire.ui.wire.launch import _Warmup\n"
        "tune_startup()\n"
        "def warm(model, answered):\n"
        f"    options = SessionOptions(Path({str(tmp_path)!r}), Path({str(tmp_path / 'share')!r}), {raw!r}, model=model)\n"
        "    options.session_id = model + str(answered)\n"
        "    warmup = _Warmup(options, None)\n"
        "    if answered:\n"
        "        warmup.answered.set()\n"
        "    warmup.start()\n"
        "    warmup.join()\n"
        "    assert warmup.error is None, warmup.error\n"
        "    return warmup.runtime.soul.model.provider\n"
        "warm('s', True)\n"
        "assert not warm('m', False)._client.built\n"
        "assert 'openai' not in sys.modules\n"
        "assert warm('m', True)._client.built and not gc.isenabled()\n"
    )
    modules = loaded_after(statement)
    assert {"openai", "httpx2"} <= modules


def test_acp_lean_path_answers_initialize_without_the_sdk_or_the_engine():
    modules = loaded_after("import soulwire.cli, soulwire.cli.args, soulwire.ui.acp.launch")
    assert not [m for m in (*HEAVY_FOR_LEAN_PATH, "acp") if m in modules]


def test_acp_server_imports_no_provider_sdk():
    modules = loaded_after("import soulwire.ui.acp.server")
    assert "acp" in modules  # the check itself works
    assert not [m for m in NEVER_AT_START if m in modules]
