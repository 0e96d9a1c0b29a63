"""Start-up is a feature: the lean path answers `initialize` with the stdlib only, and the
engine never loads a provider SDK, MCP or a terminal library before it needs one."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY_FOR_LEAN_PATH = ("pydantic", "asyncio", "anyio", "jsonschema", "soulwire.wire.types")
NEVER_AT_START = ("openai", "anthropic", "mcp", "rich", "prompt_toolkit", "httpx", "jsonschema")


def loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; import json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_lean_path_imports_no_heavy_module():
    modules = loaded_after("import soulwire.cli, soulwire.cli.args, soulwire.ui.wire.launch")
    assert not [m for m in HEAVY_FOR_LEAN_PATH if m in modules]


def test_engine_imports_no_provider_sdk_or_ui_library():
    modules = loaded_after("import soulwire.ui.wire.server, soulwire.runtime.builder")
    assert "pydantic" in modules  # the check itself works
    assert not [m for m in NEVER_AT_START if m in modules]
