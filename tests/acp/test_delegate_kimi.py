"""The reference `kimi acp` (kimi-cli 1.49.0, its own scripted model, offline) as Soulwire's
sub-agent: a Soulwire turn delegates to it, its write asks the Wire client through Soulwire's
approvals, and the file is written once approved (tests/acp/kimi.py finds and sets it up)."""

from __future__ import annotations

from typing import Any

from tests.acp.kimi import kimi_agent, needs_kimi
from tests.acp.test_delegate import delegate_call, inner, run_turn, start
from tests.tool_calls import approve, call, requests, results
from tests.wire_client import Sandbox

pytestmark = needs_kimi


def test_kimi_acp_as_a_sub_agent_edits_a_file_after_the_users_approval(engine: Any, sandbox: Sandbox) -> None:
    kimi = kimi_agent(
        sandbox.root,
        call("w1", "WriteFile", {"path": "from-kimi.txt", "content": "written by kimi\n"}),
        "text: kimi wrote from-kimi.txt",
    )
    wire = start(
        engine,
        sandbox,
        {"kimi": kimi},
        delegate_call("a1", "kimi", "write the file"),
        "text: parent done",
    )
    messages, result = run_turn(wire, answer=approve)
    assert result == {"status": "finished"}
    [asked] = requests(messages)
    assert asked["sender"] == "kimi" and asked["action"] == "acp:kimi:edit"  # kind from the diff
    [diff] = [block for block in asked["display"] if block["type"] == "diff"]
    assert diff["path"].endswith("from-kimi.txt") and diff["new_text"].rstrip() == "written by kimi"
    assert (sandbox.work / "from-kimi.txt").read_text() == "written by kimi\n"
    text = "".join(e["payload"]["text"] for e in inner(messages) if e["type"] == "ContentPart")
    assert text == "kimi wrote from-kimi.txt"
    assert results(messages)["a1"]["is_error"] is False
