"""Checkpoints of a `serve` session: asked for at creation (`checkpoints` in the body) or for
every session (`serve --checkpoints`), and the SDK's calls on a remote session through
`Session.attach` — list, changes, a rewind refused by a hand edit then forced and undone, a
fork with its own work dir the server can open."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from soulwire import sdk
from tests.tool_calls import call

TURNS = (
    call("w", "WriteFile", {"path": "a.txt", "content": "by the agent\n"}),
    "text: one",
    call("s", "Shell", {"command": "rm keep.txt"}),
    "text: two",
)


def url(server: Any, session: str) -> str:
    return f"ws://127.0.0.1:{server.port}/ws/sessions/{session}"


def test_the_sdk_rewinds_and_forks_a_remote_session(serve, tmp_path):
    server = serve(*TURNS)
    work = server.sandbox.work
    (work / "keep.txt").write_text("kept\n")
    session_id = server.create_session(checkpoints=True, yolo=True)
    fork_dir = tmp_path / "fork"

    async def main() -> tuple[list[str], list[str], Any]:
        async with sdk.Session.attach(url(server, session_id), server.token) as session:
            await session.prompt("write")
            await session.prompt("remove")
            kinds = [c["kind"] for c in await session.checkpoints()]
            two = await session.changes(2)
            assert [(f.path, f.status) for f in two.files] == [("keep.txt", "deleted")]
            (work / "a.txt").write_text("by hand\n")
            with pytest.raises(sdk.RewindConflictError) as refused:
                await session.rewind(1)
            rewound = await session.rewind(1, force=True)
            assert not (work / "a.txt").exists() and (work / "keep.txt").read_text() == "kept\n"
            undone = await session.rewind(undo=True)
            assert undone.undo_of == rewound.id and (work / "a.txt").read_text() == "by hand\n"
            return kinds, refused.value.paths, await session.fork(1, work_dir=fork_dir)

    kinds, conflicts, forked = anyio.run(main)
    assert kinds == ["turn", "step", "end"] * 2
    assert conflicts == ["a.txt"]
    assert (fork_dir / "a.txt").read_text() == "by the agent\n" and (fork_dir / "keep.txt").exists()
    listed = server.api("GET", f"/api/sessions/{forked.session_id}")
    assert listed.status_code == 200 and listed.json()["work_dir"] == str(fork_dir)
    assert listed.json()["turns"] == 1


def test_serve_checkpoints_turns_them_on_for_every_session_and_a_session_can_refuse(serve):
    server = serve("text: hi", "text: hi", args=("--checkpoints",))
    on, off = server.create_session(), server.create_session(checkpoints=False)

    async def listing(session_id: str) -> tuple[bool, list[dict[str, Any]]]:
        async with sdk.Session.attach(url(server, session_id), server.token) as session:
            await session.prompt("hi")
            assert session.initialize_result is not None
            offered = session.initialize_result["capabilities"].get("supports_checkpoints") is True
            return offered, await session.checkpoints()

    offered, checkpoints = anyio.run(listing, on)
    assert offered and [c["kind"] for c in checkpoints] == ["turn", "end"]
    assert anyio.run(listing, off) == (False, [])
    refused = server.api("POST", "/api/sessions", json={"checkpoints": "yes"})
    assert refused.status_code == 422


@pytest.mark.usefixtures("bwrap")
def test_a_serve_session_runs_its_turns_in_an_overlay_the_sdk_commits(serve):
    server = serve(call("s", "Shell", {"command": "echo new > new.txt"}), "text: wrote it")
    work = server.sandbox.work

    async def main() -> tuple[str, Any]:
        remote = sdk.ServerSessions(server.base, server.token)
        stored = await remote.create(sandbox="workspace-write", overlay="ask", checkpoints=True, yolo=True)
        async with sdk.Session.attach(url(server, stored.id), server.token) as session:
            assert session.initialize_result is not None
            assert session.initialize_result["capabilities"]["supports_overlay"] is True
            await session.prompt("write")
            assert not (work / "new.txt").exists()  # pending in the overlay
            committed = await session.commit_overlay()
            return (work / "new.txt").read_text(), committed

    text, committed = anyio.run(main)
    assert text == "new\n" and [(f.path, f.status) for f in committed.files] == [("new.txt", "added")]
    assert committed.checkpoint is not None


def test_an_overlay_the_session_cannot_run_is_refused_at_creation(serve):
    server = serve("text: hi")
    no_sandbox = server.api("POST", "/api/sessions", json={"overlay": "ask"})
    assert no_sandbox.status_code == 422 and "sandbox=workspace-write" in no_sandbox.json()["detail"]
    unknown = server.api("POST", "/api/sessions", json={"overlay": "sometimes"})
    assert unknown.status_code == 422
    with pytest.raises(InvalidStatus) as refused:  # created on its socket, as fleets do
        connect(f"ws://127.0.0.1:{server.port}/ws/sessions/new?token={server.token}&overlay=sometimes")
    assert refused.value.response.status_code == 422
    assert b"overlay=sometimes" in refused.value.response.body
