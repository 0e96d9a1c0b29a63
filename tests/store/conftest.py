from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import pytest

from soulwire.sessions.postgres import PostgresBackend
from tests.postgres_cluster import PASSWORD, Cluster, bin_dir, make_cluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    if bin_dir() is None:  # a failure, not a skip (tests/system_tools.py says why)
        pytest.fail(
            "PostgreSQL's initdb is not installed (apt-get install -y postgresql; .ci/run installs it)"
        )
    cluster = make_cluster()
    try:
        yield cluster
    finally:
        cluster.remove()


_databases = itertools.count(1)


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """A URL of a new empty database on the shared cluster."""
    return pg_cluster.create_database(f"t{next(_databases)}")


@pytest.fixture
def store(pg_cluster: Cluster) -> tuple[str, str]:
    """(URL with the password, for the test's own queries; URL without it, for argv)."""
    url = pg_cluster.create_database(f"serve{uuid.uuid4().hex[:12]}")
    return url, url.replace(f":{PASSWORD}@", "@")


@pytest.fixture
def backend(pg_url: str) -> Iterator[PostgresBackend]:
    """A migrated store on a new database."""
    backend = PostgresBackend(pg_url)
    backend.open_pool()
    backend.migrate()
    try:
        yield backend
    finally:
        backend.close()
