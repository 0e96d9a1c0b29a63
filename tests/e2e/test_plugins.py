"""`soulwire plugin install|list|info|remove` and plugin tools in a real session: a plugin from a
directory and (upgraded) from a zip, its config injected with the provider's key, its tool run
after approval with the arguments on stdin and the key in its environment, a failing tool, and
the usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.e2e.test_sandbox import needs_bwrap
from tests.tool_calls import call, requests, results, run_turn
from tests.wire_client import Sandbox, WireProcess

from soulwire.cli.plugin import _split_git_url

GREET = """import json, os, sys
args = json.load(sys.stdin)
if args.get("fail"):
    print("cannot greet", file=sys.stderr)
    sys.exit(3)
print(f"hello {args['name']} with {os.environ.get('auth.key', 'no key')}")
"""


def make_plugin(root: Path, version: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "greet.py").write_text(GREET)
    (root / "config.json").write_text(json.dumps({"auth": {"key": ""}, "other": 1}))
    spec = {
        "name": "greeter",
        "version": version,
        "description": "Greets people.",
        "config_file": "config.json",
        "inject": {"auth.key": "api_key"},
        "tools": [
            {
                "name": "Greet",
                "description": "Greet someone by name.",
                "command": [sys.executable, "greet.py"],
                "parameters": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "fail": {"type": "boolean"}},
                    "required": ["name"],
                },
            }
        ],
    }
    (root / "plugin.json").write_text(json.dumps(spec))
    return root


def plugin(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    sandbox.write()
    return subprocess.run(
        [sys.executable, "-m", "soulwire", "plugin", *args],
        env=sandbox.env(),
        cwd=sandbox.work,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_install_use_upgrade_and_remove_a_plugin(sandbox: Sandbox, tmp_path: Path):
    sandbox.share.mkdir(parents=True, exist_ok=True)
    (sandbox.share / "config.toml").write_text(
        'default_model = "m"\n[providers.p]\ntype = "openai_legacy"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'api_key = "sk-plugin"\n[models.m]\nprovider = "p"\nmodel = "x"\n'
    )
    source = make_plugin(tmp_path / "src", "1.0.0")
    installed = plugin(sandbox, "install", str(source))
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.splitlines()[0] == "Installed plugin 'greeter' v1.0.0"
    home = sandbox.share / "plugins" / "greeter"
    assert json.loads((home / "config.json").read_text()) == {"auth": {"key": "sk-plugin"}, "other": 1}
    assert json.loads((home / "plugin.json").read_text())["runtime"]["host"] == "soulwire"
    assert json.loads((source / "config.json").read_text())["auth"]["key"] == ""  # the source is untouched
    assert plugin(sandbox, "list").stdout == "  greeter v1.0.0 (installed)\n"
    info = plugin(sandbox, "info", "greeter").stdout
    assert "Inject:      auth.key <- api_key" in info and "Tool:        Greet" in info

    # A session offers the tool; it runs after approval, with the session provider's key.
    provider = {"type": "_scripted_echo", "base_url": "", "api_key": "sk-session"}
    provider["env"] = {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(sandbox.root / "scripts.json")}
    sandbox.config_extra = {"providers": {"scripted_provider": provider}}
    sandbox.scripts = [
        call("g1", "Greet", {"name": "Ada"}),
        call("g2", "Greet", {"name": "Bob", "fail": True}),
        "text: done",
    ]
    sandbox.write()
    wire = WireProcess(sandbox.argv(), sandbox.env(), sandbox.work)
    try:
        messages, result = run_turn(wire)
    finally:
        wire.close()
    assert result == {"status": "finished"}
    asked = requests(messages)
    assert [r["action"] for r in asked] == ["plugin:Greet", "plugin:Greet"]
    assert asked[0]["description"] == "Run plugin tool `Greet`."
    found = results(messages)
    assert found["g1"]["output"] == "hello Ada with sk-session"
    assert found["g2"]["is_error"] and found["g2"]["message"] == "Plugin tool 'Greet' failed: cannot greet"

    # Upgrade from a zip (the plugin in a folder inside it).
    newer = make_plugin(tmp_path / "newer" / "greeter", "1.1.0")
    archive = tmp_path / "greeter.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in newer.iterdir():
            zipped.write(path, f"greeter/{path.name}")
    upgraded = plugin(sandbox, "install", str(archive))
    assert upgraded.returncode == 0, upgraded.stderr
    assert plugin(sandbox, "list").stdout == "  greeter v1.1.0 (installed)\n"

    assert plugin(sandbox, "remove", "greeter").stdout == "Removed plugin 'greeter'\n"
    assert plugin(sandbox, "list").stdout == "No plugins installed.\n"


def test_plugin_errors_are_one_line(sandbox: Sandbox, tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, message in [
        (("install", str(empty)), f"Error: No plugin.json found in {empty}"),
        (
            ("install", str(tmp_path / "nowhere")),
            f"Error: {tmp_path / 'nowhere'} is not a directory, zip file, zip URL, or git URL",
        ),
        (("remove", "ghost"), f"Error: Plugin 'ghost' not found in {sandbox.share / 'plugins'}"),
        (("info", "../x"), "Error: Invalid plugin name: ../x"),
    ]:
        done = plugin(sandbox, *args)
        assert done.returncode == 1 and done.stderr.strip() == message, done.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "plugin.json").write_text(json.dumps({"name": "b", "version": "1", "inject": {"k": "api_key"}}))
    done = plugin(sandbox, "install", str(broken))
    assert done.returncode == 1 and "'inject' requires 'config_file'" in done.stderr
    assert plugin(sandbox, "frobnicate").returncode == 2


def test_git_urls_are_split_like_the_reference():
    assert _split_git_url("https://github.com/o/r/tree/main/plugins/x") == (
        "https://github.com/o/r",
        "plugins/x",
        "main",
    )
    assert _split_git_url("https://gitlab.com/o/r/-/tree/dev/p") == ("https://gitlab.com/o/r", "p", "dev")
    assert _split_git_url("https://host/o/r.git/sub/dir") == ("https://host/o/r.git", "sub/dir", None)
    assert _split_git_url("git@github.com:o/r.git") == ("git@github.com:o/r.git", None, None)


PROBE = """import json, os, sys
args = json.load(sys.stdin)
report = {"secret": os.environ.get("PROBE_SECRET_TOKEN"), "injected": os.environ.get("PLUGIN_KEY")}
try:
    with open(args["outside"], "w") as out:
        out.write("escaped")
    report["wrote"] = "yes"
except OSError as exc:
    report["wrote"] = exc.strerror
try:
    with open(args["key"]) as key:
        report["key"] = key.read()
except OSError as exc:
    report["key"] = exc.strerror
print(json.dumps(report))
print("line\\n" * 100_000, end="")
"""


def _probe_session(sandbox: Sandbox, *args: str) -> tuple[list[dict], dict]:
    """A session with the Probe plugin installed, its one call made with `args`."""
    home = sandbox.share / "plugins" / "probe"
    home.mkdir(parents=True, exist_ok=True)
    (home / "probe.py").write_text(PROBE)
    (home / "config.json").write_text("{}")
    tool = {"name": "Probe", "description": "Probe.", "command": [sys.executable, "probe.py"]}
    spec = {
        "name": "probe",
        "version": "1",
        "config_file": "config.json",
        "inject": {"PLUGIN_KEY": "api_key"},
    }
    (home / "plugin.json").write_text(json.dumps({**spec, "tools": [tool]}))
    key = sandbox.home / ".ssh" / "id_rsa"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text("PRIVATE-KEY")
    outside = sandbox.root / "outside.txt"
    provider = {"type": "_scripted_echo", "base_url": "", "api_key": "sk-session"}
    provider["env"] = {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(sandbox.root / "scripts.json")}
    sandbox.config_extra = {"providers": {"scripted_provider": provider}}
    sandbox.scripts = [call("p", "Probe", {"outside": str(outside), "key": str(key)}), "text: done"]
    sandbox.write()
    env = {**sandbox.env(), "PROBE_SECRET_TOKEN": "ghp_secret"}
    wire = WireProcess(sandbox.argv(*args), env, sandbox.work)
    try:
        messages, result = run_turn(wire)
    finally:
        wire.close()
    assert result == {"status": "finished"}
    value = results(messages)["p"]
    assert not value["is_error"], value
    assert "Output was too long" in value["message"]  # capped as Shell's output is
    assert len(value["output"]) < 60_000
    report = json.loads(value["output"].splitlines()[0])
    assert report["secret"] is None and report["injected"] == "sk-session"
    return requests(messages), report


def test_a_plugin_gets_what_it_declares_and_no_other_secret(sandbox: Sandbox):
    asked, report = _probe_session(sandbox)
    assert [r["action"] for r in asked] == ["plugin:Probe"]
    assert report["wrote"] == "yes" and report["key"] == "PRIVATE-KEY"  # no sandbox: the user's rights


@needs_bwrap
def test_a_plugin_runs_in_the_sessions_sandbox(sandbox: Sandbox):
    """Confined like a Shell command, so `--yolo` may run it without leaving the sandbox."""
    asked, report = _probe_session(sandbox, "--yolo", "--sandbox", "workspace-write")
    assert asked == []
    assert report["wrote"] == "Read-only file system"
    assert report["key"] == "No such file or directory"  # ~/.ssh is an empty dir in the sandbox
    assert not (sandbox.root / "outside.txt").exists()
