"""The one JSON-RPC peer, over in-memory and callback streams: requests both ways, typed
params, notifications, bad input, and what happens to pending work when things end or are
cancelled (every resource owner has a cancellation test)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskStatus

from soulwire.wire.jsonrpc import RPCError
from soulwire.wire.methods import SetPlanModeParams
from soulwire.wire.peer import DEFERRED, Method, Peer, PeerClosedError
from soulwire.wire.streams import CallbackStream, MemoryStream, memory_pair

pytestmark = pytest.mark.anyio

Pair = tuple[MemoryStream, MemoryStream]


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    """Two connected in-memory ends, both closed when the test ends (an open one left to the
    garbage collector warns at some later test)."""
    a, b = memory_pair()
    yield a, b
    await a.aclose()
    await b.aclose()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The peer is in `soulwire.wire`, what SDK users import into their own event loop: it
    runs on both of anyio's backends (on asyncio a synchronous stream is flushed by a loop
    callback, elsewhere by the writer task), and each test runs on both."""
    return request.param


async def test_requests_both_ways_and_typed_params(pair: Pair) -> None:
    a, b = pair
    seen: list[Any] = []

    def set_mode(params: SetPlanModeParams, _id: str) -> dict[str, Any]:
        return {"plan_mode": params.enabled}

    async def slow(_params: Any, _id: str) -> str:
        await anyio.lowlevel.checkpoint()
        return "later"

    server_methods = {"set_plan_mode": Method(set_mode, SetPlanModeParams), "slow": Method(slow)}
    async with (
        Peer(a, methods=server_methods, notifications={"note": seen.append}) as server,
        Peer(b, methods={"echo": Method(lambda p, _i: p)}) as client,
    ):
        assert await client.request("set_plan_mode", {"enabled": True}) == {"plan_mode": True}
        assert await client.request("slow") == "later"
        assert await server.request("echo", [1, 2]) == [1, 2]
        client.notify("note", {"x": 1})
        with pytest.raises(RPCError) as bad:
            await client.request("set_plan_mode", {"enabled": "yes"})
        assert bad.value.code == -32602 and bad.value.data == {"field": "enabled"}
        with pytest.raises(RPCError) as missing:
            await client.request("nope")
        assert missing.value.code == -32601
    assert seen == [{"x": 1}]


async def test_a_handler_bug_is_an_internal_error_and_the_peer_keeps_serving(
    caplog: pytest.LogCaptureFixture, pair: Pair
) -> None:
    """The client is told that it happened and under which incident id; the exception's text
    (paths, internals, secrets) goes to the log only."""
    a, b = pair

    def broken(_params: Any, _id: str) -> None:
        raise ValueError("boom at /home/someone/secret")

    async with Peer(a, methods={"broken": Method(broken), "ok": Method(lambda _p, _i: 1)}), Peer(b) as client:
        with pytest.raises(RPCError) as error:
            await client.request("broken")
        assert await client.request("ok") == 1
    incident = error.value.data["incident"]
    assert error.value.code == -32603
    assert error.value.message == (
        f"Internal error: the engine failed unexpectedly (incident {incident}; the details are in its log)"
    )
    [record] = [r for r in caplog.records if incident in r.getMessage()]
    assert record.exc_info is not None and "boom at /home/someone/secret" in str(record.exc_info[1])


async def test_bad_lines_get_errors_with_null_id(pair: Pair) -> None:
    a, b = pair
    async with Peer(a, methods={"ok": Method(lambda _p, _i: 1)}):
        for line, code in ((b"{nope", -32700), (b"[1]", -32600), (b"[" * 5000 + b"]" * 5000, -32600)):
            b.send(line + b"\n")
            answer = json.loads(await b.receive())
            assert answer["id"] is None and answer["error"]["code"] == code
        b.send(b'{"jsonrpc":"2.0","id":"x","method":"ok"}\n')
        assert json.loads(await b.receive())["result"] == 1


async def test_deferred_answers_and_answers_from_another_thread(pair: Pair) -> None:
    a, b = pair
    holder: dict[str, Any] = {}

    def later(_params: Any, request_id: str) -> Any:
        holder["id"] = request_id
        return DEFERRED

    async with Peer(a, methods={"later": Method(later)}) as server, Peer(b) as client:
        async with anyio.create_task_group() as group:
            results: list[Any] = []

            async def ask() -> None:
                results.append(await client.request("later"))

            group.start_soon(ask)
            with anyio.fail_after(30):
                while "id" not in holder:
                    await anyio.sleep(0.001)
            thread = threading.Thread(target=server.respond, args=(holder["id"], "from a thread"))
            await anyio.to_thread.run_sync(lambda: (thread.start(), thread.join()))
        assert results == ["from a thread"]


async def test_cancelling_a_wait_forgets_the_request(pair: Pair) -> None:
    a, b = pair
    async with Peer(a, methods={"never": Method(lambda _p, _i: DEFERRED)}), Peer(b) as client:
        with anyio.move_on_after(0.05) as scope:
            await client.request("never")
        assert scope.cancelled_caught
        assert client._pending == {}


async def test_leaving_the_peer_cancels_its_tasks_and_fails_pending_requests(pair: Pair) -> None:
    a, b = pair
    handler_started, handler_cancelled = anyio.Event(), anyio.Event()

    async def forever(_params: Any, _id: str) -> None:
        handler_started.set()
        try:
            await anyio.sleep(math.inf)  # (the scenario: a handler that runs until cancelled)
        finally:
            handler_cancelled.set()

    outcome: list[BaseException | None] = []
    async with Peer(b) as client:
        async with Peer(a, methods={"forever": Method(forever)}):
            client.send_request("forever", None, lambda _r, e: outcome.append(e))
            with anyio.fail_after(30):
                await handler_started.wait()
        with anyio.fail_after(30):
            await handler_cancelled.wait()  # the server's handler task was cancelled on exit
        client.close(PeerClosedError("gone"))
    assert isinstance(outcome[0], PeerClosedError)
    # and a request after closing fails at once
    late: list[BaseException | None] = []
    client.send_request("x", None, lambda _r, e: late.append(e))
    assert isinstance(late[0], PeerClosedError)


async def test_end_of_input_is_signalled(pair: Pair) -> None:
    a, b = pair
    async with Peer(a) as server:
        await b.aclose()
        with anyio.fail_after(5):
            await server.input_closed.wait()


async def test_callback_stream_is_what_a_websocket_adapter_fills() -> None:
    inbox: list[str] = ['{"jsonrpc":"2.0","id":"1","method":"ok"}']
    outbox: list[str] = []
    done = anyio.Event()

    async def receive() -> str | None:
        if inbox:
            return inbox.pop(0)
        await done.wait()
        return None

    async def send(text: str) -> None:
        outbox.append(text)
        done.set()

    async with Peer(CallbackStream(receive, send), methods={"ok": Method(lambda _p, _i: "yes")}) as peer:
        with anyio.fail_after(5):
            await peer.input_closed.wait()
    assert [json.loads(m)["result"] for m in outbox] == ["yes"]


async def test_peer_in_a_task_started_with_status(pair: Pair) -> None:
    """A peer can live in a task of its own and be cancelled from outside."""
    a, _b = pair

    async def run(*, task_status: TaskStatus[Peer]) -> None:
        async with Peer(a) as peer:
            task_status.started(peer)
            await anyio.sleep(math.inf)

    async with anyio.create_task_group() as group:
        peer = await group.start(run)
        assert peer.running
        group.cancel_scope.cancel()
    assert not peer.running


async def test_a_peer_over_pipes_answers_on_either_backend() -> None:
    """FdStream (stdio) flushes by a loop callback on asyncio and by the writer task on
    other backends: both paths carry a request and its answer."""
    import os

    from soulwire.wire.lines import LineReader
    from soulwire.wire.streams import FdStream

    to_server, from_client = os.pipe()
    to_client, from_server = os.pipe()
    server_stream = FdStream(LineReader(to_server), from_server)
    client_stream = FdStream(LineReader(to_client), from_client)
    try:
        with anyio.fail_after(30):
            async with (
                Peer(server_stream, methods={"ping": Method(lambda _p, _i: "pong")}),
                Peer(client_stream) as client,
            ):
                assert [await client.request("ping") for _ in range(3)] == ["pong"] * 3
    finally:
        for fd in (to_server, from_client, to_client, from_server):
            try:
                os.close(fd)
            except OSError:
                pass
