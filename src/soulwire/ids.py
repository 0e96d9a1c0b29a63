"""Random identifiers made from `os.urandom`, without the `uuid` module: importing it loads
`platform` and `_uuid` (~2 ms), and it sits on the start-up path of every engine, for what is
16 random bytes with two fields set."""

from __future__ import annotations

import os


def uuid4_hex() -> str:
    """A random (version 4) UUID as 32 hex digits, like `uuid.uuid4().hex`."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return raw.hex()


def uuid4() -> str:
    """A random UUID in its canonical form, like `str(uuid.uuid4())`."""
    h = uuid4_hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


__all__ = ["uuid4", "uuid4_hex"]
