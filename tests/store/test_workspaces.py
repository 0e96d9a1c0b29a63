"""`serve --workspaces DIR`: a replica taking over a session whose work dir (under DIR) is not
on its disk makes it from the session's latest checkpoint in the store, and runs the session."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from soulwire import sdk
from tests.postgres_cluster import PASSWORD
from tests.server.serve_client import ServeProcess
from tests.tool_calls import call
from tests.wire_client import Sandbox

pytestmark = pytest.mark.xdist_group("postgres")
PG_ENV = {"PGPASSWORD": PASSWORD}


def _turn(server: ServeProcess, session: str, text: str) -> str:
    async def main() -> str:
        url = f"ws://127.0.0.1:{server.port}/ws/sessions/{session}"
        async with sdk.Session.attach(url, server.token) as remote:
            return (await remote.prompt(text)).status

    return anyio.run(main)


def test_a_missing_work_dir_is_made_from_the_latest_checkpoint(sandbox: Sandbox, pg_url: str, tmp_path: Path):
    argv_url = pg_url.replace(f":{PASSWORD}@", "@")
    root = tmp_path / "workspaces"
    project = root / "project"
    project.mkdir(parents=True)
    (project / "kept.txt").write_text("there before\n")
    sandbox.scripts = [call("w", "WriteFile", {"path": "a.txt", "content": "by the agent\n"}), "text: one"]
    first = ServeProcess(sandbox, "--store", argv_url, env=PG_ENV)
    try:
        session = first.create_session(work_dir=str(project), checkpoints=True, yolo=True)
        assert _turn(first, session, "write it") == "finished"
    finally:
        first.close()
    shutil.rmtree(project)  # the next replica's machine: the work dir is not there

    sandbox.scripts = ["text: carried on"]  # (a replica without --workspaces refuses it: test_serve_replicas)

    second = ServeProcess(sandbox, "--store", argv_url, "--workspaces", str(root), env=PG_ENV)
    try:
        assert _turn(second, session, "go on") == "finished"
    finally:
        second.close()
    assert (project / "a.txt").read_text() == "by the agent\n"
    assert (project / "kept.txt").read_text() == "there before\n"


def test_workspaces_without_a_shared_store_is_one_line(sandbox: Sandbox, tmp_path: Path):
    import subprocess
    import sys

    sandbox.write()
    out = subprocess.run(
        [sys.executable, "-m", "soulwire", "serve", "--listen", "127.0.0.1:0", "--config-file",
         str(sandbox.config_path), "--workspaces", str(tmp_path)],
        capture_output=True, text=True, env=sandbox.env(), timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr == "soulwire serve: error: --workspaces needs a shared store (--store URL)\n"
