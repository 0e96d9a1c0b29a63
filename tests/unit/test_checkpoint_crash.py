"""SIGKILL during a checkpoint or a rewind: every file is whole (old or new), the log and
the objects stay readable, and the next rewind finishes the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from soulwire.sessions.checkpoints.book import CheckpointBook
from soulwire.sessions.store import FileSessionStore

FILES = 40
SIZE = 2 << 20


def _content(i: int, version: str) -> bytes:
    return (f"{version}{i:04d}".encode() * (SIZE // 8))[:SIZE]


CHILD = """
import sys
from soulwire.sessions.checkpoints.book import CheckpointBook
from soulwire.sessions.store import FileSessionStore
from pathlib import Path
share, work, what = sys.argv[1:4]
book = CheckpointBook(FileSessionStore(Path(share), work, "s", protocol_version="1.3"), work)
print("ready", flush=True)
if what == "rewind":
    book.rewind(1, context=False, current_turn=1)
else:
    book.take(turn=2, kind="turn")
print("done", flush=True)
"""


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.0005)


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    share, work = tmp_path / "share", tmp_path / "work"
    work.mkdir(parents=True)
    for i in range(FILES):
        (work / f"f{i:03d}.bin").write_bytes(_content(i, "old_"))
    store = FileSessionStore(share, work, "s", protocol_version="1.3")
    book = CheckpointBook(store, str(work))
    book.take(turn=1, kind="turn")
    for i in range(FILES):
        (work / f"f{i:03d}.bin").write_bytes(_content(i, "new_"))
    book.take(turn=1, kind="end")
    store.close()
    return share, work


def _run_and_kill(share: Path, work: Path, what: str, started) -> None:
    with subprocess.Popen(  # (the with closes its stdout pipe)
        [sys.executable, "-c", CHILD, str(share), str(work), what], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        _wait_for(lambda: started() or child.poll() is not None, f"the {what} to start")
        os.kill(child.pid, signal.SIGKILL)
    assert child.returncode == -signal.SIGKILL, "the child ended before it could be killed"


def test_sigkill_during_a_rewind_leaves_whole_files_and_the_rewind_can_finish(tmp_path):
    landed = False
    for attempt in range(5):  # a busy machine may let the rewind finish before the kill
        share, work = _setup(tmp_path / str(attempt))
        old_first = _content(0, "old_")
        _run_and_kill(
            share,
            work,
            "rewind",
            lambda work=work, old_first=old_first: (work / "f000.bin").read_bytes() == old_first,
        )
        states = []
        for i in range(FILES):
            data = (work / f"f{i:03d}.bin").read_bytes()
            assert data in (_content(i, "old_"), _content(i, "new_")), f"f{i:03d}.bin is torn"
            states.append(data == _content(i, "old_"))
        landed = states[0] and not all(states)
        if landed:
            break
    assert landed, "the kill never landed mid-rewind"
    book = CheckpointBook(FileSessionStore(share, work, "s", protocol_version="1.3"), str(work))
    book.rewind(
        1, context=False, current_turn=1, force=True
    )  # files the killed run restored count as changed
    assert all((work / f"f{i:03d}.bin").read_bytes() == _content(i, "old_") for i in range(FILES))
    assert not [p for p in os.listdir(work) if not p.endswith(".bin")]  # no temporary file left behind


def test_sigkill_during_a_checkpoint_keeps_the_log_readable(tmp_path):
    share, work = _setup(tmp_path)
    for i in range(FILES):
        (work / f"f{i:03d}.bin").write_bytes(_content(i, "third"))
    packs = FileSessionStore(share, work, "s", protocol_version="1.3").dir / "checkpoints" / "packs"
    count = len(os.listdir(packs))
    _run_and_kill(share, work, "take", lambda: len(os.listdir(packs)) > count)
    book = CheckpointBook(FileSessionStore(share, work, "s", protocol_version="1.3"), str(work))
    assert [r["kind"] for r in book.checkpoints()][:2] == ["turn", "end"]
    book.take(turn=2, kind="turn")
    book.rewind(1, context=False, current_turn=2)
    assert all((work / f"f{i:03d}.bin").read_bytes() == _content(i, "old_") for i in range(FILES))
