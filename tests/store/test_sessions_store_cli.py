"""`soulwire sessions export ID --store URL` and `sessions import ID --store URL` move a session
the real engine wrote into PostgreSQL and back, and the engine resumes the imported copy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.postgres_cluster import PASSWORD, Cluster
from tests.wire_client import Sandbox

# pytest-xdist (--dist loadgroup): one throwaway cluster (the session fixture pg_cluster) for
# every store test, in one worker.
pytestmark = pytest.mark.xdist_group("postgres")


def cli(
    sandbox: Sandbox, *args: str, password: str | None = PASSWORD, work=None
) -> subprocess.CompletedProcess[str]:
    env = sandbox.env()
    if password is not None:
        env["PGPASSWORD"] = password
    return subprocess.run(
        [sys.executable, "-m", "soulwire", "sessions", "--work-dir", str(work or sandbox.work), *args],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


def test_a_session_goes_to_postgres_and_comes_back_to_another_work_dir(
    engine, sandbox, pg_cluster: Cluster, tmp_path
):
    wire = engine("text: first answer", args=("--session", "cafe-0001"))
    wire.prompt("remember the word tangerine")
    wire.close()
    url = pg_cluster.create_database("moves").replace(f":{PASSWORD}@", "@")

    out = cli(sandbox, "export", "cafe", "--store", url)
    assert out.returncode == 0, out.stderr
    assert "Copied cafe-0001" in out.stdout and PASSWORD not in out.stdout

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    back = cli(sandbox, "import", "cafe", "--store", url, work=elsewhere)
    assert back.returncode == 0, back.stderr
    shown = json.loads(cli(sandbox, "show", "cafe-0001", "--json", work=elsewhere).stdout)
    assert shown["turns"] == 1 and shown["title"] == "remember the word tangerine"
    history = [
        json.loads(line) for line in cli(sandbox, "history", "cafe-0001", work=elsewhere).stdout.splitlines()
    ]
    original = [json.loads(line) for line in cli(sandbox, "history", "cafe-0001").stdout.splitlines()]
    assert history == original

    again = cli(sandbox, "export", "cafe", "--store", url)
    assert again.returncode == 1 and "already exists" in again.stderr


def test_store_mistakes_are_one_line(engine, sandbox, pg_cluster: Cluster):
    wire = engine("text: hi", args=("--session", "beef-0001"))
    wire.prompt("hello")
    wire.close()
    with_password = pg_cluster.url()
    cases = [
        (("export", "beef", "--store", with_password), "not in the URL"),
        (("export", "beef", "--store", "nonsense=="), "not a PostgreSQL connection string"),
        (("import", "nope", "--store", pg_cluster.url(password=False)), "no session"),
    ]
    for args, message in cases:
        out = cli(sandbox, *args)
        assert out.returncode == 1, (args, out.stderr)
        assert message in out.stderr and out.stderr.count("\n") == 1, out.stderr
        assert "Traceback" not in out.stderr and PASSWORD not in out.stderr
    wrong = cli(sandbox, "export", "beef", "--store", pg_cluster.url(password=False), password="wrong")
    assert wrong.returncode == 1 and "password authentication failed" in wrong.stderr
    assert wrong.stderr.count("\n") == 1


def serve(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    env = sandbox.env()
    env["PGPASSWORD"] = PASSWORD
    return subprocess.run(
        [sys.executable, "-m", "soulwire", "serve", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_serve_migrate_only_prepares_the_schema_and_refuses_a_newer_one(sandbox, pg_cluster: Cluster):
    import psycopg

    from soulwire.sessions.postgres import SCHEMA_VERSION

    url = pg_cluster.create_database("ops")
    bare = url.replace(f":{PASSWORD}@", "@")
    for _ in range(2):  # a second run has nothing to do
        out = serve(sandbox, "--store", bare, "--migrate-only")
        assert out.returncode == 0, out.stderr
        assert f"schema is at version {SCHEMA_VERSION}" in out.stderr
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO soulwire_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    newer = serve(sandbox, "--store", bare, "--migrate-only")
    assert newer.returncode == 1 and "newer than this Soulwire knows" in newer.stderr
    assert newer.stderr.count("\n") == 1
    lonely = serve(sandbox, "--migrate-only")
    assert lonely.returncode == 2 and "--migrate-only needs --store" in lonely.stderr
    for args in (("--processes", "0"), ("--max-steps-per-turn", "0"), ("--store", bare, "--processes", "2")):
        out = serve(sandbox, *args)  # checks made after parsing: one line and exit 2, not an internal error
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and "internal error" not in out.stderr, (
            out.stderr
        )
