"""Tool calls in the editor: kinds, locations, statuses, diffs, plans and permissions."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest

from tests.acp.conftest import run_agent, tool_script
from tests.wire_client import Sandbox

pytestmark = pytest.mark.anyio


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


async def test_read_tool_has_kind_locations_and_goes_through_its_statuses(sandbox: Sandbox) -> None:
    async with run_agent(
        sandbox, tool_script("r1", "ReadFile", path="notes.txt", line_offset=2), "text: ok"
    ) as agent:
        (sandbox.work / "notes.txt").write_text("one\ntwo\nthree\n")
        await agent.initialize()
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("read"))
        updates = agent.editor.updates_of_call("r1")
        start = updates[0]
        assert start.session_update == "tool_call" and start.kind == "read" and start.status == "pending"
        described = [u for u in updates if u.locations]
        assert described[0].locations[0].path == str(sandbox.work / "notes.txt")
        assert described[0].locations[0].line == 2
        assert described[0].title == "Read notes.txt"
        assert agent.editor.tool_statuses("r1") == ["pending", "in_progress", "completed"]
        assert "two" in updates[-1].content[0].content.text


async def test_edit_asks_permission_first_and_shows_a_diff(sandbox: Sandbox) -> None:
    edit = tool_script("e1", "StrReplaceFile", path="app.py", edit={"old": "x = 1", "new": "x = 2"})
    async with run_agent(sandbox, edit, "text: edited") as agent:
        target = sandbox.work / "app.py"
        target.write_text("x = 1\n")
        await agent.initialize()
        session = await agent.new_session()
        async with anyio.create_task_group() as group:
            group.start_soon(agent.conn.prompt, session.session_id, _prompt("edit"))
            await agent.editor.asked.wait()
            assert target.read_text() == "x = 1\n"  # nothing runs before the answer
            request = agent.editor.permissions[0]
            assert request.tool_call_id == agent.editor.updates_of_call("e1")[0].tool_call_id
            assert request.tool_call_id.endswith("/e1") and request.kind == "edit"
            assert request.content[0].type == "diff"
            agent.editor.answer("approve")
        assert target.read_text() == "x = 2\n"
        assert agent.editor.tool_statuses("e1") == ["pending", "in_progress", "completed"]
        final = agent.editor.updates_of_call("e1")[-1]
        diff = final.content[0]
        assert diff.type == "diff" and diff.path == str(target)
        assert diff.old_text == "x = 1" and diff.new_text == "x = 2"
        assert agent.editor.updates_of_call("e1")[1].kind == "edit"


async def test_reject_and_cancelled_answers_fail_the_call(sandbox: Sandbox) -> None:
    write = tool_script("w1", "WriteFile", path="new.txt", content="hello")
    write2 = tool_script("w2", "WriteFile", path="new2.txt", content="hello")
    async with run_agent(sandbox, write, write2) as agent:
        await agent.initialize()
        session = await agent.new_session()
        agent.editor.answer("reject")
        reply = await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("write"))
        assert reply.stop_reason == "end_turn"
        assert not (sandbox.work / "new.txt").exists()
        assert agent.editor.tool_statuses("w1")[-1] == "failed"
        agent.editor.answer("cancelled")
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("write again"))
        assert not (sandbox.work / "new2.txt").exists()
        assert agent.editor.tool_statuses("w2")[-1] == "failed"


async def test_allow_always_is_remembered_for_the_session(sandbox: Sandbox) -> None:
    first = tool_script("s1", "Shell", command="echo one")
    again = tool_script("s2", "Shell", command="echo one")
    async with run_agent(sandbox, first, "text: a", again, "text: b") as agent:
        await agent.initialize()
        session = await agent.new_session()
        agent.editor.answer("approve_for_session")
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("1"))
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("2"))
        assert len(agent.editor.permissions) == 1
        assert agent.editor.permissions[0].kind == "execute"
        final = agent.editor.updates_of_call("s2")[-1]
        assert final.status == "completed" and "one" in final.content[0].content.text


async def test_yolo_mode_runs_without_asking(sandbox: Sandbox) -> None:
    async with run_agent(sandbox, tool_script("s1", "Shell", command="pwd"), "text: ok") as agent:
        await agent.initialize()
        session = await agent.new_session()
        await agent.conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("run"))
        assert agent.editor.permissions == []
        start = agent.editor.updates_of_call("s1")
        assert start[0].kind == "execute"
        assert any(u.title == "pwd" for u in start)
        assert str(sandbox.work) in start[-1].content[0].content.text


async def test_todo_list_becomes_a_plan(sandbox: Sandbox) -> None:
    todos = [{"title": "Look around", "status": "done"}, {"title": "Fix it", "status": "in_progress"}]
    async with run_agent(sandbox, tool_script("p1", "SetTodoList", todos=todos), "text: planned") as agent:
        await agent.initialize()
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("plan"))
        plan = agent.editor.of("plan")[-1]
        assert [(e.content, e.status) for e in plan.entries] == [
            ("Look around", "completed"),
            ("Fix it", "in_progress"),
        ]
        assert agent.editor.updates_of_call("p1")[0].kind == "think"


async def test_cancel_ends_the_turn_and_kills_the_command(sandbox: Sandbox) -> None:
    pid_file = sandbox.root / "pid"
    command = f"sh -c 'echo $$ > {pid_file}; sleep 60'"
    async with run_agent(sandbox, tool_script("s1", "Shell", command=command), "text: never") as agent:
        await agent.initialize()
        session = await agent.new_session()
        await agent.conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        result: list[str] = []

        async def run() -> None:
            reply = await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("sleep"))
            result.append(reply.stop_reason)

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            with anyio.fail_after(30):
                while not pid_file.exists() or not pid_file.read_text().strip():
                    await anyio.sleep(0.05)
            await agent.conn.cancel(session_id=session.session_id)
        assert result == ["cancelled"]
        assert agent.editor.tool_statuses("s1")[-1] == "failed"
        pid = int(pid_file.read_text())
        with anyio.fail_after(5):
            while _alive(pid):
                await anyio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_cancel_resolves_a_pending_permission_request(sandbox: Sandbox) -> None:
    async with run_agent(sandbox, tool_script("w1", "WriteFile", path="x.txt", content="x")) as agent:
        await agent.initialize()
        session = await agent.new_session()
        result: list[str] = []

        async def run() -> None:
            reply = await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("write"))
            result.append(reply.stop_reason)

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await agent.editor.asked.wait()
            await agent.conn.cancel(session_id=session.session_id)
            with anyio.fail_after(5):
                while not result:
                    await anyio.sleep(0.05)
            agent.editor.answer("approve")  # too late: the turn is over
        assert result == ["cancelled"]
        assert not (sandbox.work / "x.txt").exists()
        assert agent.editor.tool_statuses("w1")[-1] == "failed"


async def test_with_fs_capabilities_file_tools_use_the_editors_buffers(sandbox: Sandbox) -> None:
    scripts = (
        tool_script("r1", "ReadFile", path="main.py"),
        tool_script("e1", "StrReplaceFile", path="main.py", edit={"old": "unsaved", "new": "edited"}),
        tool_script("w1", "WriteFile", path="fresh.txt", content="new file"),
        "text: done",
    )
    async with run_agent(sandbox, *scripts, args=("--yolo",)) as agent:
        on_disk = sandbox.work / "main.py"
        on_disk.write_text("print('saved')\n")
        buffer = str(on_disk)
        agent.editor.files[buffer] = "print('unsaved')\n"
        await agent.initialize(fs={"readTextFile": True, "writeTextFile": True})
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("edit"))
        read = agent.editor.updates_of_call("r1")[-1]
        assert "print('unsaved')" in read.content[0].content.text
        assert agent.editor.files[buffer] == "print('edited')\n"
        assert on_disk.read_text() == "print('saved')\n"  # the editor decides when to save
        assert agent.editor.files[str(sandbox.work / "fresh.txt")] == "new file"
        assert agent.editor.tool_statuses("w1")[-1] == "completed"


async def test_without_fs_capabilities_the_disk_is_used(sandbox: Sandbox) -> None:
    edit = tool_script("e1", "StrReplaceFile", path="main.py", edit={"old": "saved", "new": "edited"})
    async with run_agent(sandbox, edit, "text: done", args=("--yolo",)) as agent:
        on_disk = sandbox.work / "main.py"
        on_disk.write_text("print('saved')\n")
        agent.editor.files[str(on_disk)] = "print('unsaved')\n"
        await agent.initialize()
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("edit"))
        assert on_disk.read_text() == "print('edited')\n"
        assert agent.editor.files[str(on_disk)] == "print('unsaved')\n"


async def test_with_the_terminal_capability_shell_runs_in_the_editors_terminal(sandbox: Sandbox) -> None:
    scripts = (tool_script("s1", "Shell", command="echo from-terminal; echo $GIT_PAGER; pwd"), "text: ran")
    async with run_agent(sandbox, *scripts, args=("--yolo",)) as agent:
        await agent.initialize(terminal=True)
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("run"))
        ((terminal_id, terminal),) = agent.editor.terminals.items()
        assert terminal["command"][1:] == ["-c", "echo from-terminal; echo $GIT_PAGER; pwd"]
        assert terminal["events"] == ["release"]
        final = agent.editor.updates_of_call("s1")[-1]
        assert final.status == "completed"
        assert [c.type for c in final.content] == ["terminal"] and final.content[0].terminal_id == terminal_id
        assert final.raw_output.splitlines() == ["from-terminal", "cat", str(sandbox.work)]


async def test_a_failing_terminal_command_fails_the_call(sandbox: Sandbox) -> None:
    scripts = (tool_script("s1", "Shell", command="echo oops; exit 3"), "text: ran")
    async with run_agent(sandbox, *scripts, args=("--yolo",)) as agent:
        await agent.initialize(terminal=True)
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("run"))
        final = agent.editor.updates_of_call("s1")[-1]
        assert final.status == "failed"
        assert "exit code: 3" in final.content[1].content.text


async def test_cancel_kills_the_editors_terminal(sandbox: Sandbox) -> None:
    async with run_agent(sandbox, tool_script("s1", "Shell", command="sleep 60"), args=("--yolo",)) as agent:
        await agent.initialize(terminal=True)
        session = await agent.new_session()
        result: list[str] = []

        async def run() -> None:
            reply = await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("sleep"))
            result.append(reply.stop_reason)

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            with anyio.fail_after(30):
                while not agent.editor.terminals:
                    await anyio.sleep(0.05)
            await agent.conn.cancel(session_id=session.session_id)
        assert result == ["cancelled"]
        (terminal,) = agent.editor.terminals.values()
        assert terminal["events"] == ["kill", "release"]
        with anyio.fail_after(5):
            assert await terminal["process"].wait() == -signal.SIGKILL


async def test_a_tool_call_id_reused_by_the_model_is_a_new_call_in_the_editor(sandbox: Sandbox) -> None:
    scripts = (
        tool_script("tc-1", "Glob", pattern="*"),
        "text: a",
        tool_script("tc-1", "Glob", pattern="*"),
        "text: b",
    )
    async with run_agent(sandbox, *scripts) as agent:
        await agent.initialize()
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("1"))
        await agent.conn.prompt(session_id=session.session_id, prompt=_prompt("2"))
        starts = [u.tool_call_id for u in agent.editor.of("tool_call")]
        assert len(starts) == 2 and len(set(starts)) == 2


async def test_additional_directories_are_part_of_the_workspace(sandbox: Sandbox) -> None:
    extra = sandbox.root / "extra"
    extra.mkdir()
    (extra / "shared.txt").write_text("shared text\n")
    read = tool_script("r1", "ReadFile", path=str(extra / "shared.txt"))
    async with run_agent(sandbox, read, "text: ok", read.replace("r1", "r2"), "text: ok") as agent:
        reply = await agent.initialize()
        assert reply.agent_capabilities.session_capabilities.additional_directories is not None
        inside = await agent.new_session(additional_directories=[str(extra)])
        await agent.conn.prompt(session_id=inside.session_id, prompt=_prompt("read"))
        assert agent.editor.permissions == []  # inside the workspace: no approval needed
        assert "shared text" in agent.editor.updates_of_call("r1")[-1].content[0].content.text
        outside = await agent.new_session()
        agent.editor.answer("approve")
        await agent.conn.prompt(session_id=outside.session_id, prompt=_prompt("read"))
        assert len(agent.editor.permissions) == 1  # the same read outside the workspace asks
