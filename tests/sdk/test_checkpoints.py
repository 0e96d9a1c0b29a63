"""Checkpoints from the SDK against the real engine: Options(checkpoints=True), the list, a
turn's changes, rewind (refused by a hand edit with RewindConflictError, forced, undone) and a
fork with its own work dir; with checkpoints off the calls say so."""

from __future__ import annotations

import pytest

import soulwire.sdk as sdk

from .conftest import Engine
from .test_engines import call

pytestmark = pytest.mark.anyio


async def test_checkpoints_rewind_undo_and_fork(soulwire: Engine, tmp_path):
    work = soulwire.sandbox.work
    scripts = (
        call("w", "WriteFile", {"path": "a.txt", "content": "by the agent\n"}),
        "text: one",
        call("s", "Shell", {"command": "rm keep.txt && chmod +x run.sh"}),
        "text: two",
    )
    options = soulwire.options(*scripts, yolo=True, checkpoints=True)
    work.mkdir(parents=True, exist_ok=True)
    (work / "keep.txt").write_text("kept\n")
    (work / "run.sh").write_text("true\n")
    async with sdk.Session(**options) as session:
        await session.prompt("write")
        await session.prompt("shell")
        assert [c["kind"] for c in await session.checkpoints()] == ["turn", "step", "end"] * 2
        one = await session.changes(1)
        assert [(f.path, f.status) for f in one.files] == [("a.txt", "added")]
        assert one.files[0].diff is not None and "+by the agent\n" in one.files[0].diff
        two = await session.changes(2)
        assert {(f.path, f.status) for f in two.files} == {("keep.txt", "deleted"), ("run.sh", "mode")}

        (work / "a.txt").write_text("by hand\n")
        with pytest.raises(sdk.RewindConflictError) as refused:
            await session.rewind(1)
        assert refused.value.paths == ["a.txt"]
        rewound = await session.rewind(1, force=True)
        assert rewound.forced == ["a.txt"] and not (work / "a.txt").exists()
        assert (work / "keep.txt").read_text() == "kept\n" and not (work / "run.sh").stat().st_mode & 0o100
        undone = await session.rewind(undo=True)
        assert undone.undo_of == rewound.id and (work / "a.txt").read_text() == "by hand\n"

        forked = await session.fork(1, work_dir=tmp_path / "fork")
        assert (tmp_path / "fork" / "a.txt").read_text() == "by the agent\n"
        assert (tmp_path / "fork" / "keep.txt").exists() and not (work / "keep.txt").exists()
        assert forked.session_id != session.id


async def test_with_checkpoints_off_the_calls_say_so(soulwire: Engine):
    async with sdk.Session(**soulwire.options("text: hi")) as session:
        await session.prompt("hi")
        assert await session.checkpoints() == []
        with pytest.raises(sdk.InvalidStateError) as off:
            await session.rewind(1)
        assert off.value.data == {"reason": "checkpoints_off"}


def test_the_blocking_session_has_the_same_calls(soulwire: Engine):
    from soulwire.sdk import sync

    work = soulwire.sandbox.work
    options = soulwire.options(
        call("w", "WriteFile", {"path": "b.txt", "content": "b\n"}), "text: ok", yolo=True, checkpoints=True
    )
    with sync.SyncSession(**options) as session:
        assert session.prompt("write b").wait().status == "finished"
        assert [c["kind"] for c in session.checkpoints()] == ["turn", "step", "end"]
        assert [f.path for f in session.changes(1).files] == ["b.txt"]
        assert session.rewind(1, context=False).restored == ["b.txt"] and not (work / "b.txt").exists()
        assert session.fork(1).session_id


async def test_an_overlay_turn_is_committed_or_discarded_from_the_sdk(soulwire: Engine, bwrap: None):
    work = soulwire.sandbox.work
    scripts = (
        call("s", "Shell", {"command": "echo one > one.txt && rm keep.txt"}),
        "text: one",
        call("s2", "Shell", {"command": "echo two > two.txt"}),
        "text: two",
    )
    options = soulwire.options(
        *scripts, yolo=True, checkpoints=True, sandbox="workspace-write", overlay="ask"
    )
    work.mkdir(parents=True, exist_ok=True)
    (work / "keep.txt").write_text("kept\n")
    async with sdk.Session(**options) as session:
        await session.prompt("one")
        assert sorted(p.name for p in work.iterdir()) == ["keep.txt"]  # pending in the overlay
        committed = await session.commit_overlay()
        assert [(f.path, f.status) for f in committed.files] == [
            ("keep.txt", "deleted"),
            ("one.txt", "added"),
        ]
        assert sorted(p.name for p in work.iterdir()) == ["one.txt"] and committed.checkpoint is not None
        await session.prompt("two")
        discarded = await session.discard_overlay()
        assert [(f.path, f.status) for f in discarded.files] == [("two.txt", "added")]
        assert sorted(p.name for p in work.iterdir()) == ["one.txt"]
