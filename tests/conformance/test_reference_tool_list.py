"""The tools a model is offered, compared with the reference's default agent.

`reference_tools.json` was recorded from kimi-cli 1.49.0 `--wire` with the same set-up: an
`openai_legacy` provider pointed at a fake server, `initialize` declaring question and plan-mode
support, one prompt; the request body's tools, reduced to names, parameter names and required
parameters. Soulwire must offer the same tools in the same order, with the same parameters,
except those it does not have yet (listed below)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, stream_reply
from tests.wire_client import WireProcess, engine_env

RECORDED = json.loads((Path(__file__).parent / "reference_tools.json").read_text())["tools"]
NOT_YET: set[str] = set()


def offered_tools(tmp_path: Path, capabilities: list[str]) -> list[dict[str, Any]]:
    with FakeLLMServer() as server:
        server.queue(stream_reply("openai_legacy", Answer(message_id="m1", text=["hi"])))
        config = {
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": "x", "capabilities": capabilities}},
            "providers": {"p": {"type": "openai_legacy", "base_url": server.url + "/v1", "api_key": "k"}},
        }
        (tmp_path / "config.json").write_text(json.dumps(config))
        (tmp_path / "work").mkdir()
        argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(tmp_path / "config.json")]
        wire = WireProcess(
            [*argv, "--work-dir", str(tmp_path / "work")], engine_env(tmp_path), tmp_path / "work"
        )
        wire.initialize(capabilities={"supports_question": True, "supports_plan_mode": True})
        wire.prompt("hi")
        assert wire.close() == 0
        tools = server.bodies()[0]["tools"]
    return [
        {
            "name": t["function"]["name"],
            "properties": sorted(t["function"]["parameters"].get("properties", {})),
            "required": sorted(t["function"]["parameters"].get("required", [])),
        }
        for t in tools
    ]


@pytest.mark.parametrize("capabilities", ["text_only", "image_in+video_in"])
def test_the_model_is_offered_the_reference_tools(tmp_path: Path, capabilities: str):
    expected = [t for t in RECORDED[capabilities] if t["name"] not in NOT_YET]
    ours = offered_tools(tmp_path, [] if capabilities == "text_only" else capabilities.split("+"))
    assert ours == expected
