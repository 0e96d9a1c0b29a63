"""The SDK's RemoteSession against the real server: a turn streamed, approvals answered by a
callback, and a connection broken mid-turn re-opened from the last seq with every event
delivered exactly once."""

from __future__ import annotations

from typing import Any

import anyio

from soulwire.sdk.remote import RemoteSession
from tests.server.test_serve_wire import SHELL_TURN


def url(server: Any, session: str) -> str:
    return f"ws://127.0.0.1:{server.port}/ws/sessions/{session}"


def test_a_remote_session_streams_a_turn(serve):
    server = serve("text: hello remote")
    session = server.create_session()

    async def main() -> list[dict[str, Any]]:
        async with RemoteSession.attach(url(server, session), server.token) as remote:
            return [event async for event in remote.prompt("hi")]

    events = anyio.run(main)
    assert [e["type"] for e in events] == ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    assert events[2]["payload"]["text"] == "hello remote"
    numbers = [e["seq"] for e in events]
    assert numbers == sorted(set(numbers))


def test_a_broken_connection_is_reopened_and_nothing_is_lost_or_repeated(serve):
    server = serve(*SHELL_TURN)
    session = server.create_session()
    asked: list[str] = []

    async def main() -> tuple[list[dict[str, Any]], int]:
        remote_box: list[RemoteSession] = []

        def on_request(kind: str, payload: dict[str, Any]) -> Any:
            asked.append(kind)
            if len(asked) == 1:
                remote_box[0].drop_connection()  # the network fails while the approval waits
                return None
            return {"request_id": payload["id"], "response": "approve"}

        async with RemoteSession.attach(url(server, session), server.token, on_request=on_request) as remote:
            remote_box.append(remote)
            events = [event async for event in remote.prompt("go")]
            return events, remote.reconnects

    events, reconnects = anyio.run(main)
    assert reconnects == 1 and asked == ["ApprovalRequest", "ApprovalRequest"]
    kinds = [e["type"] for e in events]
    assert kinds[:4] == ["TurnBegin", "StepBegin", "ContentPart", "ToolCall"]
    assert kinds.count("TurnBegin") == 1 and kinds.count("ToolCall") == 1 and kinds[-1] == "TurnEnd"
    result = next(e for e in events if e["type"] == "ToolResult")["payload"]["return_value"]
    assert result["output"] == "ok\n"
    numbers = [e["seq"] for e in events]
    assert numbers == sorted(set(numbers))
