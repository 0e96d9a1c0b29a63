"""A handed-over session whose ownership is never released: the hand-over says so within
`RELEASE_S` instead of waiting for ever (stand-ins for the registry and the live session)."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest

from soulwire.server import handover
from soulwire.server.registry import SessionError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # (the server runs on asyncio)


class _Live:
    id = "s-1"
    busy = False
    closed = False
    close_code = None

    def __init__(self) -> None:
        self.finished = anyio.Event()

    def close(self) -> None:
        self.closed = True
        self.finished.set()


async def test_an_ownership_never_released_ends_the_hand_over_with_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(handover, "RELEASE_S", 0.2)
    live = _Live()
    stuck = SimpleNamespace(ownership=SimpleNamespace(held={live.id}))  # never let go
    registry = SimpleNamespace(replica=stuck, live={live.id: live}, draining=False)
    with anyio.fail_after(30), pytest.raises(SessionError) as refused:
        await handover.hand_over(registry, live.id)  # pyright: ignore[reportArgumentType]
    assert refused.value.status == 503 and live.closed
