"""The pure parts of the built-in tools: diff hunks, secret detection, edits, output caps,
parameter schemas and session rules."""

from __future__ import annotations

from soulwire.engine.approvals import ApprovalBroker, session_rule
from soulwire.engine.bus import EventBus
from soulwire.tools.builtin import default_tools
from soulwire.tools.builtin.diff import diff_blocks
from soulwire.tools.builtin.edit import Edit, apply_edits
from soulwire.tools.builtin.output import cap_lines, clip_head, clip_middle
from soulwire.tools.builtin.paths import is_sensitive
from soulwire.tools.names import BUILTIN_TOOL_NAMES


def test_diff_blocks_are_hunks_with_three_lines_of_context():
    old = "".join(f"{i}\n" for i in range(1, 31))
    new = old.replace("2\n", "two\n", 1).replace("25\n", "twenty-five\n")
    blocks = diff_blocks("/p", old, new)
    assert [(b.old_start, b.new_start) for b in blocks] == [(1, 1), (22, 22)]
    assert blocks[0].old_text == "1\n2\n3\n4\n5" and blocks[0].new_text == "1\ntwo\n3\n4\n5"
    assert blocks[1].old_text.splitlines() == ["22", "23", "24", "25", "26", "27", "28"]
    assert diff_blocks("/p", old, old) == []


def test_diff_of_huge_sides_is_a_summary():
    old = "x\n" * 10_001
    [same_length] = diff_blocks("/p", old, "y\n" * 10_001)
    assert same_length.is_summary and same_length.new_text == "(10001 lines, modified)"
    [grown] = diff_blocks("/p", old, old + "z\n")
    assert grown.old_text == "(10001 lines)" and grown.new_text == "(10002 lines)"


def test_sensitive_paths():
    secret = [".env", "app/.env.local", "/home/u/.ssh/id_rsa", "keys/id_ed25519", "/home/u/.aws/credentials"]
    secret += ["tls/server.key", "cert.PEM", "/home/u/.kube/config", ".git-credentials", ".netrc"]
    for path in secret:
        assert is_sensitive(path), path
    harmless = [".env.example", "env.py", "/home/u/.ssh/id_rsa.pub", "/home/u/.ssh/known_hosts", "config"]
    harmless += ["credentials.md", "keyboard.py", "src/key.py"]
    for path in harmless:
        assert not is_sensitive(path), path


def test_edits_apply_in_order_or_not_at_all():
    text = "a = 1\nb = 1\n"
    assert apply_edits(text, [Edit(old="a = 1", new="a = 2")]) == ("a = 2\nb = 1\n", 1)
    assert apply_edits(text, [Edit(old="= 1", new="= 3", replace_all=True)]) == ("a = 3\nb = 3\n", 2)
    ambiguous = apply_edits(text, [Edit(old="= 1", new="= 3")])
    assert isinstance(ambiguous, str) and "occurs 2 times" in ambiguous
    missing = apply_edits(text, [Edit(old="a = 1", new="c = 1"), Edit(old="a = 1", new="x")])
    assert isinstance(missing, str) and missing.startswith("Edit 2:") and "earlier edits" in missing
    assert apply_edits("x\r\ny\r\n", [Edit(old="x\ny", new="1\n2")]) == ("1\r\n2\r\n", 1)


def test_output_caps():
    text, cut = cap_lines("short\n" + "y" * 2500 + "\nend")
    assert cut == 1 and text.startswith("short\n" + "y" * 2000) and text.endswith("\nend")
    clipped, dropped = clip_middle("".join(f"{i}\n" for i in range(100_000)), 1000)
    assert dropped > 0 and clipped.startswith("0\n1\n") and clipped.endswith("99999\n")
    assert len(clipped) < 1100
    head, was_clipped = clip_head("line\n" * 1000, 100)
    assert was_clipped and head.endswith("\n") and len(head) <= 100
    assert clip_middle("small", 10) == ("small", 0)


def test_parameter_schemas_are_clean_and_names_are_reserved():
    tools = default_tools(capabilities=frozenset({"image_in", "video_in"}))
    assert "ReadMediaFile" in [t.name for t in tools]
    assert "ReadMediaFile" not in [t.name for t in default_tools()]
    names = [t.name for t in tools]
    assert len(set(names)) == len(names) and set(names) <= set(BUILTIN_TOOL_NAMES)
    for tool in tools:
        schema = tool.parameters
        assert schema["type"] == "object" and "title" not in schema
        assert all("title" not in prop for prop in schema["properties"].values()), tool.name
        assert tool.description and len(tool.description) < 1000
    todo = next(t for t in tools if t.name == "SetTodoList").parameters
    assert "title" in todo["$defs"]["Todo"]["properties"]  # a property called `title` survives
    grep = next(t for t in tools if t.name == "Grep").parameters
    assert {"-A", "-B", "-C", "-n", "-i"} <= set(grep["properties"])


def test_session_rules_are_no_broader_than_what_was_seen():
    broker = ApprovalBroker(EventBus(), channel=None)
    broker.rules.add(session_rule("run command", "make test", "exact"))
    assert broker.allows("run command", "make test")
    assert not broker.allows("run command", "make deploy")
    assert not broker.allows("edit file", "make test")
    broker.rules.add(session_rule("edit file", "/repo/a.py", "action"))  # reference-style rule
    assert broker.allows("edit file", "/repo/b.py")
    assert not broker.allows("edit file outside of working directory", "/etc/hosts")
    assert broker.bypassed  # nobody to ask (print mode): everything runs


def test_pattern_rules_match_a_tool_and_a_glob_over_its_scope_key():
    broker = ApprovalBroker(EventBus(), channel=None)
    broker.rules.update({"Shell(git status*)", "WriteFile(/repo/src/*)", "StrReplaceFile(/repo/app.py)"})
    assert broker.allows("run command", "git status --short", sender="Shell")
    assert not broker.allows("run command", "git push", sender="Shell")
    assert not broker.allows("run command", "git status --short", sender="WriteFile")
    assert not broker.allows("run command", "git status --short")  # no sender: exact rules only
    for chained in ("git status; rm -rf ~", "git status && make", "git status | sh", "git status $(x)"):
        assert not broker.allows("run command", chained, sender="Shell"), chained
    assert broker.allows("edit file", "/repo/src/deep/x.py", sender="WriteFile")  # `*` spans `/`
    assert not broker.allows("edit file", "/repo/other.py", sender="WriteFile")
    assert broker.allows("edit file", "/repo/app.py", sender="StrReplaceFile")  # no wildcard: exact
    assert not broker.allows("edit file", "/repo/app.pyc", sender="StrReplaceFile")
    # a pattern never approves leaving the sandbox
    assert not broker.allows("run command", "git status", sender="Shell", crossing="network")


def test_rules_are_checked_before_they_are_kept():
    from soulwire.engine.rules import RuleError, check_rule, parse_pattern

    assert parse_pattern("run command: make test") is None  # an exact rule
    assert parse_pattern("Shell(git status*)") is not None
    for bad in ("Shell(git status", "Shell()", " run command", ""):
        try:
            check_rule(bad)
        except RuleError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_a_sub_agents_action_request_reaches_the_client_whole_and_tagged():
    """One ActionRequest travels from the tool through the sub-agent's tagging to the broker:
    every field the tool set arrives in the ApprovalRequest, with the sub-agent named."""
    import anyio

    from soulwire.engine.subagents import _TaggedApprover
    from soulwire.tools.base import ActionRequest
    from soulwire.tools.builtin.diff import diff_blocks
    from soulwire.wire.messages import ApprovalRequest

    sent: list[ApprovalRequest] = []

    class Client:
        async def request(self, message: ApprovalRequest) -> dict[str, str]:
            sent.append(message)
            return {"request_id": message.id, "response": "approve_for_session"}

    broker = ApprovalBroker(EventBus(), channel=Client())
    approver = _TaggedApprover(broker, "a1", "coder")
    asked = ActionRequest(
        tool_call_id="call-1",
        sender="WriteFile",
        action="edit file",
        description="Write file `a.py`",
        display=diff_blocks("/repo/a.py", "", "x\n"),
        scope_key="/repo/a.py",
    )
    outcome = anyio.run(approver.request, asked)
    assert outcome.approved
    [request] = sent
    assert (request.tool_call_id, request.sender, request.action) == ("call-1", "WriteFile", "edit file")
    assert request.description == "Write file `a.py`" and request.display == list(asked.display)
    assert (request.agent_id, request.subagent_type) == ("a1", "coder")
    assert broker.rules == {"edit file: /repo/a.py"}  # the scope key made it to the rule
    assert anyio.run(broker.request, asked).approved and len(sent) == 1  # covered now: not asked
