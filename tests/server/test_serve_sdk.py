"""The SDK's RemoteSession against the real server: a turn streamed, approvals answered by a
callback, and a connection broken mid-turn re-opened from the last seq with every event
delivered exactly once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from soulwire.sdk.link import ws_options
from soulwire.sdk.remote import RemoteSession
from tests.server.test_serve_wire import SHELL_TURN


async def watched_turn(observer: Any, run: Callable[[], Awaitable[Any]]) -> list[str]:
    """The event types an observer `sdk.Session` sees while `run()` runs a turn, up to its
    TurnEnd (the observer watches before the turn starts)."""
    seen: list[str] = []

    async def watch() -> None:
        async for event in observer.watch():
            seen.append(type(event).__name__)
            if seen[-1] == "TurnEnd":
                return

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        with anyio.fail_after(30):
            while not observer._watchers:
                await anyio.sleep(0.01)
        await run()
    return seen


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


def test_session_attach_runs_a_turn_on_the_server_with_the_high_level_api(serve):
    from soulwire import sdk

    server = serve(*SHELL_TURN)
    session_id = server.create_session()

    async def main() -> tuple[Any, list[str], dict[str, Any]]:
        session = sdk.Session.attach(
            url(server, session_id), server.token, on_approval=lambda _a: "approve", deadline_ms=90_000
        )
        async with session:
            turn = session.prompt("go")
            kinds = [type(event).__name__ async for event in turn]
            assert session.initialize_result is not None
            return turn.result, kinds, session.initialize_result["serve"]

    result, kinds, serve_info = anyio.run(main)
    assert result.status == "finished" and serve_info["deadline_ms"] == 90_000
    assert kinds[0] == "TurnBegin" and "ToolResult" in kinds and kinds[-1] == "TurnEnd"


def test_session_attach_survives_a_dropped_connection_without_losing_or_repeating(serve):
    from soulwire import sdk

    server = serve(*SHELL_TURN)
    session_id = server.create_session()

    async def main() -> tuple[Any, list[str], int]:
        asked: list[str] = []

        def policy(approval: sdk.Approval) -> str:
            asked.append(approval.id)
            assert session.link is not None
            if len(asked) == 1:
                session.link.drop()  # the network fails while the approval waits
            return "approve"

        session = sdk.Session.attach(url(server, session_id), server.token, on_approval=policy)
        with anyio.fail_after(60):  # a lost answer would hang the turn
            await session.start()
            try:
                turn = session.prompt("go")
                kinds = [type(event).__name__ async for event in turn]
                assert session.link is not None
                return turn.result, kinds, session.link.reconnects
            finally:
                await session.close()

    result, kinds, reconnects = anyio.run(main)
    assert reconnects == 1 and result.status == "finished"
    assert kinds.count("TurnBegin") == 1 and kinds.count("ToolCall") == 1 and kinds.count("ToolResult") == 1
    assert kinds[-1] == "TurnEnd"
    assert result.steps[0].tool_results[0].return_value.output == "ok\n"


def test_an_observer_session_watches_and_rules_are_managed_through_the_sdk(serve):
    from soulwire import sdk

    server = serve("text: watched")
    session_id = server.create_session()

    async def main() -> tuple[list[str], list[str], list[str], str]:
        controller = sdk.Session.attach(url(server, session_id), server.token)
        observer = sdk.Session.attach(url(server, session_id), server.token, mode="observer")
        async with controller, observer:
            seen = await watched_turn(observer, lambda: controller.prompt("hi"))
            try:
                await observer.prompt("me too")
                refused = ""
            except sdk.InvalidStateError as exc:
                refused = str(exc)
            added = await controller.add_rule("Shell(git status*)")
            listed = await observer.rules()
            removed = await controller.remove_rule("Shell(git status*)")
            return seen, added, listed, refused or str(removed)

    seen, added, listed, refused = anyio.run(main)
    assert seen == ["TurnBegin", "StepBegin", "TextPart", "StatusUpdate", "TurnEnd"]
    assert added == listed == ["Shell(git status*)"]
    assert "observ" in refused


def test_a_session_created_on_its_websocket_streams_a_turn_and_reconnects_to_itself(serve, sandbox):
    server = serve(*SHELL_TURN)
    work = sandbox.root / "elsewhere"
    work.mkdir()
    asked: list[str] = []

    async def main() -> tuple[str | None, list[dict[str, Any]], int]:
        box: list[RemoteSession] = []

        def on_request(kind: str, payload: dict[str, Any]) -> Any:
            asked.append(kind)
            if len(asked) == 1:
                box[0].drop_connection()  # a re-attach must find this session, not create one
                return None
            return {"request_id": payload["id"], "response": "approve"}

        server_url = f"ws://127.0.0.1:{server.port}"
        async with RemoteSession.create(
            server_url, server.token, work_dir=str(work), on_request=on_request
        ) as remote:
            box.append(remote)
            events = [event async for event in remote.prompt("go")]
            return remote.session_id, events, remote.reconnects

    session_id, events, reconnects = anyio.run(main)
    assert session_id is not None and reconnects == 1
    assert [e["type"] for e in events].count("TurnBegin") == 1 and events[-1]["type"] == "TurnEnd"
    sessions = server.api("GET", "/api/sessions").json()
    assert [(s["id"], s["work_dir"]) for s in sessions] == [(session_id, str(work))]  # one, where asked


def test_a_refused_creation_says_why_and_creates_nothing(serve, sandbox):
    server = serve()

    async def main() -> None:
        server_url = f"ws://127.0.0.1:{server.port}"
        async with RemoteSession.create(server_url, server.token, work_dir=str(sandbox.root / "missing")):
            pass

    try:
        anyio.run(main)
    except BaseException as exc:  # the group of the refused connection
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        body = getattr(getattr(leaf, "response", None), "body", b"")
        assert getattr(getattr(leaf, "response", None), "status_code", None) == 422, repr(leaf)
        assert b"work_dir must be an existing absolute directory" in body
    else:
        raise AssertionError("the creation was not refused")
    assert server.api("GET", "/api/sessions").json() == []


def test_frames_of_several_messages_are_split_one_message_each():
    from soulwire.sdk.remote import _messages  # pyright: ignore[reportPrivateUsage]

    frames: list[str | bytes] = ['{"a":1}\n{"b":2}\n', '{"c":3}', b'{"d":4}\n{"e":5}', '{"f":6}\n']

    async def receive() -> str | bytes:
        return frames.pop(0)

    async def main() -> list[str | bytes]:
        next_message = _messages(receive)
        return [await next_message() for _ in range(6)]

    assert anyio.run(main) == ['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}', '{"e":5}', '{"f":6}\n']


def test_a_loopback_server_is_reached_directly_whatever_proxy_the_environment_names(serve, monkeypatch):
    """A proxy cannot reach our own 127.0.0.1: `RemoteSession` and the SDK's link to `serve`
    do not route loopback connections through `http_proxy`/`all_proxy`."""
    server = serve("text: no proxy")
    session = server.create_session()
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)

    async def main() -> list[dict[str, Any]]:
        async with RemoteSession.attach(url(server, session), server.token) as remote:
            return [event async for event in remote.prompt("hi")]

    events = anyio.run(main)
    assert events[-1]["type"] == "TurnEnd"
    assert ws_options("ws://127.0.0.1:1/x")["proxy"] is None
    assert ws_options("ws://[::1]:1/x")["proxy"] is None
    assert "proxy" not in ws_options("wss://agents.example.com/ws")  # elsewhere: the environment's
    assert "proxy" not in ws_options("ws://127.example.com/ws")  # a name, not an address


def test_a_prompt_after_attaching_to_a_session_with_history_streams_its_own_turn(serve):
    """Attaching from seq 0 replays the session's earlier turns; a prompt sent at once must
    yield its own turn's events, not return at a replayed TurnEnd."""
    server = serve("text: first answer", "text: second answer")
    session = server.create_session()

    async def run(text: str) -> list[dict[str, Any]]:
        async with RemoteSession.attach(url(server, session), server.token) as remote:
            return [event async for event in remote.prompt(text)]

    first = anyio.run(run, "one")
    assert first[-1]["type"] == "TurnEnd"
    second = anyio.run(run, "two")
    texts = [e["payload"]["text"] for e in second if e["type"] == "ContentPart"]
    assert texts == ["second answer"]
    assert [e["type"] for e in second].count("TurnBegin") == 1
    assert second[0]["seq"] > first[-1]["seq"]
