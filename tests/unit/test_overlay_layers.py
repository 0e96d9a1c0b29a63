"""The overlay's upper layer applied by `commit`, on a real kernel overlay: whatever commands
did in the merged view — a dir replaced by a file and the other way round, a symlink replaced,
a dir deleted and made again (opaque), deep new dirs, modes — the work dir afterwards is
exactly the merged view; `discard` leaves it untouched; `pending` names every changed file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from soulwire.sessions.checkpoints import overlay as layers
from soulwire.tools.overlay import Overlay, overlay_problem

SCRIPT = """
set -e
rm -r dir_to_file && echo now a file > dir_to_file
rm file_to_dir && mkdir -p file_to_dir/deep && echo inside > file_to_dir/deep/x
rm link_to_file && echo plain > link_to_file
rm -r remade && mkdir remade && echo fresh > remade/fresh
mkdir -p new/a/b && printf 'b\\000\\377' > new/a/b/blob && ln -s ../../keep.txt new/a/up
chmod 700 modes && chmod 600 modes/f
mv keep.txt kept.txt
"""


def snapshot(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", str(path.readlink()))
        elif path.is_dir():
            out[rel] = ("dir", path.lstat().st_mode & 0o777)
        else:
            out[rel] = (path.read_bytes(), path.lstat().st_mode & 0o777)
    return out


@pytest.fixture
def work(tmp_path: Path) -> Path:
    if (problem := overlay_problem()) is not None:
        pytest.fail(f"the overlay must work on the test machine: {problem}")
    work = tmp_path / "work"
    (work / "dir_to_file" / "sub").mkdir(parents=True)
    (work / "dir_to_file" / "sub" / "f").write_text("f\n")
    (work / "file_to_dir").write_text("file\n")
    (work / "target.txt").write_text("target\n")
    (work / "link_to_file").symlink_to("target.txt")
    (work / "remade").mkdir()
    (work / "remade" / "stale").write_text("stale\n")
    (work / "modes").mkdir()
    (work / "modes" / "f").write_text("m\n")
    (work / "keep.txt").write_text("keep\n")
    return work


def run_in_overlay(work: Path, storage: Path) -> tuple[Overlay, dict[str, object]]:
    overlay = Overlay.for_roots([work], storage)
    overlay.mount()
    try:
        subprocess.run([*overlay.enter_argv(work), "sh", "-c", SCRIPT], check=True, timeout=30)
        merged = snapshot(overlay.view(work))
    finally:
        overlay.unmount()
    return overlay, merged


def test_commit_makes_the_work_dir_the_merged_view(work: Path, tmp_path: Path):
    before = snapshot(work)
    overlay, merged = run_in_overlay(work, tmp_path / "layers")
    assert snapshot(work) == before
    changed = {f["path"]: f["status"] for f in layers.pending(overlay.storage, overlay.roots)}
    assert changed == {
        "dir_to_file": "added",
        "dir_to_file/sub/f": "deleted",
        "file_to_dir": "deleted",
        "file_to_dir/deep/x": "added",
        "keep.txt": "deleted",
        "kept.txt": "added",
        "link_to_file": "modified",
        "modes/f": "modified",
        "new/a/b/blob": "added",
        "new/a/up": "added",
        "remade/fresh": "added",
        "remade/stale": "deleted",
    }
    layers.commit(overlay.storage, overlay.roots)
    assert snapshot(work) == merged
    assert not (overlay.storage / "upper").exists() and not (overlay.storage / layers.MARKER).exists()


def test_discard_leaves_the_work_dir_alone(work: Path, tmp_path: Path):
    before = snapshot(work)
    overlay, _ = run_in_overlay(work, tmp_path / "layers")
    layers.discard(overlay.storage)
    assert snapshot(work) == before and layers.pending(overlay.storage, overlay.roots) == []


def test_changes_show_each_pending_file_as_a_turns_changes_are_shown(work: Path, tmp_path: Path):
    overlay, _ = run_in_overlay(work, tmp_path / "layers")
    found = {c.path: c for c in layers.changes(overlay.storage, overlay.roots)}
    pending = {f["path"]: f["status"] for f in layers.pending(overlay.storage, overlay.roots)}
    assert {p: c.status for p, c in found.items()} == {**pending, "modes/f": "mode"}  # its mode alone
    assert found["kept.txt"].diff == "--- /dev/null\n+++ b/kept.txt\n@@ -0,0 +1 @@\n+keep\n"
    assert found["keep.txt"].diff == "--- a/keep.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-keep\n"
    assert found["link_to_file"].kind == "file" and "--> target.txt\n" in (found["link_to_file"].diff or "")
    assert (found["modes/f"].old_mode, found["modes/f"].new_mode) == ("644", "600")
    assert found["new/a/b/blob"].binary is True and found["new/a/b/blob"].diff is None
    assert [c.diff for c in layers.changes(overlay.storage, overlay.roots, diffs=False)] == [None] * len(
        found
    )
