"""Mid-session controls against the real engine: switching the model between turns (in place
with Wire `set_model`; restarting the engine on the same session for an engine without it),
interrupt, and get_server_info()."""

from __future__ import annotations

import contextlib

import pytest

import soulwire.sdk as sdk
from soulwire.sdk import sync

from .conftest import Engine
from .test_engines import call
from .test_query import hang

pytestmark = pytest.mark.anyio

ECHO_MODEL = {
    "models": {
        "scripted": {"provider": "scripted_provider", "model": "scripted_echo", "max_context_size": 100000},
        "echo": {"provider": "echo_provider", "model": "echo", "max_context_size": 100000},
    },
}


def with_echo_model(engine: Engine) -> None:
    engine.sandbox.config_extra = {
        **ECHO_MODEL,
        "providers": {
            "scripted_provider": {
                "type": "_scripted_echo",
                "base_url": "",
                "api_key": "",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(engine.sandbox.root / "scripts.json")},
            },
            "echo_provider": {"type": "_echo", "base_url": "", "api_key": ""},
        },
    }


async def test_set_model_between_turns_switches_in_place(soulwire: Engine):
    with_echo_model(soulwire)
    async with sdk.Session(**soulwire.options("text: from the scripted model")) as session:
        assert session.get_server_info().capabilities["supports_model_switch"] is True
        first = await session.prompt("hello")
        assert first.final_text == "from the scripted model"
        session_id, pid = session.id, session.pid
        await session.set_model("echo")
        assert session.id == session_id and session.pid == pid  # the same engine process
        second = await session.prompt("text: from the echo model")
        assert second.final_text == "from the echo model"
        assert session.get_server_info().model == "echo"
        with pytest.raises(sdk.InvalidParamsError, match="no-such-model"):
            await session.set_model("no-such-model")  # refused at once; the session goes on
        with pytest.raises(sdk.InvalidParamsError, match="cannot think"):
            await session.set_model(thinking=True)
        assert (await session.prompt("text: still echo")).final_text == "still echo"


async def test_set_model_restarts_an_engine_that_cannot_switch_in_place(soulwire: Engine):
    """The way to switch on the Kimi CLI (no `supports_model_switch`), here on Soulwire whose
    answer is taken as if it had not negotiated it."""
    with_echo_model(soulwire)
    async with sdk.Session(**soulwire.options("text: from the scripted model")) as session:
        first = await session.prompt("hello")
        assert first.final_text == "from the scripted model"
        session_id, old_pid = session.id, session.pid
        assert session.initialize_result is not None
        session.initialize_result["capabilities"].pop("supports_model_switch")
        await session.set_model("echo")
        assert session.id == session_id and session.resumed is True and session.pid != old_pid
        second = await session.prompt("text: from the echo model")
        assert second.final_text == "from the echo model"
        assert session.get_server_info().model == "echo"
        turns = [e for e in [event async for event in session.replay()] if type(e).__name__ == "TurnBegin"]
        assert len(turns) == 2  # one history across the restart


async def test_set_model_is_refused_during_a_turn(soulwire: Engine):
    async with sdk.Session(**soulwire.options(call("h1", "hang", {}), tools=[hang])) as session:
        turn = session.prompt("go")
        async for event in turn:
            if type(event).__name__ == "ToolCall":
                break
        with pytest.raises(sdk.TurnInProgressError):
            await session.set_model("other")
        await session.interrupt()
        assert turn.result.status == "cancelled"


async def test_get_server_info(soulwire: Engine):
    async with sdk.Session(**soulwire.options(), tools=[hang], supports_plan_mode=True) as session:
        info = session.get_server_info()
    assert (info.name, info.protocol_version) == ("Soulwire", "1.10")
    assert "PreToolUse" in info.hook_events and "SubagentStop" in info.hook_events
    assert info.accepted_tools == ["hang"] and info.rejected_tools == {}
    assert info.capabilities.get("supports_plan_mode") is True
    assert info.session.id == session.id and any(c.name == "compact" for c in info.slash_commands)


def test_the_blocking_mirror_switches_models(soulwire: Engine):
    with_echo_model(soulwire)
    with sync.SyncSession(**soulwire.options("text: scripted")) as session:
        assert session.prompt("hi").wait().final_text == "scripted"
        session.set_model("echo")  # from another thread than the one that started it
        assert session.prompt("text: echoed").wait().final_text == "echoed"
        assert session.get_server_info().model == "echo"


async def test_leaving_session_query_early_cancels_the_turn(soulwire: Engine):
    async with sdk.Session(**soulwire.options(call("h1", "hang", {}), "text: next", tools=[hang])) as session:
        async with contextlib.aclosing(session.query("go")) as messages:
            async for message in messages:
                if isinstance(message, sdk.ToolUse):
                    break  # leave while the tool hangs
        result = await session.prompt("again")  # starts once the cancelled turn has ended
        assert result.final_text == "next"
