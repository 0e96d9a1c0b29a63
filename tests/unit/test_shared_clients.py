"""Shared SDK clients (llm/transport.SharedClients): adapters with the same endpoint and key
get one client when the host turns sharing on; a reset after a connection failure stops
handing that client out without closing it under the sessions still streaming on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from soulwire.llm.transport import SHARED_CLIENTS, LazyClient


class FakeClient:
    def __init__(self, n: int) -> None:
        self.n = n
        self.closed = False

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def sharing() -> Iterator[None]:
    was = SHARED_CLIENTS.enabled
    SHARED_CLIENTS.enable()
    yield
    SHARED_CLIENTS.enabled = was


def counter() -> Any:
    built: list[FakeClient] = []

    def build() -> FakeClient:
        built.append(FakeClient(len(built)))
        return built[-1]

    return build, built


def test_without_sharing_every_adapter_builds_its_own() -> None:
    build, built = counter()
    assert not SHARED_CLIENTS.enabled  # off unless a host turns it on
    first = LazyClient(build, lambda: ("k",)).get()
    second = LazyClient(build, lambda: ("k",)).get()
    assert first is not second and len(built) == 2


def test_same_key_one_client_and_a_reset_forgets_it_without_closing_it(sharing: None) -> None:
    build, built = counter()
    key = ("openai", "AsyncOpenAI", "http://x", "k-reset-test", (), 300.0)
    a, b = LazyClient(build, lambda: key), LazyClient(build, lambda: key)
    other = LazyClient(build, lambda: (*key[:3], "another key", *key[4:]))
    shared = a.get()
    assert b.get() is shared and other.get() is not shared and len(built) == 2

    anyio.run(a.reset)  # a's connection failed: a gets a new client, b keeps streaming on the old
    assert not shared.closed
    fresh = a.get()
    assert fresh is not shared and b.get() is shared
    assert LazyClient(build, lambda: key).get() is fresh  # newcomers get the new one


def test_a_session_closes_its_own_client_and_the_host_closes_the_shared_ones(sharing: None) -> None:
    build, built = counter()
    key = ("anthropic", "AsyncAnthropic", "http://x", "k-close-test", (), 300.0)
    a, b = LazyClient(build, lambda: key), LazyClient(build, lambda: key)
    shared = a.get()
    assert b.get() is shared
    anyio.run(a.aclose)  # a's session ended: b's still streams on the shared client
    assert not shared.closed and b.get() is shared and a.get() is shared
    anyio.run(SHARED_CLIENTS.aclose)  # the host stops: every shared client is closed
    assert shared.closed
    assert LazyClient(build, lambda: key).get() is not shared and len(built) == 2

    SHARED_CLIENTS.enabled = False
    own = LazyClient(build, lambda: key)
    client = own.get()
    anyio.run(own.aclose)  # not shared: the session's end closes it
    assert client.closed and not own.built


def test_a_preload_runs_once_per_adapter_and_a_second_call_does_not_wait() -> None:
    """The Wire warm-up starts the preload and the server asks again at its start: the second
    call returns at once (no second build, no thread left waiting for the first)."""
    import threading

    from soulwire.config.model import ModelConfig, ProviderConfig
    from soulwire.llm.openai_chat import openai_legacy_factory

    provider = openai_legacy_factory(
        ProviderConfig(type="openai_legacy", base_url="http://127.0.0.1:9/v1", api_key="k"),
        ModelConfig(provider="p", model="m", max_context_size=1000),
        {},
    )
    release, started = threading.Event(), threading.Event()
    built: list[FakeClient] = []

    def build() -> FakeClient:
        started.set()
        release.wait(30)  # (the test below checks the outcome, not this thread)
        built.append(FakeClient(len(built)))
        return built[-1]

    provider._client = LazyClient(build)
    first = threading.Thread(target=provider.preload)
    first.start()
    assert started.wait(30)
    provider.preload()  # returns while the first one is still building
    release.set()
    first.join(30)
    assert not first.is_alive()
    provider.preload()
    assert len(built) == 1
