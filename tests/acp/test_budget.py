"""Budgets in `soulwire acp`: usage updates carry the cost and the budget while a limit is set,
and a turn a limit stops ends with ACP's nearest stop reason (max_tokens for a token limit);
each limit at each scope (tests/budget_cases.py)."""

from __future__ import annotations

import pytest

from tests.acp.conftest import run_agent, tool_script
from tests.budget_cases import (
    KINDS,
    LIMIT,
    PRICES,
    RAISED,
    SCOPES,
    TREE_TOKENS,
    budget_prompt,
    scripts,
    subagent_tree_scripts,
)
from tests.wire_client import Sandbox

pytestmark = pytest.mark.anyio


async def test_usage_updates_show_the_cost_and_a_token_limit_stops_with_max_tokens(sandbox: Sandbox) -> None:
    sandbox.config_extra = {
        "prices": {"scripted_echo": {"input": 100.0, "output": 100.0}},
        "budgets": {"tree": {"tokens": 1000}},
    }
    usage = "\nusage: input_other=600 output=0"
    first = tool_script("c1", "Shell", command="echo one") + usage
    async with run_agent(
        sandbox, first, tool_script("c2", "Shell", command="echo two") + usage, args=("--yolo",)
    ) as agent:
        await agent.initialize()
        session = await agent.new_session()
        reply = await agent.conn.prompt(
            session_id=session.session_id, prompt=[{"type": "text", "text": "go"}]
        )
        assert reply.stop_reason == "max_tokens"
        updates = agent.editor.of("usage_update")
        assert updates, agent.editor.updates
        last = updates[-1]
        assert (
            last.cost is not None and last.cost.currency == "USD" and last.cost.amount == pytest.approx(0.06)
        )
        assert last.used == 600 and last.size == 100_000
        budget = (last.field_meta or {})["soulwire/budget"]
        assert budget["spent"]["tree"]["tokens"] == 600 and budget["remaining"]["tree"]["tokens"] == 400


@pytest.mark.parametrize("kind", KINDS)
async def test_each_limit_at_each_scope_stops_the_prompt_and_raising_it_continues(
    sandbox: Sandbox, kind: str
) -> None:
    """One agent, a session per scope: `/budget SCOPE KIND LIMIT` (a prompt), then a prompt the
    limit stops with ACP's nearest stop reason, its usage update showing what that scope spent
    and has left; `/budget` raises the limit and the next prompt goes on where it stopped."""
    sandbox.config_extra = {"prices": PRICES}
    async with run_agent(sandbox, *scripts(kind), args=("--yolo",)) as agent:
        await agent.initialize()
        for scope in SCOPES:
            agent.editor.clear()
            session = (await agent.new_session()).session_id

            async def prompt(text: str, session: str = session) -> str:
                reply = await agent.conn.prompt(session_id=session, prompt=[{"type": "text", "text": text}])
                return reply.stop_reason

            assert await prompt(budget_prompt(scope, kind, LIMIT[kind])) == "end_turn"
            stop = await prompt("go")
            assert stop == ("max_tokens" if kind == "tokens" else "max_turn_requests"), (scope, stop)
            assert agent.editor.tool_statuses("c1")[-1] == "completed"
            assert "c2" not in {u.tool_call_id for u in agent.editor.of("tool_call")} or kind == "tool_calls"
            budget = (agent.editor.of("usage_update", session)[-1].field_meta or {})["soulwire/budget"]
            spent, left = budget["spent"][scope][kind], budget["remaining"][scope][kind]
            assert spent >= float(LIMIT[kind]) * (0.6 if kind in ("usd", "tokens") else 1), (scope, budget)
            assert left == pytest.approx(max(0.0, float(LIMIT[kind]) - spent), abs=1e-6), (scope, budget)

            assert await prompt(budget_prompt(scope, kind, RAISED[kind])) == "end_turn"
            agent.editor.clear()
            assert await prompt("continue") == "end_turn"
            assert agent.editor.text(session_id=session).endswith("continued")
            if kind != "tool_calls":  # refused before, the model read that it was not run
                assert agent.editor.tool_statuses("c2")[-1] == "completed"


async def test_a_subagent_tree_is_stopped_and_a_loaded_session_keeps_its_totals(sandbox: Sandbox) -> None:
    """Two sub-agents that together reach the tree's limit: the prompt stops (`max_tokens`),
    the usage update shows the tree's spend beside the session's own; the session loaded in a
    new agent process goes on from those totals (`/budget` shows them)."""
    sandbox.config_extra = {"budgets": {"tree": {"tokens": TREE_TOKENS}}}
    async with run_agent(sandbox, *subagent_tree_scripts(), args=("--yolo",)) as agent:
        await agent.initialize()
        session = (await agent.new_session()).session_id
        reply = await agent.conn.prompt(session_id=session, prompt=[{"type": "text", "text": "go"}])
        assert reply.stop_reason == "max_tokens"
        spent = (agent.editor.of("usage_update")[-1].field_meta or {})["soulwire/budget"]["spent"]
        assert (spent["tree"]["tokens"], spent["session"]["tokens"]) == (2100, 100)
    async with run_agent(sandbox, args=("--yolo",)) as agent:
        await agent.initialize()
        await agent.conn.load_session(cwd=str(sandbox.work), session_id=session, mcp_servers=[])
        agent.editor.clear()
        reply = await agent.conn.prompt(session_id=session, prompt=[{"type": "text", "text": "/budget"}])
        assert reply.stop_reason == "end_turn"
        assert "tree tokens: 2,100 of 2,000 (0 left)" in agent.editor.text(session_id=session)
