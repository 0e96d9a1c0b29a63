"""Stored sessions through the SDK (`LocalSessions`) against the real engine and its
`sessions` command: list, typed history, fork from an earlier turn, resume, continue, delete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import soulwire.sdk as sdk
from soulwire.sdk import sync

from .conftest import Engine
from .test_engines import call

pytestmark = pytest.mark.anyio


def context_texts(share: Path, session_id: str) -> list[str]:
    (path,) = share.glob(f"sessions/*/{session_id}/context.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        r["content"]
        for r in records
        if r.get("role") in ("user", "assistant") and isinstance(r["content"], str)
    ]


async def two_turns(engine: Engine) -> tuple[sdk.LocalSessions, str]:
    options = engine.options(
        call("c1", "Shell", {"command": "echo one"}), "text: first answer", "text: second answer", yolo=True
    )
    async with sdk.Session(**options) as session:
        await session.prompt("first question")
        await session.prompt("second question")
        assert session.id is not None
        return sdk.LocalSessions(**options), session.id


async def test_list_and_typed_history(soulwire: Engine):
    sessions, session_id = await two_turns(soulwire)
    (stored,) = await sessions.list()
    assert stored.id == session_id and stored.turns == 2 and stored.title == "first question"
    assert stored.work_dir == str(soulwire.sandbox.work)
    first, second = await sessions.history(session_id)
    assert (first.number, first.user_input, first.finished) == (1, "first question", True)
    kinds = [type(m).__name__ for m in first.messages if not isinstance(m, sdk.Status)]
    assert kinds == ["ToolUse", "ToolResultMessage", "AssistantText"]
    assert first.messages[0].input == {"command": "echo one"}  # pyright: ignore[reportAttributeAccessIssue]
    assert [m.text for m in second.messages if isinstance(m, sdk.AssistantText)] == ["second answer"]


async def test_fork_from_an_earlier_turn_then_resume_it(soulwire: Engine):
    sessions, session_id = await two_turns(soulwire)
    fork = await sessions.fork(session_id, turn=1, title="try again")
    assert fork.id != session_id and fork.title == "try again" and fork.turns == 1
    assert context_texts(soulwire.sandbox.share, fork.id) == ["first question", "first answer"]
    soulwire.options("text: a different second answer")
    async with sessions.resume(fork.id) as session:
        assert session.id == fork.id and session.resumed is True
        await session.prompt("another second question")
    turns = await sessions.history(fork.id)
    assert [t.user_input for t in turns] == ["first question", "another second question"]
    assert context_texts(soulwire.sandbox.share, fork.id)[-2:] == [
        "another second question",
        "a different second answer",
    ]
    original = await sessions.history(session_id)  # the source is untouched
    assert [t.user_input for t in original] == ["first question", "second question"]
    whole = await sessions.fork(session_id)
    assert whole.turns == 2 and whole.title == "Fork of first question"


async def test_continue_last_and_delete(soulwire: Engine):
    sessions, session_id = await two_turns(soulwire)
    soulwire.options("text: third answer")
    async with sessions.continue_last() as session:
        assert session.id == session_id and session.resumed is True
        await session.prompt("third question")
    assert [t.user_input for t in await sessions.history(session_id)][-1] == "third question"
    await sessions.delete(session_id)
    assert await sessions.list() == []
    with pytest.raises(sdk.SessionNotFoundError):
        await sessions.history(session_id)


async def test_bad_fork_turn_is_a_store_error(soulwire: Engine):
    sessions, session_id = await two_turns(soulwire)
    with pytest.raises(sdk.SessionStoreError, match="has 2 turns"):
        await sessions.fork(session_id, turn=5)
    with pytest.raises(sdk.SessionNotFoundError):
        await sessions.fork("no-such-session")
    assert len(await sessions.list()) == 1


def test_history_parsing_keeps_nested_turns_inside_and_marks_unfinished_ones():
    records = [
        {"type": "TurnBegin", "payload": {"user_input": "/init"}},
        {"type": "TurnBegin", "payload": {"user_input": "inner"}},
        {"type": "ContentPart", "payload": {"type": "text", "text": "inner text"}},
        {"type": "TurnEnd", "payload": {}},
        {"type": "TurnEnd", "payload": {}},
        {"type": "TurnBegin", "payload": {"user_input": "cut off"}},
        {"type": "StepBegin", "payload": {"n": 1}},
        {"type": "ContentPart", "payload": {"type": "text", "text": "partial"}},
    ]
    first, second = sdk.sessions.parse_history(records)
    assert first.user_input == "/init" and first.finished
    assert [m.text for m in first.messages if isinstance(m, sdk.AssistantText)] == ["inner text"]
    assert second.user_input == "cut off" and not second.finished
    assert [m.text for m in second.messages if isinstance(m, sdk.AssistantText)] == ["partial"]


def test_the_blocking_mirror(soulwire: Engine):
    options = soulwire.options(call("c1", "Shell", {"command": "echo one"}), "text: first answer", yolo=True)
    with sync.SyncSession(**options) as session:
        kinds = [type(m).__name__ for m in session.query("first question")]
    assert kinds[-1] == "ResultMessage" and "ToolUse" in kinds and "AssistantText" in kinds
    stored = sync.SyncSessions(sdk.LocalSessions(**options))
    (found,) = stored.list()
    assert [t.user_input for t in stored.history(found.id)] == ["first question"]
    fork = stored.fork(found.id, turn=0)
    assert fork.turns == 0
    soulwire.options("text: from the fork")
    with stored.resume(fork.id) as forked:
        assert forked.prompt("again").wait().final_text == "from the fork"
    stored.delete(fork.id)
    assert [s.id for s in stored.list()] == [found.id]
