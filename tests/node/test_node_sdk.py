"""Real-client check: the published Node SDK (`@moonshot-ai/kimi-agent-sdk`) drives
`soulwire --wire` through its public API (spec/client-requirements.md).

The npm package is installed once into the pytest cache (`.pytest_cache/d/node-sdk-*`, or
SOULWIRE_NODE_SDK_DIR) from the npm registry. Skipped only when `node` is absent."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.budget_cases import KINDS, LIMIT, PRICES, RAISED, SCOPES, command_name, scripts
from tests.system_tools import require
from tests.wire_client import scripted_config

# pytest-xdist (--dist loadgroup): its session fixture npm-installs the SDK into one shared
# directory: once, in one worker.
pytestmark = pytest.mark.xdist_group("node-sdk")

SDK_PACKAGE = "@moonshot-ai/kimi-agent-sdk"
SDK_VERSION = "0.1.8"
ZOD_VERSION = "3.25.76"  # the SDK's peer dependency (zod ^3.24 || ^4)
CHECK_SCRIPT = Path(__file__).with_name("node_sdk_check.mjs")
MIN_NODE_MAJOR = 18


def call(call_id: str, name: str, args: dict[str, Any]) -> str:
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": json.dumps(args)})


SCENARIOS: dict[str, list[str]] = {
    "streaming": ["usage: input_other=100 output=20\nthink: let me think\ntext: Hello\ntext:  world"],
    "approvals": [
        call("s1", "Shell", {"command": "echo approved"}),
        call("s2", "Shell", {"command": "echo rejected"}),
        "text: done",
    ],
    "external_tool": [call("e1", "open_file", {"path": "a.py", "line": 3}), "text: done"],
    "cancel_then_prompt": [call("w1", "wait_forever", {}), "text: second turn"],
    "resume": ["text: noted"],  # the second engine process gets its reply from the script
    "one_shot": ["text: one shot answer"],
    "steer": [call("w1", "wait_here", {}), "text: steered reply"],
    "plan_mode": [],  # written by the scenario: the plan file is named after the session
    "question": [
        call(
            "q1",
            "AskUserQuestion",
            {
                "questions": [
                    {
                        "question": "Which colours?",
                        "options": [{"label": "red"}, {"label": "blue"}],
                        "multi_select": True,
                    },
                    {"question": "Ship it?", "options": [{"label": "Yes"}, {"label": "No"}]},
                ]
            },
        ),
        "text: thanks",
    ],
    "hooks": [call("s1", "Shell", {"command": "echo hi"}), "text: blocked then"],
    # 600 tokens of 1,000: the next call would certainly cross the limit, so it is not made;
    # `/budget` raises it and the next prompt goes on.
    "budget": ["usage: input_other=550 output=50\ntext: first answer", "text: continued"],
}
CONFIG_EXTRA: dict[str, dict[str, Any]] = {"budget": {"budgets": {"tree": {"tokens": 1000}}}}
"""More configuration for a scenario (the SDK has no budget option: the engine's config sets it)."""


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def to_toml(config: dict[str, Any]) -> str:
    """The scripted test config as TOML (the Node SDK never passes a config: the engine reads
    config.toml from its share dir)."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in config.items() if not isinstance(v, dict)]
    for table in ("models", "providers", "budgets", "prices"):
        for name, body in config.get(table, {}).items():
            lines.append(f"\n[{table}.{name}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


def node_version(node: str) -> tuple[int, ...]:
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(p) for p in out.strip().lstrip("v").split(".")[:3])


@pytest.fixture(scope="session")
def node_sdk(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(node executable, directory with the SDK installed)."""
    node = require("node", "nodejs npm")
    version = node_version(node)
    if version[0] < MIN_NODE_MAJOR:
        pytest.fail(f"Node.js {'.'.join(map(str, version))} is too old for {SDK_PACKAGE} (needs >= 18)")
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("`node` is installed but `npm` is not: cannot install the Node SDK")
    override = os.environ.get("SOULWIRE_NODE_SDK_DIR")
    cache = getattr(request.config, "cache", None)  # absent with `-p no:cacheprovider`
    if override:
        directory = Path(override)
    elif cache is not None:
        directory = cache.mkdir(f"node-sdk-{SDK_VERSION}")
    else:
        directory = tmp_path_factory.mktemp(f"node-sdk-{SDK_VERSION}")
    directory.mkdir(parents=True, exist_ok=True)
    # The cache directory outlives one run and may be shared by two (or by two workers, should
    # the xdist_group mark stop holding): one npm install at a time, the others wait for it.
    with (directory / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        install_sdk(npm, directory)
    return node, directory


def install_sdk(npm: str, directory: Path) -> None:
    installed = directory / "node_modules" / SDK_PACKAGE / "package.json"
    if not (installed.exists() and json.loads(installed.read_text())["version"] == SDK_VERSION):
        manifest = {
            "name": "soulwire-node-sdk-check",
            "private": True,
            "type": "module",
            "dependencies": {SDK_PACKAGE: SDK_VERSION, "zod": ZOD_VERSION},
        }
        (directory / "package.json").write_text(json.dumps(manifest, indent=2))
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            pytest.fail(f"npm install of {SDK_PACKAGE}@{SDK_VERSION} failed:\n{done.stdout}\n{done.stderr}")


def soulwire_executable() -> str:
    script = Path(sys.executable).with_name("soulwire")
    found = str(script) if script.exists() else shutil.which("soulwire")
    if found is None:
        pytest.fail("the `soulwire` console script is not installed (pip install -e .)")
    return found


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_node_sdk_drives_soulwire(scenario: str, node_sdk: tuple[str, Path], tmp_path: Path):
    outcome = run_scenario(node_sdk, tmp_path, scenario, SCENARIOS[scenario], CONFIG_EXTRA.get(scenario, {}))
    assert "status" in outcome or "sessionId" in outcome or "first" in outcome


@pytest.mark.parametrize("kind", KINDS)
def test_node_sdk_sees_each_limit_at_each_scope(kind: str, node_sdk: tuple[str, Path], tmp_path: Path):
    """The `budget_limits` scenario: each scope's limit of `kind` set with `/budget`, the stop
    the SDK sees as `cancelled`, the limit shown and raised, the work continued."""
    case = {"kind": kind, "command": command_name(kind), "limit": LIMIT[kind], "raised": RAISED[kind]}
    outcome = run_scenario(
        node_sdk,
        tmp_path,
        "budget_limits",
        scripts(kind),
        {"prices": PRICES},
        BUDGET_CASE=json.dumps({**case, "scopes": list(SCOPES)}),
    )
    assert sorted(outcome["seen"]) == sorted(SCOPES)


def run_scenario(
    node_sdk: tuple[str, Path],
    tmp_path: Path,
    scenario: str,
    replies: list[str],
    config_extra: dict[str, Any],
    **env_extra: str,
) -> dict[str, Any]:
    """Run one scenario of node_sdk_check.mjs against the engine; its JSON outcome line."""
    node, sdk_dir = node_sdk
    home, share, work = tmp_path / "home", tmp_path / "home" / ".kimi", tmp_path / "work"
    for d in (share, work):
        d.mkdir(parents=True)
    scripts_file = tmp_path / "scripts.json"
    scripts_file.write_text(json.dumps(replies))
    config = {**scripted_config(scripts_file, capabilities=["thinking"]), **config_extra}
    (share / "config.toml").write_text(to_toml(config))
    script = sdk_dir / CHECK_SCRIPT.name
    shutil.copyfile(CHECK_SCRIPT, script)  # so that its imports resolve in sdk_dir/node_modules
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
    env.update(
        HOME=str(home),
        KIMI_SHARE_DIR=str(share),
        SOULWIRE_EXECUTABLE=soulwire_executable(),
        WORK_DIR=str(work),
        SCRIPTS_FILE=str(scripts_file),
        **env_extra,
    )
    done = subprocess.run(
        [node, str(script), scenario], cwd=sdk_dir, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"node scenario {scenario} failed:\n{done.stdout}\n{done.stderr}"
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["scenario"] == scenario
    return outcome
