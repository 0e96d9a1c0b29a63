"""`ServerSessions`: the SDK's session catalogue over a real `soulwire serve` (list, typed
history, fork from an earlier turn, delete, clear errors)."""

from __future__ import annotations

import pytest

import soulwire.sdk as sdk

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_server_sessions_list_history_fork_delete(serve, sandbox):  # pyright: ignore[reportMissingParameterType, reportUnknownParameterType]
    server = serve("text: one", "text: two")
    session_id = server.create_session(title="remote")
    ws = server.ws(session_id)
    ws.initialize()
    ws.call("prompt", {"user_input": "first"})
    ws.call("prompt", {"user_input": "second"})
    ws.close()
    remote = sdk.ServerSessions(server.base, server.token)

    (listed,) = await remote.list()
    assert listed.id == session_id and listed.title == "remote" and listed.turns == 2
    turns = await remote.history(session_id, page=3)  # several pages
    assert [t.user_input for t in turns] == ["first", "second"]
    assert [m.text for m in turns[1].messages if isinstance(m, sdk.AssistantText)] == ["two"]

    fork = await remote.fork(session_id, turn=1)
    assert fork.turns == 1 and fork.title == "Fork of remote"
    assert [t.user_input for t in await remote.history(fork.id)] == ["first"]
    assert remote.websocket_url(fork.id).endswith(f"/ws/sessions/{fork.id}")
    with pytest.raises(sdk.SessionStoreError, match="HTTP 422"):
        await remote.fork(session_id, turn=9)

    await remote.delete(fork.id)
    with pytest.raises(sdk.SessionNotFoundError):
        await remote.get(fork.id)
    with pytest.raises(sdk.SessionStoreError, match="401"):
        await sdk.ServerSessions(server.base, "wrong-token").list()
