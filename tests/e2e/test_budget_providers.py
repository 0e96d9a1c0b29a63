"""Money budgets against each provider's real stream format (a fake server on 127.0.0.1 that
reports usage, cached input included, the way each provider does): the engine prices every
call with `[prices]`, the call that crosses the limit is the last one sent, its tool call does
not run, and the turn ends with `budget_exceeded`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.e2e.test_providers import EXT_READ, answer_tool_call, provider_config
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import PROVIDERS, Answer, Call, stream_reply
from tests.wire_client import WireProcess, engine_env, payloads

PRICE = {"input": 1000.0, "output": 2000.0, "cache_read": 100.0}  # USD per million tokens
USAGE = {"input_other": 100, "output": 20, "cache_read": 50}
STEP_USD = (100 * 1000 + 20 * 2000 + 50 * 100) / 1e6  # $0.145 a call


@pytest.mark.parametrize("kind", PROVIDERS)
def test_the_money_limit_holds_on_every_provider_stream(kind: str, tmp_path: Path):
    (tmp_path / "work").mkdir()
    with FakeLLMServer() as server:
        config = provider_config(kind, server.url)
        config["prices"] = {"test-model": PRICE}
        config["budgets"] = {"tree": {"usd": 0.2}}
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(path)]
        wire = WireProcess(
            [*argv, "--work-dir", str(tmp_path / "work")], engine_env(tmp_path), tmp_path / "work"
        )
        try:
            wire.initialize(
                protocol_version="1.10", external_tools=[EXT_READ], capabilities={"supports_budget": True}
            )
            reading = [
                Answer(f"m{i}", calls=[Call(f"c{i}", "ext_read", ['{"path": "a.txt"}'])], usage=USAGE)
                for i in (1, 2)
            ]
            server.queue(*(stream_reply(kind, answer) for answer in reading))
            events, response = wire.prompt("read it", answer=answer_tool_call, timeout=30)
        finally:
            wire.close()
        assert response["result"] == {"status": "budget_exceeded"}, response
        assert len(server.requests) == 2
    results = {r["tool_call_id"]: r["return_value"] for r in payloads(events, "ToolResult")}
    assert results["c1"]["output"] == "contents of a.txt"
    assert results["c2"]["is_error"] and results["c2"]["message"].startswith("Not run: the tree budget's usd")
    [exceeded] = payloads(events, "BudgetExceeded")
    assert exceeded["limit"] == "usd" and exceeded["spent"] == pytest.approx(2 * STEP_USD)
    assert payloads(events, "BudgetUpdate")[-1]["spent"]["tree"]["tokens"] == 2 * 170
