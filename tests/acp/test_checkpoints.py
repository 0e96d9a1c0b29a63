"""Checkpoints through ACP, with the official SDK's client against the real `soulwire acp`:
/changes, /rewind and /undo as available commands that work (a hand edit named, then forced),
and `session/fork` into a new directory that gets the files as at the end of the turn."""

from __future__ import annotations

import pytest

from soulwire.ui.acp.checkpoints import STALE_VIEW
from tests.acp.conftest import run_agent, tool_script
from tests.wire_client import Sandbox

pytestmark = pytest.mark.anyio

TURNS = (
    tool_script("w", "WriteFile", path="a.txt", content="by the agent\n"),
    "text: one",
    tool_script("s", "Shell", command="rm keep.txt"),
    "text: two",
)


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


async def test_changes_rewind_undo_commands_and_a_fork_with_its_files(sandbox: Sandbox, tmp_path) -> None:
    sandbox.config_extra = {"checkpoints": {"enabled": True}, "default_yolo": True}
    sandbox.work.mkdir(parents=True)
    work = sandbox.work
    (work / "keep.txt").write_text("kept\n")
    async with run_agent(sandbox, *TURNS) as agent:
        await agent.initialize()
        session = (await agent.new_session()).session_id
        offered = await agent.wait_for_update("available_commands_update", session)
        names = {c.name for c in offered[-1].available_commands}
        assert {"changes", "rewind", "undo"} <= names
        for text in ("write", "remove"):
            await agent.conn.prompt(session_id=session, prompt=_prompt(text))
        assert not (work / "keep.txt").exists()

        async def command(text: str) -> str:
            agent.editor.clear()
            reply = await agent.conn.prompt(session_id=session, prompt=_prompt(text))
            assert reply.stop_reason == "end_turn"
            return agent.editor.text(session_id=session)

        assert "+by the agent" in await command("/changes 1")
        listing = await command("/rewind")
        assert "**2** remove — keep.txt" in listing and "**1** write — a.txt" in listing
        (work / "keep.txt").write_text("mine\n")  # by hand: undoing turn 2 would overwrite it
        refused = await command("/undo")
        assert "`keep.txt`" in refused and "/rewind 2 --force" in refused
        assert (work / "keep.txt").read_text() == "mine\n"
        forced = await command("/undo --force")
        assert "Back to before turn 2" in forced and (work / "keep.txt").read_text() == "kept\n"
        assert STALE_VIEW in forced and agent.editor.extensions == []  # it did not ask for redraws
        agent.editor.clear()  # loading the session again replays it as it now is
        await agent.conn.load_session(cwd=str(work), session_id=session, mcp_servers=[])
        assert agent.editor.text("user_message_chunk", session) == "write"
        assert agent.editor.text(session_id=session) == "one"
        rewound = await command("/rewind 1 files")
        assert "(files)" in rewound and not (work / "a.txt").exists()
        assert "Usage" in await command("/rewind one")

        fork_dir = tmp_path / "fork"
        forked = await agent.conn.fork_session(session_id=session, cwd=str(fork_dir), mcp_servers=[], turns=1)
        assert forked.session_id != session
        assert (fork_dir / "a.txt").read_text() == "by the agent\n" and (fork_dir / "keep.txt").exists()
        assert not (work / "a.txt").exists()  # the parent's files are untouched
        assert agent.editor.text("user_message_chunk", forked.session_id) == "write"


async def test_an_editor_that_offers_redraws_gets_the_rewound_conversation_drawn_again(
    sandbox: Sandbox,
) -> None:
    sandbox.config_extra = {"checkpoints": {"enabled": True}, "default_yolo": True}
    sandbox.work.mkdir(parents=True)
    (sandbox.work / "keep.txt").write_text("kept\n")
    async with run_agent(sandbox, *TURNS) as agent:
        hello = await agent.initialize(field_meta={"soulwire": {"redraw": True}})
        assert hello.agent_capabilities.field_meta == {"soulwire": {"redraw": True}}
        session = (await agent.new_session()).session_id
        for text in ("write", "remove"):
            await agent.conn.prompt(session_id=session, prompt=_prompt(text))
        assert agent.editor.text("user_message_chunk", session) == ""  # live: the editor drew them
        assert agent.editor.text(session_id=session) == "onetwo"

        reply = await agent.conn.prompt(session_id=session, prompt=_prompt("/undo"))
        assert reply.stop_reason == "end_turn"
        assert agent.editor.extensions == [("soulwire/redraw", {"sessionId": session})]
        # the view was cleared, then turn 1 replayed, then the answer
        assert agent.editor.text("user_message_chunk", session) == "write"
        answer = agent.editor.text(session_id=session)
        assert answer.startswith("one") and "Back to before turn 2" in answer
        assert STALE_VIEW not in answer and (sandbox.work / "keep.txt").read_text() == "kept\n"

        agent.editor.extensions.clear()
        await agent.conn.prompt(session_id=session, prompt=_prompt("/changes 1"))
        assert agent.editor.extensions == []  # only a rewind of the conversation redraws


async def test_undo_stops_the_background_commands_first_and_says_so(sandbox: Sandbox) -> None:
    from tests.e2e.test_shell_tool import processes_running, unique_sleep

    sandbox.config_extra = {"checkpoints": {"enabled": True}, "default_yolo": True}
    sandbox.work.mkdir(parents=True)
    duration = unique_sleep()
    background = tool_script(
        "b", "Shell", command=f"sleep {duration}", run_in_background=True, description="s"
    )
    async with run_agent(sandbox, background, "text: started") as agent:
        await agent.initialize()
        session = (await agent.new_session()).session_id
        await agent.conn.prompt(session_id=session, prompt=_prompt("start it"))
        assert processes_running(duration)
        agent.editor.clear()
        await agent.conn.prompt(session_id=session, prompt=_prompt("/undo"))
        assert "stopped 1 background task(s) first" in agent.editor.text(session_id=session)
        assert processes_running(duration) == []
