"""The checkpoint commands over ACP when `soulwire serve` holds the session (`/acp` on its
WebSocket), with the official SDK's client: offered as available commands, `/changes` shows
what a turn wrote, a hand edit blocks `/undo` and is named, `/undo --force` restores the file,
and an editor that offered `_soulwire/redraw` has the conversation drawn again."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp.schema import ClientCapabilities

from tests.acp.conftest import WAIT_S, tool_script
from tests.acp.test_websocket import _prompt, editor_over_ws
from tests.wire_client import Sandbox

pytestmark = pytest.mark.anyio


async def test_changes_and_undo_with_a_redraw_over_serve(serve: Any, sandbox: Sandbox) -> None:
    server = serve(
        "text: hello",
        tool_script("w", "WriteFile", path="a.txt", content="by the agent\n"),
        "text: written",
        args=("--checkpoints",),
    )
    work = sandbox.work
    (work / "a.txt").write_text("mine\n")
    async with editor_over_ws(
        server, capabilities=ClientCapabilities(field_meta={"soulwire": {"redraw": True}})
    ) as (conn, editor):
        with anyio.fail_after(WAIT_S * 3):
            session = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            while not editor.of("available_commands_update", session):
                await anyio.sleep(0.02)
            offered = editor.of("available_commands_update", session)[-1].available_commands
            assert {"changes", "rewind", "undo"} <= {c.name for c in offered}

            await conn.prompt(session_id=session, prompt=_prompt("say hi"))
            editor.answer("approve")
            await conn.prompt(session_id=session, prompt=_prompt("write it"))
            assert (work / "a.txt").read_text() == "by the agent\n"

            async def command(text: str) -> str:
                editor.clear()
                reply = await conn.prompt(session_id=session, prompt=_prompt(text))
                assert reply.stop_reason == "end_turn"
                return editor.text(session_id=session)

            changes = await command("/changes")
            assert "-mine" in changes and "+by the agent" in changes
            assert "**2** write it — a.txt" in await command("/rewind")
            (work / "a.txt").write_text("by hand\n")
            refused = await command("/undo")
            assert "`a.txt`" in refused and "/rewind 2 --force" in refused
            assert (work / "a.txt").read_text() == "by hand\n" and editor.extensions == []

            undone = await command("/undo --force")
            assert (work / "a.txt").read_text() == "mine\n"
            assert editor.extensions == [("soulwire/redraw", {"sessionId": session})]
            # the view was cleared, turn 1 drawn again, then the answer
            assert editor.text("user_message_chunk", session) == "say hi"
            assert undone.startswith("hello") and "Back to before turn 2" in undone
            assert "1 file(s) restored" in undone
