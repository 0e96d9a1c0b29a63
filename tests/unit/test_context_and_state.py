"""The context restores what it wrote, token accounting, compaction helpers, the state
keeper, and the light command catalog staying in step with the handlers."""

from __future__ import annotations

from pathlib import Path

from soulwire.config.model import LoopControl
from soulwire.engine.approvals import ApprovalBroker
from soulwire.engine.bus import EventBus
from soulwire.engine.catalog import BUILTIN_SLASH_COMMANDS
from soulwire.engine.compaction import compaction_due, compaction_request, split_history
from soulwire.engine.context import Context
from soulwire.engine.slash import _HANDLERS, default_commands
from soulwire.engine.state import StateKeeper, title_from
from soulwire.llm.message import Message
from soulwire.sessions.memory import MemoryBackend
from soulwire.sessions.store import FileSessionStore
from soulwire.wire.messages import ToolResult, TurnBegin, TurnEnd
from soulwire.wire.types import TextPart, tool_ok


def test_context_restores_history_checkpoints_and_usage(tmp_path: Path):
    store = FileSessionStore(tmp_path, tmp_path / "w", "s", protocol_version="1.3")
    context = Context(store, "system prompt")
    context.checkpoint()
    context.append(Message(role="user", content="hello there"))
    context.record_usage(100)
    context.append(Message(role="assistant", content=[TextPart(text="12345678")]))
    store.close()

    again = Context(FileSessionStore(tmp_path, tmp_path / "w", "s", protocol_version="1.3"), "other prompt")
    assert again.system_prompt == "system prompt"  # frozen for the session
    assert [m.text() for m in again.history] == ["hello there", "12345678"]
    assert again.token_count == 100 + 2  # last usage + chars/4 of what came after
    again.checkpoint()
    records = list(again.store.load_context())
    assert records[-1] == {"role": "_checkpoint", "id": 1}


def test_unreadable_records_are_skipped(tmp_path: Path):
    backend = MemoryBackend()
    store = backend.open("s")
    store.append_context([{"role": "user", "content": 42}, {"role": "user", "content": "ok"}])
    context = Context(backend.open("s"), "p")
    assert [m.text() for m in context.history] == ["ok"]
    assert context.skipped_records == 1


def test_clear_and_replace_history_rewrite_the_file():
    backend = MemoryBackend()
    context = Context(backend.open("s"), "p")
    context.append(Message(role="user", content="a"), Message(role="assistant", content="b"))
    context.replace_history([Message(role="user", content="summary")], token_count=7)
    assert [r["role"] for r in backend.open("s").load_context()] == [
        "_system_prompt",
        "_checkpoint",
        "user",
        "_usage",
    ]
    assert context.token_count == 7
    context.checkpoint()
    assert list(backend.open("s").load_context())[-1] == {"role": "_checkpoint", "id": 1}
    context.clear()
    assert list(backend.open("s").load_context()) == [{"role": "_system_prompt", "content": "p"}]
    assert context.is_empty and context.token_count == 0
    assert backend.open("s").archived_contexts() == 2


def test_compaction_split_and_trigger():
    history = [
        Message(role="user", content="u1"),
        Message(role="assistant", content="a1"),
        Message(role="tool", content="t1", tool_call_id="x"),
        Message(role="user", content="u2"),
        Message(role="assistant", content="a2"),
        Message(role="tool", content="t2", tool_call_id="y"),
    ]
    older, kept = split_history(history)
    assert [m.text() for m in older] == ["u1", "a1", "t1"]
    assert [m.text() for m in kept] == ["u2", "a2", "t2"]
    assert split_history(history[:1]) == ([], history[:1])

    loop = LoopControl(compaction_trigger_ratio=0.5, reserved_context_size=1000)
    assert not compaction_due(49_000, 100_000, loop)
    assert compaction_due(50_000, 100_000, loop)
    assert compaction_due(9_100, 10_000, loop)  # the reserve no longer fits

    request = compaction_request(older, "the API")
    prompt = request.history[0].text()
    assert "## Message 1\nRole: user\nContent:\nu1" in prompt
    assert prompt.endswith("focus on: the API") and not request.tools


def test_titles():
    assert title_from("  fix   the\nbug  ") == "fix the bug"
    assert title_from("/compact now") is None
    assert title_from("x" * 80) == "x" * 50


def test_state_keeper_restores_and_saves_on_change():
    backend = MemoryBackend()
    backend.open("s").save_state(
        {
            "version": 1,
            "approval": {"yolo": True, "afk": False, "auto_approve_actions": ["run command"]},
            "todos": [{"title": "t", "status": "pending"}],
            "future_key": {"kept": True},
        }
    )
    broker = ApprovalBroker(EventBus(), channel=None)
    live: dict = {}
    keeper = StateKeeper(backend.open("s"), broker, live, add_dirs=["/extra"])
    keeper.restore()
    assert broker.yolo and "run command" in broker.rules and live["todos"][0]["title"] == "t"
    assert keeper.save_if_changed()  # the --add-dir is new to the session
    assert backend.open("s").load_state()["additional_dirs"] == ["/extra"]

    keeper.on_event(TurnBegin(user_input="/yolo"))
    assert keeper.title is None
    keeper.on_event(TurnBegin(user_input="first real prompt"))
    broker.rules.add("edit file")
    live["todos"] = [{"title": "t", "status": "done"}]
    live["yolo"] = False
    keeper.on_event(ToolResult(tool_call_id="c", return_value=tool_ok("ok")))
    saved = backend.open("s").load_state()
    assert saved["custom_title"] == "first real prompt"
    assert saved["approval"] == {
        "yolo": False,
        "afk": False,
        "auto_approve_actions": ["edit file", "run command"],
    }
    assert saved["todos"] == [{"title": "t", "status": "done"}]
    assert saved["future_key"] == {"kept": True}
    assert not keeper.save_if_changed()
    keeper.on_event(TurnEnd())  # nothing changed: no write needed


def test_catalog_and_handlers_are_in_step():
    assert [name for name, _, _ in BUILTIN_SLASH_COMMANDS] == list(_HANDLERS)
    described = default_commands().describe()
    assert [c["name"] for c in described] == ["init", "compact", "clear", "yolo", "plan", "budget", "model"]
    assert default_commands().find("reset") is not None
