"""A throwaway PostgreSQL cluster for tests: initdb + pg_ctl on a temporary directory, listening
on 127.0.0.1 at a free port with password (SCRAM) authentication. As root the server runs as
the `postgres` user (PostgreSQL refuses root), as the packaged server does."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

USER = "soulwire"
PASSWORD = "s3cret-for-tests"


def bin_dir() -> Path | None:
    """Where initdb and pg_ctl are (Debian keeps them out of PATH), or None."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[4]))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    data: Path
    port: int
    bindir: Path
    run_as: str | None

    def url(self, database: str = "postgres", *, password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = list(argv)
        if self.run_as:
            command = ["runuser", "-u", self.run_as, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=120)

    def start(self) -> None:
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.data / "server.log"),
            "-o",
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off",
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.data.parent, ignore_errors=True)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # pyright: ignore[reportArgumentType]
        return self.url(name)


def make_cluster() -> Cluster:
    """A started cluster in a new directory under the system's temporary dir (pytest's are
    private to root, which the `postgres` user could not enter); `remove` deletes it."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="soulwire-pg-"))
    bindir = bin_dir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL's initdb is not installed (Debian: apt-get install postgresql)")
    run_as = "postgres" if os.geteuid() == 0 else None
    data = root / "pgdata"
    data.mkdir(parents=True)
    pwfile = root / "pwfile"
    pwfile.write_text(PASSWORD + "\n")
    if run_as:
        entry = pwd.getpwnam(run_as)
        for path in (root, data, pwfile):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    cluster = Cluster(data=data, port=_free_port(), bindir=bindir, run_as=run_as)
    cluster._run(
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-U",
        USER,
        f"--pwfile={pwfile}",
        "--auth=scram-sha-256",
        "-E",
        "UTF8",
        "--locale=C.UTF-8",
        "--no-sync",
    )
    cluster.start()
    return cluster
