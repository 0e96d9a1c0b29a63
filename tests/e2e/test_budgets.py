"""Budgets in the real engine (`soulwire --wire`, the scripted model reporting usage): each limit
at each scope, the stop before a call that would cross the token limit, the warning and the
stop events, sub-agents drawing from the tree's budget, raising a limit to continue, the totals
kept across a resume, and what a client that knows no budgets sees."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.budget_cases import (
    KINDS,
    LIMIT,
    PRICES,
    RAISED_VALUE,
    SCOPES,
    STEP_TOKENS,
    TREE_TOKENS,
    agent_call,
    calls_made,
    flags,
    step,
    subagent_tree_scripts,
    usage_line,
)
from tests.budget_cases import scripts as case_scripts
from tests.tool_calls import call, results, run_turn
from tests.wire_client import WireProcess, event_types, payloads

from soulwire.sessions.paths import session_dir

SESSION = ("--session", "s-1")
BUDGET_CLIENT = {"protocol_version": "1.10", "capabilities": {"supports_budget": True}}
LONG_ANSWER = ("The work dir holds hello.txt and nothing else; " * 6).strip()  # no follow-up question


def shell(call_id: str, command: str = "echo hi") -> str:
    return call(call_id, "Shell", {"command": command})


def start(engine: Any, *scripts: str, args: tuple[str, ...] = (), **hello: Any) -> WireProcess:
    wire = engine(*scripts, args=(*SESSION, "--yolo", *args))
    response = wire.initialize(**{**BUDGET_CLIENT, **hello})
    assert "result" in response, response
    return wire


def set_budget(wire: WireProcess, **budget: Any) -> dict[str, Any]:
    _, response = wire.until_response(wire.request("set_budget", budget))
    return response


def model_calls(messages: list[dict[str, Any]]) -> int:
    return event_types(messages).count("StatusUpdate")


def test_a_call_that_would_cross_the_token_limit_is_not_made_and_raising_it_continues(engine, sandbox):
    wire = start(
        engine,
        step(shell("c1", "echo one"), 600, 100),
        step(shell("c2", "echo two"), 800, 100),
        step("text: done", 900, 10),
        args=("--budget-tokens", "1300"),
    )
    messages, result = run_turn(wire)
    # 700 spent; the next call's input is at least the 700 the provider counted: 1400 > 1300.
    assert result == {"status": "budget_exceeded"}
    assert model_calls(messages) == 1
    assert results(messages)["c1"]["is_error"] is False
    exceeded = payloads(messages, "BudgetExceeded")
    assert exceeded == [{"scope": "tree", "limit": "tokens", "spent": 700.0, "max": 1300.0}]
    types = event_types(messages)
    assert types.index("BudgetExceeded") < types.index("TurnEnd") == len(types) - 1
    update = payloads(messages, "BudgetUpdate")[-1]
    assert update["spent"]["tree"]["tokens"] == 700 and update["remaining"]["tree"]["tokens"] == 600

    report = set_budget(wire, tree={"tokens": 10_000})["result"]
    assert report["status"] == "ok" and report["budget"]["tree"]["tokens"] == 10_000
    assert report["spent"]["tree"]["tokens"] == 700 and report["remaining"]["tree"]["tokens"] == 9_300
    messages, result = run_turn(wire, "continue")
    assert result == {"status": "finished"}
    assert results(messages)["c2"]["is_error"] is False  # the work goes on where it stopped
    assert payloads(messages, "ContentPart")[-1]["text"] == "done"
    assert [w["limit"] for w in payloads(messages, "BudgetWarning")] == []  # 2,510 of 10,000


def test_the_call_that_crosses_the_limit_is_the_last_and_its_tool_calls_do_not_run(engine, sandbox):
    wire = start(
        engine,
        step(shell("c1", "echo one"), 600, 100),
        step(shell("c2", "echo two"), 800, 100),
        args=("--budget-tokens", "1500"),
    )
    messages, result = run_turn(wire)
    assert result == {"status": "budget_exceeded"}
    assert model_calls(messages) == 2
    refused = results(messages)["c2"]
    assert refused["is_error"] is True and refused["message"].startswith("Not run: the tree budget's tokens")
    assert payloads(messages, "BudgetExceeded") == [
        {"scope": "tree", "limit": "tokens", "spent": 1600.0, "max": 1500.0}
    ]


def test_a_warning_at_the_configured_fraction_once(engine, sandbox):
    sandbox.config_extra = {"budgets": {"warn_at": 0.5, "turn": {"tokens": 10_000}}}
    wire = start(
        engine,
        step(shell("c1"), 3000),
        step(shell("c2"), 3000),
        step("text: done", 1000),
    )
    messages, result = run_turn(wire)
    assert result == {"status": "finished"}
    assert payloads(messages, "BudgetWarning") == [
        {"scope": "turn", "limit": "tokens", "spent": 6000.0, "max": 10_000.0, "fraction": 0.6}
    ]


def test_a_client_without_budget_support_sees_a_cancelled_turn_and_no_budget_events(engine, sandbox):
    wire = engine(
        step(shell("c1"), 600), step(shell("c2"), 800), args=(*SESSION, "--yolo", "--budget-tokens", "1000")
    )
    wire.initialize(protocol_version="1.10")
    messages, result = run_turn(wire)
    assert result == {"status": "cancelled"}
    assert not {"BudgetUpdate", "BudgetWarning", "BudgetExceeded"} & set(event_types(messages))
    assert event_types(messages)[-1] == "TurnEnd"


def test_tool_calls_per_turn_run_as_far_as_the_limit_and_the_next_turn_starts_afresh(engine, sandbox):
    wire = start(
        engine,
        step(f"{shell('c1', 'echo one')}\n{shell('c2', 'echo two')}", 10),
        step("text: after", 10),
        step(shell("c3", "echo three"), 10),
        step("text: done", 10),
        args=("--budget-tool-calls", "1", "--budget-scope", "turn"),
    )
    messages, result = run_turn(wire)
    assert result == {"status": "budget_exceeded"}
    ran = results(messages)
    assert ran["c1"]["is_error"] is False and "one" in ran["c1"]["output"]
    assert ran["c2"]["is_error"] is True and ran["c2"]["message"].startswith("Not run")
    assert payloads(messages, "BudgetExceeded") == [
        {"scope": "turn", "limit": "tool_calls", "spent": 1.0, "max": 1.0}
    ]
    messages, result = run_turn(wire, "again")
    assert result == {"status": "finished"}
    messages, result = run_turn(wire, "once more")
    assert result == {"status": "finished"}
    assert results(messages)["c3"]["is_error"] is False


def test_money_per_session_is_kept_across_a_resume(engine, sandbox):
    sandbox.config_extra = {"prices": PRICES, "budgets": {"session": {"usd": 1.0}}}
    scripts = (step("text: first", 4000, 1000), step("text: second", 5000, 1000), "text: never")
    wire = start(engine, *scripts)
    assert run_turn(wire)[1] == {"status": "finished"}  # $0.50
    messages, result = run_turn(wire, "more")  # $0.60 more: $1.10, crossed by this last call
    assert result == {"status": "finished"}  # it asked for nothing more: the turn was done
    assert payloads(messages, "BudgetExceeded") == [
        {"scope": "session", "limit": "usd", "spent": 1.1, "max": 1.0}
    ]
    assert wire.close() == 0
    state = json.loads((session_dir(sandbox.share, sandbox.work, "s-1") / "state.json").read_text())
    assert state["budget_spent"]["session"]["usd"] == 1.1
    assert state["budget_spent"]["session"]["tokens"] == 11_000

    wire = start(engine, *scripts)  # the same session again, in a new process
    assert wire_result_budget(wire)["spent"]["session"]["usd"] == 1.1
    messages, result = run_turn(wire, "and more")
    assert result == {"status": "budget_exceeded"}
    assert model_calls(messages) == 0  # stopped before any call: the session's money is spent
    assert payloads(messages, "BudgetExceeded")[0]["scope"] == "session"


def wire_result_budget(wire: WireProcess) -> dict[str, Any]:
    return set_budget(wire)["result"]


def test_time_per_turn_stops_at_the_next_safe_point_after_the_tool_finishes(engine, sandbox):
    wire = start(
        engine, step(shell("c1", "sleep 1.5; echo slept"), 10), "text: never", args=("--budget-time", "1")
    )
    messages, result = run_turn(wire)
    assert result == {"status": "budget_exceeded"}
    assert "slept" in results(messages)["c1"]["output"]  # let finish (the default)
    assert payloads(messages, "BudgetExceeded")[0]["limit"] == "time_s"
    assert model_calls(messages) == 1


def test_time_with_running_tools_cancel_cancels_the_running_call(engine, sandbox):
    sandbox.config_extra = {"budgets": {"running_tools": "cancel", "turn": {"time_s": 1}}}
    wire = start(engine, step(shell("c1", "sleep 60; echo slept"), 10), "text: never")
    messages, result = run_turn(wire)
    assert result == {"status": "budget_exceeded"}
    cancelled = results(messages)["c1"]
    assert cancelled["is_error"] is True and cancelled["message"].startswith("Cancelled: a budget limit")
    assert model_calls(messages) == 1


def test_subagents_draw_from_the_tree_and_together_are_stopped(engine, sandbox):
    """Two sub-agents in one step, each spending 1,000 tokens and asking for a command: the
    first to report fits in the tree's 2,000, the second crosses it; both stop, so does the
    parent."""
    wire = start(engine, *subagent_tree_scripts(), args=("--budget-tokens", str(TREE_TOKENS)))
    messages, result = run_turn(wire)
    assert result == {"status": "budget_exceeded"}
    outputs = results(messages)
    assert all(outputs[a]["is_error"] for a in ("a1", "a2"))
    assert all("Sub-agent stopped: budget exceeded" in outputs[a]["message"] for a in ("a1", "a2"))
    assert model_calls(messages) == 1  # the parent's; the children's are wrapped
    inner = [p["event"] for p in payloads(messages, "SubagentEvent")]
    assert sum(1 for e in inner if e["type"] == "StatusUpdate") == 2
    update = payloads(messages, "BudgetUpdate")[-1]
    assert update["spent"]["tree"]["tokens"] == 2100
    assert update["spent"]["session"]["tokens"] == 100  # the session's own calls only


def test_print_mode_stops_a_subagent_tree_at_the_trees_limit(sandbox):
    sandbox.scripts = subagent_tree_scripts()
    sandbox.write()
    done, document = print_run(sandbox, "--budget-tokens", str(TREE_TOKENS), "-p", "go")
    assert done.returncode == 3, done.stderr
    spent = document["budget"]["spent"]
    assert (spent["tree"]["tokens"], spent["session"]["tokens"]) == (2100, 100)
    assert document["budget"]["remaining"]["tree"]["tokens"] == 0


def test_session_scope_does_not_count_subagents(engine, sandbox):
    wire = start(
        engine,
        step(agent_call("a1", "look"), 100),
        step(f"text: {LONG_ANSWER}", 5000),
        step("text: done", 100),
        args=("--budget-tokens", "1000", "--budget-scope", "session"),
    )
    messages, result = run_turn(wire)
    assert result == {"status": "finished"}
    assert payloads(messages, "BudgetUpdate")[-1]["spent"]["session"]["tokens"] == 200


def test_a_money_limit_without_a_price_is_refused(engine, sandbox):
    wire = engine(args=(*SESSION, "--budget-usd", "1"))
    assert wire.close() == 2
    lines = "".join(wire.stderr_lines).strip().splitlines()
    assert len(lines) == 1 and "a money limit needs the price of model 'scripted_echo'" in lines[0]

    wire = engine(args=SESSION)
    _, response = wire.until_response(
        wire.request("initialize", {**BUDGET_CLIENT, "budget": {"tree": {"usd": 1}}})
    )
    assert response["error"]["code"] == -32602
    assert "price of model 'scripted_echo'" in response["error"]["message"]
    response = set_budget(wire, tree={"usd": 1})
    assert response["error"]["code"] == -32602
    response = set_budget(wire, tree={"ust": 1})  # a mistyped limit is not "no limit"
    assert response["error"]["code"] == -32602


def test_initialize_sets_the_budget_and_answers_with_it(engine, sandbox):
    sandbox.config_extra = {"prices": PRICES}
    wire = engine(step("text: done", 10), args=SESSION)
    budget = {"turn": {"usd": 0.5, "tool_calls": 3}}
    _, response = wire.until_response(wire.request("initialize", {**BUDGET_CLIENT, "budget": budget}))
    result = response["result"]
    assert result["capabilities"]["supports_budget"] is True
    assert result["budget"]["budget"]["turn"] == {"usd": 0.5, "tokens": None, "time_s": None, "tool_calls": 3}
    assert result["budget"]["remaining"]["turn"]["tool_calls"] == 3


def test_print_mode_exits_3_with_the_budget_in_the_json_document(sandbox, tmp_path: Path):
    import subprocess

    sandbox.scripts = [step(shell("c1"), 900), step(shell("c2"), 900)]
    sandbox.write()
    argv = [a for a in sandbox.argv() if a != "--wire"]
    done = subprocess.run(
        [*argv, "--print", "--output-format", "json", "--budget-tokens", "1000", "-p", "go"],
        env=sandbox.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    document = json.loads(done.stdout)
    assert document["exit_reason"] == "budget_exceeded" and document["exit_code"] == 3
    assert document["budget"]["spent"]["tree"]["tokens"] == 900
    assert document["budget"]["remaining"]["tree"]["tokens"] == 100
    session = document["session_id"]
    assert done.stderr.strip() == (
        "soulwire: Stopped: the tree tokens limit (1,000) is reached. "
        f"Raise it (--budget-*) and continue with --session {session}."
    )


def test_the_budget_command_shows_and_raises_the_limit(engine, sandbox):
    wire = start(
        engine,
        step(shell("c1"), 600),
        step(shell("c2"), 800),
        step("text: done", 10),
        args=("--budget-tokens", "1000"),
    )
    assert run_turn(wire)[1] == {"status": "budget_exceeded"}
    messages, result = run_turn(wire, "/budget")
    assert result == {"status": "finished"}
    text = payloads(messages, "ContentPart")[0]["text"]
    assert "tree tokens: 600 of 1,000 (400 left)" in text
    messages, _ = run_turn(wire, "/budget tree tokens 5000")
    assert "tree tokens: 600 of 5,000 (4,400 left)" in payloads(messages, "ContentPart")[0]["text"]
    messages, _ = run_turn(wire, "/budget tree tokens lots")
    assert payloads(messages, "ContentPart")[0]["text"].startswith("Not a tokens value: lots.")
    messages, result = run_turn(wire, "continue")
    assert result == {"status": "finished"}
    assert results(messages)["c2"]["is_error"] is False


def test_compaction_calls_are_charged(engine, sandbox):
    """The automatic compaction's summary call spends like any model call: its usage counts."""
    sandbox.config_extra = {"loop_control": {"compaction_trigger_ratio": 0.5, "reserved_context_size": 1000}}
    wire = start(
        engine,
        step("text: answer one", 60_000, 10),
        step("text: the summary", 3_000, 2_000),
        step("text: answer two", 500, 5),
        args=("--budget-tokens", "1000000"),
    )
    run_turn(wire, "q1")
    messages, result = run_turn(wire, "q2")
    assert result == {"status": "finished"}
    assert "CompactionEnd" in event_types(messages) and model_calls(messages) == 1
    # 60,010 + the summary's 5,000 + 505
    assert payloads(messages, "BudgetUpdate")[-1]["spent"]["tree"]["tokens"] == 65_515


def test_a_compaction_that_reaches_the_limit_is_the_last_call(engine, sandbox):
    """A compaction is due: the step's call would have the smaller input that follows it, so
    the check before the step does not stop on the whole context; the compaction's summary
    then reaches the limit, and the step's call that would follow it is not made."""
    sandbox.config_extra = {"loop_control": {"compaction_trigger_ratio": 0.5, "reserved_context_size": 1000}}
    wire = start(
        engine,
        step("text: answer one", 60_000, 10),
        step("text: the summary", 3_000, 4_000),
        "text: never",
        args=("--budget-tokens", "66000"),
    )
    run_turn(wire, "q1")
    messages, result = run_turn(wire, "q2")
    assert result == {"status": "budget_exceeded"}
    types = event_types(messages)
    assert "CompactionEnd" in types and model_calls(messages) == 0  # the summary only
    assert payloads(messages, "BudgetExceeded") == [
        {"scope": "tree", "limit": "tokens", "spent": 67_010.0, "max": 66_000.0}
    ]
    assert "never" not in [p.get("text") for p in payloads(messages, "ContentPart")]


def test_no_compaction_call_is_made_once_the_limit_is_reached(engine, sandbox):
    """`/compact` (and any summary) after the limit is reached: its call is not made, the
    context stays as it was, the turn ends `budget_exceeded`; raised, the same call is made."""
    wire = start(
        engine,
        step("text: answer one", 300, 100),
        step("text: answer two", 500, 200),
        step("text: the summary", 10, 10),
        args=("--budget-tokens", "1000"),
    )
    assert run_turn(wire, "q1")[1] == {"status": "finished"}
    assert run_turn(wire, "q2")[1] == {"status": "finished"}  # 1,100: crossed by its one call
    messages, result = run_turn(wire, "/compact")
    assert result == {"status": "budget_exceeded"}
    assert payloads(messages, "BudgetExceeded")[0]["spent"] == 1100.0
    texts = [p.get("text") for p in payloads(messages, "ContentPart")]
    assert "The context has been compacted." not in texts
    set_budget(wire, tree={"tokens": 10_000})
    messages, result = run_turn(wire, "/compact")
    assert result == {"status": "finished"}
    assert "The context has been compacted." in [p.get("text") for p in payloads(messages, "ContentPart")]
    assert payloads(messages, "BudgetUpdate")[-1]["spent"]["tree"]["tokens"] == 1_120


OVERFLOW = "error: 400 context length exceeded"
"""A provider's context-overflow error (the engine compacts and tries the step's call once more)."""


def test_an_overflow_the_provider_counted_to_the_limit_makes_no_compaction_call(engine, sandbox):
    """A call fails with a context overflow the provider counted (1,200 tokens, reported with the
    error): charged, it reaches the limit, so the compaction it would trigger makes no call (the
    summary's script is still there: raised, the next prompt's call plays it)."""
    wire = start(
        engine,
        step("text: answer one", 100, 10),
        f"{OVERFLOW}\n{usage_line(1200)}",
        "text: after the raise",
        args=("--budget-tokens", "1000"),
    )
    assert run_turn(wire, "q1")[1] == {"status": "finished"}
    messages, result = run_turn(wire, "q2")
    assert result == {"status": "budget_exceeded"}
    assert payloads(messages, "BudgetExceeded") == [
        {"scope": "tree", "limit": "tokens", "spent": 1310.0, "max": 1000.0}
    ]
    assert "StepRetry" not in event_types(messages) and model_calls(messages) == 0
    set_budget(wire, tree={"tokens": 10_000})
    messages, result = run_turn(wire, "continue")
    assert result == {"status": "finished"}
    assert "after the raise" in [p.get("text") for p in payloads(messages, "ContentPart")]


def test_the_steps_call_after_an_overflow_compaction_that_reached_the_limit_is_not_made(engine, sandbox):
    """A context overflow (200 tokens counted) is compacted; the summary's 800 tokens reach the
    limit: the step's call that would follow the compaction is not made."""
    wire = start(
        engine,
        step("text: answer one", 100, 10),
        f"{OVERFLOW}\n{usage_line(200)}",
        step("text: the summary", 300, 500),
        "text: never",
        args=("--budget-tokens", "1000"),
    )
    assert run_turn(wire, "q1")[1] == {"status": "finished"}
    messages, result = run_turn(wire, "q2")
    assert result == {"status": "budget_exceeded"}
    assert "CompactionEnd" in event_types(messages) and model_calls(messages) == 0  # the summary only
    assert payloads(messages, "BudgetExceeded") == [
        {"scope": "tree", "limit": "tokens", "spent": 1110.0, "max": 1000.0}
    ]
    assert "never" not in [p.get("text") for p in payloads(messages, "ContentPart")]


def test_a_retry_whose_wait_outlasts_the_time_limit_is_not_made(tmp_path: Path):
    """A real provider stream (a fake server on 127.0.0.1): after a first prompt (the provider's
    client loaded), a 1.5 s turn limit; the next call is refused with 429 and `Retry-After: 3`,
    the retry is announced (the limit is not reached yet), and after the wait the limit is: the
    retry is not made."""
    from tests.e2e.test_providers import provider_config
    from tests.fake_llm_server import FakeLLMServer
    from tests.provider_streams import Answer, error_reply, stream_reply
    from tests.wire_client import engine_env

    (tmp_path / "work").mkdir()
    with FakeLLMServer() as server:
        config = provider_config("kimi", server.url)
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(path)]
        wire = WireProcess(
            [*argv, "--work-dir", str(tmp_path / "work")], engine_env(tmp_path), tmp_path / "work"
        )
        try:
            wire.initialize(**BUDGET_CLIENT)
            server.queue(stream_reply("kimi", Answer("m1", text=["hello"])))
            assert wire.prompt("hi", timeout=60)[1]["result"] == {"status": "finished"}
            set_budget(wire, turn={"time_s": 1.5})
            server.queue(
                error_reply("kimi", 429, "rate limited", {"retry-after": "3"}),
                stream_reply("kimi", Answer("m2", text=["never"])),
            )
            messages, response = wire.prompt("go", timeout=60)
        finally:
            wire.close()
        assert response["result"] == {"status": "budget_exceeded"}, response
        assert len(server.requests) == 2  # the first prompt's call and the refused one
    [retry] = payloads(messages, "StepRetry")
    assert retry["wait_s"] >= 3
    [exceeded] = payloads(messages, "BudgetExceeded")
    assert (exceeded["scope"], exceeded["limit"], exceeded["max"]) == ("turn", "time_s", 1.5)
    types = event_types(messages)
    assert types.index("StepRetry") < types.index("BudgetExceeded")


def test_init_makes_no_call_once_the_limit_is_reached(engine, sandbox):
    """`/init` runs an agent of its own: at a reached limit it makes no call, writes nothing,
    and its turn ends `budget_exceeded`."""
    wire = start(engine, step("text: one", 1200), "text: never", args=("--budget-tokens", "1000"))
    assert run_turn(wire, "q1")[1] == {"status": "finished"}  # crossed by its one call
    messages, result = run_turn(wire, "/init")
    assert result == {"status": "budget_exceeded"}
    assert model_calls(messages) == 0 and not (sandbox.work / "AGENTS.md").exists()


def test_a_failed_call_the_provider_counted_is_charged_and_no_retry_crosses_the_limit(engine, sandbox):
    """A reply with thinking only (empty: retried) that reports 1,200 tokens: it is charged, so
    the limit is reached and the retry is not made (nor announced)."""
    wire = start(engine, "think: hmm\n" + usage_line(1200), "text: never", args=("--budget-tokens", "1000"))
    messages, result = run_turn(wire)
    assert result == {"status": "budget_exceeded"}
    assert "StepRetry" not in event_types(messages)
    assert payloads(messages, "BudgetExceeded") == [
        {"scope": "tree", "limit": "tokens", "spent": 1200.0, "max": 1000.0}
    ]
    assert "never" not in [p.get("text") for p in payloads(messages, "ContentPart")]


def test_an_acp_sub_agents_reported_usage_counts_against_the_tree(engine, sandbox):
    """Another ACP agent as a sub-agent (the real `soulwire acp`, its own scripted model): the
    usage its prompt answer reports is the tree's spend, and the parent stops at the limit."""
    from tests.acp.test_delegate import TURN_S, child_agent, delegate_call

    child = child_agent(sandbox, step("text: child done", 4_000, 1_000))
    sandbox.config_extra = {"acp_agents": {"helper": {"command": child, "description": "another agent"}}}
    wire = start(
        engine,
        step(delegate_call("a1", "helper", "help"), 100, 10),
        step("text: never", 100, 10),
        args=("--budget-tokens", "3000"),
    )
    messages, response = wire.until_response(wire.request("prompt", {"user_input": "go"}), timeout=TURN_S)
    assert response["result"] == {"status": "budget_exceeded"}
    assert results(messages)["a1"]["is_error"] is False
    assert model_calls(messages) == 1  # the parent's second call is not made
    assert payloads(messages, "BudgetExceeded") == [
        {"scope": "tree", "limit": "tokens", "spent": 5_110.0, "max": 3_000.0}
    ]


USAGE_AGENT = str(Path(__file__).resolve().parents[1] / "acp" / "agents" / "usage_agent.py")
ACP_SIBLING_CASES = {
    # limit: (the budget, what the first agent reports, the limit's spent when it is reached)
    "tree-tokens": ({"tree": {"tokens": 3000}}, ("--tokens", "5000"), 5_110.0),
    "turn-usd": ({"turn": {"usd": 0.5}}, ("--cost", "0.6"), 0.611),
    # time: lowered while the first agent works (as if the clock ran past it), then reached when
    # its answer is charged (an agent started under a load that outlasts the limit is refused)
    "tree-time_s": ({"tree": {"time_s": 3600}}, ("--tokens", "10", "--hold", "release"), None),
}


def wait_for_file(path: Path, within: float) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


@pytest.mark.parametrize("case", list(ACP_SIBLING_CASES))
def test_an_acp_sub_agent_is_not_prompted_once_a_sibling_reached_the_limit(engine, sandbox, case):
    """Two ACP sub-agents in one step: the first's reported spend (tokens, cost) or the wall time
    while it works reaches the limit; the second, started beside it but answering `session/new`
    only after the test saw the limit reached, is not prompted: its call gets the budget's "Not
    run" result, the limit is announced once, and the parent's next call is not made."""
    from tests.acp.test_delegate import TURN_S, delegate_call

    budget, reported, spent = ACP_SIBLING_CASES[case]
    scope, kind = case.split("-")
    signals = sandbox.root / "signals"
    signals.mkdir()

    def agent(name: str, *extra: str) -> dict[str, Any]:
        return {"command": [sys.executable, USAGE_AGENT, name, str(signals), *extra]}

    sandbox.config_extra = {
        "acp_agents": {
            "first": agent("first", *reported),
            "second": agent("second", "--tokens", "700", "--wait", "go"),
        },
        "prices": PRICES,
    }
    both = f"{delegate_call('a1', 'first', 'half')}\n{delegate_call('a2', 'second', 'other half')}"
    wire = start(engine, step(both, 100, 10), step("text: never", 100, 10), budget=budget)
    request = wire.request("prompt", {"user_input": "go"})
    if kind == "time_s":
        wait_for_file(signals / "first.prompted", TURN_S)
        wire.request("set_budget", {"tree": {"time_s": 0.01}})
        (signals / "release").touch()
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + TURN_S
    while "BudgetExceeded" not in event_types(seen):
        message = wire.recv(max(0.01, deadline - time.monotonic()))
        assert message is not None and message.get("id") != request, (message, seen)
        seen.append(message)
    (signals / "go").touch()  # the second agent answers session/new now: the limit is reached
    messages, response = wire.until_response(request, timeout=TURN_S)
    messages = seen + messages
    assert response["result"] == {"status": "budget_exceeded"}
    assert (signals / "first.prompted").exists() and not (signals / "second.prompted").exists()
    first, second = results(messages)["a1"], results(messages)["a2"]
    assert first["is_error"] is False and "first did its part" in first["output"]
    assert second["is_error"] is True and second["message"].startswith(
        f"Not run: the {scope} budget's {kind}"
    )
    assert model_calls(messages) == 1  # the parent's second call is not made
    [exceeded] = payloads(messages, "BudgetExceeded")
    assert (exceeded["scope"], exceeded["limit"]) == (scope, kind)
    if spent is not None:  # what the first agent reported, over the parent's own call: nothing of the second
        assert exceeded["spent"] == pytest.approx(spent)
    else:
        assert exceeded["spent"] >= exceeded["max"] == 0.01
    tree = payloads(messages, "BudgetUpdate")[-1]["spent"]["tree"]
    assert tree["tokens"] == 110 + (5_000 if case == "tree-tokens" else 10 if kind == "time_s" else 0)


def test_a_background_agents_wall_time_counts_in_the_tree_after_the_turn(tmp_path: Path):
    """A background sub-agent still at work after its parent's turn ended: the tree's clock runs
    while it works, the session's does not (the tree's time exceeds the session's by the gap
    between the turns, while the sub-agent waited for the test's signal)."""
    from tests.e2e.test_background_agents import agent_call, fake_llm, parent_steps, start_engine, task_id_in

    work = tmp_path / "work"
    wait = "touch waiting; for i in $(seq 1200); do [ -f go ] && break; sleep 0.05; done; echo went"

    def answer(body: dict[str, Any], sub: bool) -> dict[str, Any]:
        if sub:
            done = any(m["role"] == "tool" for m in body["messages"])
            return {"text": "sub done"} if done else {"call": ("s1", "Shell", {"command": wait})}
        said = json.dumps(body["messages"])
        if parent_steps(body) == 0:
            return agent_call()
        if '"second"' not in said:
            return {"text": "started it"}
        if '"id": "o1"' not in said:
            return {"call": ("o1", "TaskOutput", {"task_id": task_id_in(body), "block": True, "timeout": 60})}
        return {"text": "parent done"}

    with fake_llm(answer) as (url, _):
        wire = start_engine(tmp_path, url, budgets={"tree": {"time_s": 3600}})
        try:
            assert run_turn(wire)[1] == {"status": "finished"}
            deadline = time.monotonic() + 60
            while not (work / "waiting").exists():  # the sub-agent is at work, the turn is over
                assert time.monotonic() < deadline, "the background sub-agent never ran its command"
                time.sleep(0.05)
            reply = wire.request("prompt", {"user_input": "second"})
            (work / "go").touch()
            _, response = wire.until_response(reply, timeout=90)
            assert response["result"] == {"status": "finished"}, response
        finally:
            wire.close()
    state = json.loads(next((tmp_path / ".soulwire" / "sessions").rglob("s-1/state.json")).read_text())
    spent = state["budget_spent"]
    assert spent["tree"]["time_s"] > spent["session"]["time_s"] > 0


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("kind", KINDS)
def test_each_limit_at_each_scope_stops_the_turn(engine, sandbox, kind: str, scope: str):
    """The limits-by-scopes matrix over Wire (tests/budget_cases.py): each limit, set at each
    scope by the flags, stops the session's turn with `budget_exceeded` and a BudgetExceeded
    naming that limit and scope; `set_budget` raises it and the next prompt goes on."""
    sandbox.config_extra = {"prices": PRICES}
    wire = start(engine, *case_scripts(kind), args=flags(kind, scope))
    messages, result = run_turn(wire)
    assert result == {"status": "budget_exceeded"}
    assert results(messages)["c1"]["is_error"] is False
    exceeded = payloads(messages, "BudgetExceeded")[0]
    assert (exceeded["scope"], exceeded["limit"]) == (scope, kind)
    assert model_calls(messages) == calls_made(kind)

    report = set_budget(wire, **{scope: {kind: RAISED_VALUE[kind]}})["result"]
    assert report["budget"][scope][kind] == RAISED_VALUE[kind]
    messages, result = run_turn(wire, "continue")
    assert result == {"status": "finished"}
    assert payloads(messages, "ContentPart")[-1]["text"] == "continued"


def print_run(sandbox: Any, *args: str) -> tuple[Any, dict[str, Any]]:
    """`soulwire --print --output-format json ARGS`: the process and its JSON document."""
    import subprocess

    argv = [a for a in sandbox.argv() if a != "--wire"]
    done = subprocess.run(
        [*argv, "--print", "--output-format", "json", *args],
        env=sandbox.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, json.loads(done.stdout)


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("kind", KINDS)
def test_print_mode_exits_3_for_each_limit_and_a_raised_one_continues(sandbox, kind: str, scope: str):
    """`--print` with each limit at each scope (tests/budget_cases.py): exit 3, the one line
    that says how to continue, what the scope spent and has left in the JSON document; then
    `--session` with the limit raised goes on, the session's and the tree's totals kept."""
    sandbox.config_extra = {"prices": PRICES}
    sandbox.scripts = case_scripts(kind)
    sandbox.write()
    done, document = print_run(sandbox, *flags(kind, scope), "-p", "go")
    assert done.returncode == 3, done.stderr
    assert document["exit_reason"] == "budget_exceeded"
    assert done.stderr.startswith(f"soulwire: Stopped: the {scope} {kind} limit (")
    spent, left = document["budget"]["spent"], document["budget"]["remaining"][scope][kind]
    assert left == pytest.approx(max(0.0, float(LIMIT[kind]) - spent[scope][kind]), abs=1e-6)
    tokens = STEP_TOKENS * calls_made(kind)
    assert spent["tree"]["tokens"] == spent["session"]["tokens"] == tokens

    sandbox.scripts = case_scripts(kind)[calls_made(kind) :]  # a new engine replays from the start
    sandbox.write()
    raised = flags(kind, scope, str(RAISED_VALUE[kind]))
    done, document = print_run(sandbox, *raised, "--session", document["session_id"], "-p", "continue")
    assert done.returncode == 0, done.stderr
    assert document["final_message"] == "continued"
    later = document["budget"]["spent"]
    assert (
        later["session"]["tokens"]
        == later["tree"]["tokens"]
        == tokens + (STEP_TOKENS if kind != "tool_calls" else 0)
    )
