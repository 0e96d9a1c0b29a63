"""Host names and addresses: what counts as this machine's own loopback (for `serve`'s
listening warnings and tokens, and for the SDK's connections that need no proxy)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """`localhost`, or an IPv4/IPv6 loopback address (brackets allowed: `[::1]`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["is_loopback"]
