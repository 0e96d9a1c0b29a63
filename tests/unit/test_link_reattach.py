"""The SDK's reconnecting link (sdk/link.py) as pure data: what a re-attach names (the prompt
still unanswered, for a replica that took the session over) and which requests sent again it
delivers (one never delivered: asked again by the new owner), repeats its answer to, or drops."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

from soulwire.sdk.link import ReconnectingStream


def link() -> ReconnectingStream:
    return ReconnectingStream(
        "ws://h/ws/sessions/s", "t" * 20, mode="controller", take=False, reconnect_timeout_s=1
    )


def query(stream: ReconnectingStream, *, again: bool) -> dict[str, list[str]]:
    return parse_qs(urlsplit(stream._address(again=again)).query)  # pyright: ignore[reportPrivateUsage]


def line(body: dict[str, object]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def request(request_id: str, *, seq: int, resent: bool) -> bytes:
    params: dict[str, object] = {"seq": seq, "type": "ApprovalRequest", "payload": {"id": request_id}}
    if resent:
        params["resent"] = True
    return line({"jsonrpc": "2.0", "method": "request", "id": request_id, "params": params})


def test_a_re_attach_names_the_prompt_still_unanswered():
    stream = link()
    stream.send(line({"jsonrpc": "2.0", "method": "prompt", "id": "sdk-1-prompt", "params": {}}) + b"\n")
    assert "prompt_id" not in query(stream, again=False)
    assert query(stream, again=True)["prompt_id"] == ["sdk-1-prompt"]
    answer = line({"jsonrpc": "2.0", "id": "sdk-1-prompt", "result": {"status": "finished"}})
    assert stream._accept(answer) == answer  # pyright: ignore[reportPrivateUsage]
    assert "prompt_id" not in query(stream, again=True)  # answered: nothing to claim


def test_a_request_sent_again_is_delivered_once_and_answered_again():
    stream = link()
    stream.last_seq = 10
    never_seen = request("r1", seq=0, resent=True)  # asked again by a replica that took over
    assert stream._accept(never_seen) == never_seen  # pyright: ignore[reportPrivateUsage]
    assert stream._accept(never_seen) is None  # pyright: ignore[reportPrivateUsage]  (being answered)
    answer = line({"jsonrpc": "2.0", "id": "r1", "result": {"request_id": "r1", "response": "approve"}})
    stream.send(answer + b"\n")
    stream._outbox.clear()  # pyright: ignore[reportPrivateUsage]
    assert stream._accept(never_seen) is None  # pyright: ignore[reportPrivateUsage]
    assert list(stream._outbox) == [answer + b"\n"]  # pyright: ignore[reportPrivateUsage]  (sent again)
    assert stream._accept(request("r2", seq=3, resent=False)) is None  # pyright: ignore[reportPrivateUsage]
