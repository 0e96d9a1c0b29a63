"""`soulwire export` (a session as the reference's ZIP) and `soulwire import` (such a ZIP as a
session of another work dir), with real engine sessions on both sides: the imported session
resumes with its history."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.tool_calls import run_turn
from tests.wire_client import Sandbox, WireProcess

from soulwire.sessions.paths import session_dir


def soulwire(sandbox: Sandbox, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "soulwire", *args],
        env=sandbox.env(),
        cwd=cwd or sandbox.work,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def one_turn(sandbox: Sandbox, work: Path, text: str, *scripts: str) -> None:
    sandbox.scripts = list(scripts)
    sandbox.write()
    argv = [arg if arg != str(sandbox.work) else str(work) for arg in sandbox.argv("--session", "s-1")]
    wire = WireProcess(argv, sandbox.env(), work)
    try:
        _, result = run_turn(wire, text)
    finally:
        wire.close()
    assert result == {"status": "finished"}


def test_export_then_import_into_another_work_dir_and_resume(sandbox: Sandbox, tmp_path: Path):
    one_turn(sandbox, sandbox.work, "first question", "text: first answer")
    archive = tmp_path / "out" / "s.zip"

    exported = soulwire(sandbox, "export", "s-1", "-o", str(archive))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip() == str(archive)
    with zipfile.ZipFile(archive) as zipped:
        names = set(zipped.namelist())
        manifest = json.loads(zipped.read("manifest.json"))
    assert {"manifest.json", "context.jsonl", "wire.jsonl", "state.json"} <= names
    assert manifest["session_id"] == "s-1" and manifest["work_dir"] == str(sandbox.work)

    # The previous session by default: confirmation needed when not in a terminal, or --yes.
    unconfirmed = soulwire(sandbox, "export")
    assert unconfirmed.returncode == 1 and "run with --yes" in unconfirmed.stderr
    default = soulwire(sandbox, "export", "--yes")
    assert default.returncode == 0 and (sandbox.work / "session-s-1.zip").is_file()
    missing = soulwire(sandbox, "export", "nope")
    assert missing.returncode == 1 and missing.stderr == "Error: session 'nope' not found.\n"

    other = tmp_path / "other"
    other.mkdir()
    imported = soulwire(sandbox, "import", str(archive), "-w", str(other))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.splitlines()[-1] == "Resume it with: soulwire --session s-1"
    target = session_dir(sandbox.share, other, "s-1")
    assert (target / "context.jsonl").read_text() == (
        session_dir(sandbox.share, sandbox.work, "s-1") / "context.jsonl"
    ).read_text()
    assert not (target / "manifest.json").exists()
    again = soulwire(sandbox, "import", str(archive), "-w", str(other))
    assert again.returncode == 1 and "already exists" in again.stderr
    assert soulwire(sandbox, "import", str(archive), "-w", str(other), "--session", "s-2").returncode == 0

    one_turn(sandbox, other, "second question", "text: second answer")
    users = [json.loads(line) for line in (target / "context.jsonl").read_text().splitlines()]
    texts = json.dumps([r for r in users if r.get("role") == "user"])
    assert "first question" in texts and "second question" in texts


def test_import_refuses_what_is_not_a_session_and_never_leaves_its_directory(
    sandbox: Sandbox, tmp_path: Path
):
    sandbox.write()
    junk = tmp_path / "junk.zip"
    with zipfile.ZipFile(junk, "w") as zipped:
        zipped.writestr("readme.txt", "hi")
    refused = soulwire(sandbox, "import", str(junk), "--session", "x")
    assert refused.returncode == 1 and "is not a session archive" in refused.stderr

    sneaky = tmp_path / "sneaky.zip"
    with zipfile.ZipFile(sneaky, "w") as zipped:
        zipped.writestr("manifest.json", json.dumps({"session_id": "s-9"}))
        zipped.writestr("context.jsonl", "")
        zipped.writestr("../../escaped.txt", "no")
    done = soulwire(sandbox, "import", str(sneaky))
    assert done.returncode == 0, done.stderr
    assert not any(p.name == "escaped.txt" for p in tmp_path.rglob("*"))
    assert (session_dir(sandbox.share, sandbox.work, "s-9") / "context.jsonl").exists()

    not_zip = tmp_path / "plain.zip"
    not_zip.write_text("plain")
    bad = soulwire(sandbox, "import", str(not_zip))
    assert (
        bad.returncode == 1 and bad.stderr.startswith("Error: cannot read") and "Traceback" not in bad.stderr
    )
