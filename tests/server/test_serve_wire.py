"""Wire over WebSocket: a turn streamed as on stdio, `seq` and re-attach without loss or
duplication, observers, approvals answered over the socket, deadlines, controller hand-off."""

from __future__ import annotations

from typing import Any

from tests.server.serve_client import events, seqs
from tests.tool_calls import approve, call

SHELL_TURN = ("text: step1\n" + call("tc-1", "Shell", {"command": "echo ok"}), "text: done")


def types(messages: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["type"] for m in events(messages)]


def is_event(kind: str):
    return lambda m: m.get("method") == "event" and m["params"]["type"] == kind


def is_attached(m: dict[str, Any]) -> bool:
    return m.get("method") == "attached"


def is_request(m: dict[str, Any]) -> bool:
    return m.get("method") == "request"


def tool_output(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in messages if is_event("ToolResult")(m))["params"]["payload"]["return_value"]


def test_a_turn_streams_over_websocket_as_on_stdio(serve):
    server = serve("text: hello there")
    ws = server.ws(server.create_session())
    result = ws.initialize()
    assert "serve" not in result  # an old client sees today's Wire
    messages, response = ws.call("prompt", {"user_input": "hi"})
    assert response["result"] == {"status": "finished"}
    assert types(messages) == ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    assert not seqs(messages)  # nothing numbered unless asked for
    text = next(m for m in messages if is_event("ContentPart")(m))["params"]["payload"]
    assert text == {"type": "text", "text": "hello there"}


def test_events_are_numbered_for_a_client_that_asks(serve):
    server = serve("text: one", "text: two")
    ws = server.ws(server.create_session())
    result = ws.initialize(serve={"seq": True})
    assert result["serve"]["mode"] == "controller" and isinstance(result["serve"]["last_seq"], int)
    first, _ = ws.call("prompt", {"user_input": "a"})
    second, _ = ws.call("prompt", {"user_input": "b"})
    numbers = seqs(first + second)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # no gap, no repeat


def test_a_batching_client_gets_several_messages_per_frame_and_no_frame_too_large(serve):
    script = "\n".join(f"text: tok{i} {'y' * 500}" for i in range(2000))
    server = serve(script, script)
    session = server.create_session()
    plain = server.ws(session, mode="observer")
    batched = server.ws(session)
    batched.initialize(serve={"seq": True, "batch": True, "max_message_bytes": 65_536})
    messages, done = batched.call("prompt", {"user_input": "a"})
    assert done["result"]["status"] == "finished"
    parts = [m for m in messages if is_event("ContentPart")(m)]
    assert len(parts) == 2000 and batched.frames < len(messages) / 10
    assert max(batched.sizes) <= 65_536
    numbers = seqs(messages)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    watched = plain.until(is_event("TurnEnd"))  # the old client beside it: one message a frame
    assert plain.frames == len(watched) and sum(1 for m in watched if is_event("ContentPart")(m)) == 2000


def test_a_dropped_connection_reattaches_from_its_last_seq_losing_nothing(serve):
    server = serve(*SHELL_TURN)
    session = server.create_session()
    ws = server.ws(session, since_seq=0)
    before = ws.until(is_attached)
    attached = before[-1]["params"]
    assert attached["complete"] is True
    hello = {"protocol_version": "1.10", "serve": {"seq": True}}
    before += ws.call("initialize", hello)[0]  # the missed events arrive after `attached`
    ws.request("prompt", {"user_input": "go"})
    before += ws.until(is_event("TurnBegin"))
    last = seqs(before)[-1]
    ws.close()  # dropped mid-turn: the rest of the turn goes on without a client

    again = server.ws(session, since_seq=last, epoch=attached["epoch"], mode="controller", take=1)
    after = again.until(is_request)  # the missed events, then the approval still waiting
    again.respond(after[-1]["id"], approve(after[-1]))
    after += again.until(is_event("TurnEnd"))
    received = seqs(before) + seqs(after)
    assert received == list(range(1, len(received) + 1))
    assert types(after)[:3] == ["StepBegin", "ContentPart", "ToolCall"]
    assert tool_output(after)["output"] == "ok\n"
    resolved = [m["params"] for m in after if m.get("method") == "request/resolved"]
    assert resolved and resolved[0]["by"] == "client" and resolved[0]["response"] == "approve"


def test_reattach_from_a_gone_epoch_says_incomplete(serve):
    server = serve("text: hi")
    session = server.create_session()
    ws = server.ws(session, since_seq=5, epoch="not-this-run")
    attached = ws.until(is_attached)[-1]["params"]
    assert attached["complete"] is False and attached["sent"] == 0
    history = server.api("GET", f"/api/sessions/{session}/history").json()
    assert history["records"] == []  # the snapshot to reload from


def test_an_observer_sees_what_the_controller_sees_and_cannot_act(serve):
    server = serve(*SHELL_TURN)
    session = server.create_session()
    controller = server.ws(session, since_seq=0)
    controller.until(is_attached)
    observer = server.ws(session, since_seq=0, mode="observer")
    assert observer.until(is_attached)[-1]["params"]["mode"] == "observer"
    controller.initialize(serve={"seq": True})
    _, refused = observer.call("prompt", {"user_input": "me too"})
    assert refused["error"]["data"]["reason"] == "observer"

    controller.request("prompt", {"user_input": "go"})
    watched = observer.until(is_request)
    request = watched[-1]
    observer.respond(request["id"], {"request_id": request["id"], "response": "reject"})  # ignored
    seen = controller.until(is_event("TurnEnd"), answer=approve)
    watched += observer.until(is_event("TurnEnd"))
    assert tool_output(seen)["output"] == "ok\n"  # the observer's reject did not count

    def numbered(messages: list[dict[str, Any]]) -> list[tuple[int, str]]:
        return [(m["params"]["seq"], m["method"]) for m in messages if "seq" in (m.get("params") or {})]

    shared = [x for x in numbered(watched) if x[0] >= numbered(seen)[0][0]]
    assert shared == numbered(seen)


def test_an_unanswered_approval_times_out_to_the_declared_default(serve):
    server = serve(*SHELL_TURN)
    ws = server.ws(server.create_session())
    result = ws.initialize(serve={"seq": True, "deadline_ms": 300, "on_timeout": "reject"})
    assert result["serve"]["deadline_ms"] == 300
    messages, response = ws.call("prompt", {"user_input": "go"})  # nothing answers
    assert response["result"]["status"] == "finished"
    request = next(m for m in messages if is_request(m))
    assert request["params"]["deadline_ms"] == 300 and request["params"]["on_timeout"] == "reject"
    assert tool_output(messages)["is_error"] is True
    resolved = next(m for m in messages if m.get("method") == "request/resolved")["params"]
    assert resolved.pop("seq") > request["params"]["seq"]
    assert resolved == {
        "id": request["id"],
        "type": "ApprovalRequest",
        "by": "deadline",
        "response": "reject",
    }


def test_the_server_default_can_approve_on_timeout(serve):
    server = serve(*SHELL_TURN, args=("--request-timeout", "0.3", "--on-timeout", "approve"))
    ws = server.ws(server.create_session())
    ws.initialize()
    messages, _ = ws.call("prompt", {"user_input": "go"})
    assert tool_output(messages)["output"] == "ok\n"


def test_a_new_controller_gets_the_open_request_and_answers_it(serve):
    server = serve(*SHELL_TURN)
    session = server.create_session()
    first = server.ws(session)
    first.initialize()
    first.request("prompt", {"user_input": "go"})
    first.until(is_request)
    first.close()  # the controller is gone while the approval waits

    second = server.ws(session)  # a plain client: controller, the open request sent again
    request = second.until(is_request)[-1]
    assert request["params"]["type"] == "ApprovalRequest"
    second.respond(request["id"], approve(request))
    rest = second.until(is_event("TurnEnd"))
    assert tool_output(rest)["output"] == "ok\n"


def test_the_controller_role_is_handed_over(serve):
    server = serve("text: by the second")
    session = server.create_session()
    first = server.ws(session, mode="controller")
    assert first.until(is_attached)[-1]["params"]["mode"] == "controller"
    second = server.ws(session, mode="observer")
    second.until(is_attached)
    _, taken = second.call("attach", {"mode": "controller"})
    assert taken["error"]["data"]["reason"] == "controller_taken"
    _, took = second.call("attach", {"mode": "controller", "take": True})
    assert took["result"]["mode"] == "controller"
    _, refused = first.call("prompt", {"user_input": "still mine?"})
    assert refused["error"]["data"]["reason"] == "observer"
    second.initialize()
    _, done = second.call("prompt", {"user_input": "mine"})
    assert done["result"]["status"] == "finished"
    assert {"AttachResult", "RoleChanged"} <= set(first.shapes.checked) & set(second.shapes.checked)


def test_requests_pending_lists_open_requests(serve):
    server = serve(*SHELL_TURN)
    ws = server.ws(server.create_session())
    ws.initialize(serve={"seq": True})
    ws.request("prompt", {"user_input": "go"})
    request = ws.until(is_request)[-1]
    again, listing = ws.call("requests/pending")
    (pending,) = listing["result"]["requests"]
    assert pending["id"] == request["id"] and pending["type"] == "ApprovalRequest"
    assert 0 < pending["deadline_ms"] <= 300_000
    resent = again[-1]  # sent again to the controller that asked, before the answer
    assert resent["id"] == request["id"] and resent["params"]["resent"] is True
    ws.respond(request["id"], approve(request))
    assert tool_output(ws.until(is_event("TurnEnd")))["output"] == "ok\n"
    # Each of those messages was validated against the serve protocol's models, as received.
    assert {"ServeInfo", "EventMembers", "RequestMembers", "RequestsPendingResult", "RequestResolved"} <= set(
        ws.shapes.checked
    )


def test_bad_input_gets_an_error_and_the_session_keeps_serving(serve):
    server = serve("text: fine")
    ws = server.ws(server.create_session())
    ws.conn.send("{not json")
    assert ws.recv()["error"]["code"] == -32700
    _, bad = ws.call("attach", {"since_seq": "x"})
    assert bad["error"]["code"] == -32602
    ws.initialize()
    _, done = ws.call("prompt", {"user_input": "hi"})
    assert done["result"]["status"] == "finished"


def test_on_timeout_cancel_rejects_and_cancels_the_turn(serve):
    server = serve(*SHELL_TURN)
    ws = server.ws(server.create_session())
    ws.initialize(serve={"seq": True, "deadline_ms": 300, "on_timeout": "cancel"})
    messages, response = ws.call("prompt", {"user_input": "go"})
    assert response["result"]["status"] == "cancelled"
    assert "StepBegin" in types(messages) and not any(
        is_event("ContentPart")(m) and m["params"]["payload"].get("text") == "done" for m in messages
    )
    resolved = next(m for m in messages if m.get("method") == "request/resolved")["params"]
    assert resolved["by"] == "deadline" and resolved["response"] == "cancel"


def test_approval_rules_are_data_a_client_can_list_add_and_revoke(serve, sandbox):
    server = serve(*SHELL_TURN, *SHELL_TURN)
    session = server.create_session()
    ws = server.ws(session)
    ws.initialize(serve={"seq": True})
    observer = server.ws(session, mode="observer")
    ws.call(
        "prompt",
        {"user_input": "go"},
        answer=lambda m: {"request_id": m["id"], "response": "approve_for_session"},
    )
    _, listed = observer.call("approvals/rules/list")
    assert listed["result"]["rules"] == ["run command: echo ok"]
    _, refused = observer.call("approvals/rules/remove", {"rule": "run command: echo ok"})
    assert refused["error"]["data"]["reason"] == "observer"

    _, removed = ws.call("approvals/rules/remove", {"rule": "run command: echo ok"})
    assert removed["result"]["rules"] == []
    again, _ = ws.call("prompt", {"user_input": "go again"}, answer=approve)
    assert any(is_request(m) for m in again)  # revoked: asked again

    _, added = ws.call("approvals/rules/add", {"rule": "run command"})
    assert added["result"]["rules"] == ["run command"]
    state = next(sandbox.share.glob(f"sessions/*/{session}/state.json")).read_text()
    assert '"run command"' in state
    _, bad = ws.call("approvals/rules/add", {"rule": ""})
    assert bad["error"]["code"] == -32602
    _, broken = ws.call("approvals/rules/add", {"rule": "Shell(echo"})
    assert broken["error"]["code"] == -32602 and broken["error"]["data"]["reason"] == "bad_rule"


def test_a_pattern_rule_approves_matching_commands_only(serve):
    echo = ("text: s\n" + call("tc-1", "Shell", {"command": "echo ok"}), "text: done")
    other = ("text: s\n" + call("tc-2", "Shell", {"command": "printf no"}), "text: done")
    server = serve(*echo, *other)
    ws = server.ws(server.create_session())
    ws.initialize(serve={"seq": True})
    _, added = ws.call("approvals/rules/add", {"rule": "Shell(echo *)"})
    assert added["result"]["rules"] == ["Shell(echo *)"]
    first, _ = ws.call("prompt", {"user_input": "a"}, answer=approve)
    assert not any(is_request(m) for m in first) and tool_output(first)["output"] == "ok\n"
    second, _ = ws.call("prompt", {"user_input": "b"}, answer=approve)
    assert any(is_request(m) for m in second)  # not covered: asked
