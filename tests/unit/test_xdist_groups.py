"""The suite relies on pytest-xdist's `xdist_group` marks (--dist loadgroup) to keep the
tests that share a costly fixture (a PostgreSQL cluster, the Node SDK's npm install) on one
worker. When a pytest or xdist upgrade stops honouring the marks, the shared fixtures race;
this fails first, naming the cause."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("probe")
def test_xdist_group_marks_hold(request: pytest.FixtureRequest) -> None:
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("not on an xdist worker with --dist loadgroup (e.g. -n 0)")
    assert request.node.nodeid.endswith("@probe"), (
        "pytest-xdist did not tag this grouped test's id with its group: the xdist_group marks "
        "are ignored by this pytest/xdist pair (see the pytest pin in pyproject.toml)"
    )
