"""The one-shot helper and the blocking wrapper."""

from __future__ import annotations

import threading

import pytest

import soulwire.sdk as sdk
from soulwire.sdk import sync
from soulwire.wire.messages import TurnBegin
from soulwire.wire.types import TextPart

from .conftest import Engine
from .test_engines import call


@pytest.mark.anyio
async def test_ask_returns_the_final_text(soulwire: Engine):
    @sdk.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key.upper()

    options = soulwire.options(
        "text: thinking out loud\n" + call("l1", "lookup", {"key": "k"}), "text: K it is"
    )
    assert await sdk.ask("what is k?", tools=[lookup], **options) == "K it is"


@pytest.mark.anyio
async def test_ask_raises_engine_errors(soulwire: Engine):
    soulwire.sandbox.config_extra = {"default_model": "", "models": {}, "providers": {}}
    with pytest.raises(sdk.LLMNotSetError):
        await sdk.ask("hi", **soulwire.options("text: x"))


@pytest.mark.anyio
async def test_sync_ask_works_inside_a_running_loop(soulwire: Engine):
    assert sync.ask("hi", **soulwire.options("text: from a thread")) == "from a thread"


def test_sync_session_streams_steps_and_replays(soulwire: Engine):
    options = soulwire.options("text: one\ntext:  two", "text: three")
    with sync.SyncSession(**options) as session:
        assert session.id and session.session.server is not None
        events = list(session.prompt("first"))
        assert isinstance(events[0], TurnBegin)
        assert [e.text for e in events if isinstance(e, TextPart)] == ["one", " two"]
        turn = session.prompt("second")
        grouped = [(step.n, [type(e).__name__ for e in step]) for step in turn.iter_steps()]
        assert grouped[0][0] == 1 and "TextPart" in grouped[0][1]
        assert turn.wait().final_text == "three"
        history = session.replay()
        assert [e.user_input for e in history if isinstance(e, TurnBegin)] == ["first", "second"]


def test_sync_approvals_answered_from_the_calling_thread(fake):
    with sync.SyncSession(**fake("approvals")) as session:
        turn = session.prompt("2")
        for event in turn:
            if isinstance(event, sdk.Approval):
                assert threading.current_thread() is threading.main_thread()
                if event.id == "a1":
                    event.approve()
                else:
                    event.reject("nope")
        assert turn.result.text == "approve:;reject:nope;"
