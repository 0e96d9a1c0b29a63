"""A Ray cluster's address, checked before Ray is asked to join it (no Ray needed here)."""

from __future__ import annotations

import socket

import pytest

from soulwire.fleet.ray_backend import cluster_endpoint, probe_cluster


def test_the_endpoint_of_each_address_form() -> None:
    assert cluster_endpoint("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert cluster_endpoint("ray://head.example:10001") == ("head.example", 10001)
    assert cluster_endpoint("[::1]:6379") == ("::1", 6379)
    for resolved_by_ray in ("auto", "head.example", "ray://head", ":6379", "host:port"):
        assert cluster_endpoint(resolved_by_ray) is None, resolved_by_ray


def test_probing_a_closed_port_and_an_open_one() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        open_address = f"127.0.0.1:{listener.getsockname()[1]}"
        probe_cluster(open_address, timeout=5)
    with pytest.raises(
        ConnectionError, match=r"^cannot reach the Ray cluster at 127\.0\.0\.1:\d+: Connection refused$"
    ):
        probe_cluster(open_address, timeout=5)  # the listener is closed now
    probe_cluster("auto")  # left to Ray
