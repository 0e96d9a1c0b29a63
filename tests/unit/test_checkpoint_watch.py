"""A watched scan (inotify: only the directories with a change are read) finds exactly what a
full walk finds, after every kind of edit: files, modes, symlinks, new and removed directories,
directories moved or replaced by files, a changed `.gitignore`, and after the watch breaks."""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

import pytest

from soulwire.sessions.checkpoints.ignore import DEFAULT_EXCLUDES
from soulwire.sessions.checkpoints.scan import Limits, Manifest, Root, Scanner

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")

LIMITS = Limits(max_file_bytes=4096, max_checkpoint_bytes=1 << 30)


class Objects:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def has(self, digest: str) -> bool:
        return digest in self.data

    def put(self, digest: str, data: bytes) -> None:
        self.data[digest] = data


def _content(manifest: Manifest) -> dict[str, tuple[object, ...]]:
    """What two scans must agree on (inode and stat data aside)."""
    return {k: (e[0], e[1], e[2], e[5]) if e[0] == "f" else tuple(e) for k, e in manifest.items()}


def _full(work: Path) -> Manifest:
    scanner = Scanner([Root(str(work), "")], excludes=DEFAULT_EXCLUDES, limits=LIMITS, watch=False)
    return scanner.scan({}, Objects()).manifest


class Pair:
    """A watched scanner and the check that its every scan equals a fresh full walk."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.objects = Objects()
        self.scanner = Scanner([Root(str(work), "")], excludes=DEFAULT_EXCLUDES, limits=LIMITS)
        self.manifest: Manifest = {}

    def check(self) -> Manifest:
        self.manifest = self.scanner.scan(self.manifest, self.objects).manifest
        assert _content(self.manifest) == _content(_full(self.work))
        for entry in self.manifest.values():
            if entry[0] == "f":
                assert entry[5] in self.objects.data  # nothing reused that was never stored
        return self.manifest


def test_a_watched_scan_reads_only_changed_directories_and_finds_every_change(tmp_path):
    work = tmp_path / "w"
    for d in range(20):
        (work / f"d{d}").mkdir(parents=True)
        for f in range(10):
            (work / f"d{d}" / f"f{f}.txt").write_text(f"{d}/{f}\n")
            os.utime(work / f"d{d}" / f"f{f}.txt", (1e9, 1e9))  # older than the racy window
    pair = Pair(work)
    pair.check()
    assert pair.scanner.watched
    (work / "d3" / "f1.txt").write_text("changed\n")
    (work / "d7" / "new.bin").write_bytes(b"\x00\xff" * 10)
    result = pair.scanner.scan(pair.manifest, pair.objects)
    assert result.read_files == 2  # the two changed files, and nothing else hashed
    assert result.manifest["d3/f1.txt"][2] == len("changed\n")
    assert "d7/new.bin" in result.manifest
    pair.manifest = result.manifest
    pair.check()


def test_structural_edits_keep_the_watched_scan_exact(tmp_path):
    work = tmp_path / "w"
    (work / "a" / "b" / "c").mkdir(parents=True)
    (work / "a" / "b" / "c" / "deep.txt").write_text("deep\n")
    (work / "a" / "one.txt").write_text("one\n")
    (work / "keep.txt").write_text("keep\n")
    pair = Pair(work)
    pair.check()
    (work / "a" / "b" / "c" / "new").mkdir()
    (work / "a" / "b" / "c" / "new" / "x.txt").write_text("x\n")
    pair.check()
    shutil.rmtree(work / "a" / "b")
    pair.check()
    (work / "a" / "b").write_text("now a file\n")  # a removed directory's name as a file
    pair.check()
    (work / "a" / "b").unlink()
    (work / "a" / "b").mkdir()  # and back to a directory
    (work / "a" / "b" / "y.txt").write_text("y\n")
    pair.check()
    (work / "a").rename(work / "moved")  # a directory moved: a full walk, still exact
    pair.check()
    (work / "moved" / "one.txt").chmod(0o755)
    (work / "moved" / "link").symlink_to("one.txt")
    pair.check()
    (work / ".gitignore").write_text("moved/\n")  # what is kept changes below it
    pair.check()
    assert not any(k.startswith("moved/") for k in pair.manifest)
    (work / ".gitignore").write_text("")
    pair.check()
    assert "moved/one.txt" in pair.manifest


def test_a_file_over_the_cap_is_reported_by_every_scan_as_a_full_walk_does(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "big.bin").write_bytes(b"x" * (LIMITS.max_file_bytes + 1))
    pair = Pair(work)
    scanner = pair.scanner
    first = scanner.scan({}, pair.objects)
    second = scanner.scan(first.manifest, pair.objects)
    assert [p for p, _ in first.skipped] == [p for p, _ in second.skipped] == ["big.bin"]


def test_random_edit_sequences_agree_with_a_full_walk(tmp_path):
    rng = random.Random(20261202)
    work = tmp_path / "w"
    work.mkdir()
    pair = Pair(work)
    pair.check()
    for _ in range(150):
        files = [p for p in work.rglob("*") if p.is_file() and not p.is_symlink()]
        dirs = [work, *[p for p in work.rglob("*") if p.is_dir() and not p.is_symlink()]]
        op = rng.choice(["write", "write", "mkdir", "rm", "rmdir", "mv", "chmod", "link", "append"])
        try:
            if op == "write" or (not files and op in ("rm", "mv", "chmod", "append")):
                (rng.choice(dirs) / f"f{rng.randrange(30)}.txt").write_text(str(rng.random()))
            elif op == "append":
                with rng.choice(files).open("a") as handle:
                    handle.write("more\n")
            elif op == "mkdir":
                (rng.choice(dirs) / f"d{rng.randrange(8)}").mkdir(exist_ok=True)
            elif op == "rm":
                rng.choice(files).unlink()
            elif op == "rmdir" and len(dirs) > 1:
                shutil.rmtree(rng.choice(dirs[1:]))
            elif op == "mv":
                source = rng.choice(files + dirs[1:])
                target = rng.choice(dirs) / f"m{rng.randrange(30)}"
                if not target.exists() and not str(target).startswith(str(source) + "/"):
                    source.rename(target)
            elif op == "chmod":
                rng.choice(files).chmod(rng.choice([0o644, 0o755, 0o600]))
            elif op == "link":
                link = rng.choice(dirs) / f"l{rng.randrange(5)}"
                if not link.exists() and not link.is_symlink():
                    link.symlink_to("nowhere")
        except (FileExistsError, IsADirectoryError, NotADirectoryError):
            pass
        if rng.random() < 0.5:
            pair.check()
    pair.check()


def test_a_broken_watch_falls_back_to_full_walks(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    pair = Pair(work)
    pair.check()
    watch = pair.scanner._watch  # broken as a watch limit would
    assert watch is not None
    watch.close()
    watch._broken = True
    assert not pair.scanner.watched
    (work / "b.txt").write_text("b\n")
    assert "b.txt" in pair.check()


def test_the_recorded_log_replays_to_what_a_full_walk_finds(tmp_path):
    """A watched checkpoint records only the keys it touched; replaying the log must still give
    the whole tree at every checkpoint."""
    from soulwire.sessions.checkpoints.book import CheckpointBook
    from soulwire.sessions.memory import MemorySessionStore

    rng = random.Random(7)
    work = tmp_path / "w"
    (work / "a" / "b").mkdir(parents=True)
    for i in range(20):
        (work / ("a" if i % 2 else "a/b") / f"f{i}.txt").write_text(f"{i}\n")
    store = MemorySessionStore("s")
    book = CheckpointBook(store, str(work))
    for turn in range(1, 30):
        files = [p for p in work.rglob("*.txt") if p.is_file()]
        if rng.random() < 0.3 and files:
            rng.choice(files).unlink()
        elif rng.random() < 0.2:
            (work / "a" / f"n{turn}").mkdir()
            (work / "a" / f"n{turn}" / "x.txt").write_text("x")
        elif rng.random() < 0.1:
            shutil.rmtree(work / "a" / "b", ignore_errors=True)
        else:
            (work / "a" / f"f{rng.randrange(40)}.txt").write_text(str(rng.random()))
        book.take(turn=turn, kind="turn")
        assert book.scanner.watched
        fresh = CheckpointBook(store, str(work))  # reads the log back from the store
        replayed = fresh.manifest_at(len(fresh.records()) - 1)
        assert _content(replayed) == _content(_full(work))


def test_a_rewind_plans_from_the_changed_keys_what_a_full_compare_plans(tmp_path):
    """A rewind compares only the keys the checkpoints since its target changed and the keys a
    watched scan touched; for random edits (some by hand after the last checkpoint) that plan
    is the one a compare of the whole manifests makes, for every turn to go back to."""
    from soulwire.sessions.checkpoints.book import CheckpointBook
    from soulwire.sessions.checkpoints.restore import plan
    from soulwire.sessions.memory import MemorySessionStore

    rng = random.Random(39)
    work = tmp_path / "w"
    (work / "a" / "b").mkdir(parents=True)
    for i in range(30):
        (work / ("a" if i % 2 else "a/b") / f"f{i}.txt").write_text(f"{i}\n")
    book = CheckpointBook(MemorySessionStore("s"), str(work))
    compared = 0
    for turn in range(1, 16):
        book.take(turn=turn, kind="turn")
        for _ in range(rng.randrange(1, 4)):
            files = sorted(p for p in work.rglob("*.txt") if p.is_file())
            pick = rng.random()
            if pick < 0.25 and files:
                rng.choice(files).unlink()
            elif pick < 0.5 and files:
                rng.choice(files).chmod(rng.choice([0o644, 0o755]))
            else:
                (work / rng.choice(["a", "a/b"]) / f"f{rng.randrange(40)}.txt").write_text(str(rng.random()))
        book.take(turn=turn, kind="end")
        if rng.random() < 0.5:  # by hand, after the last checkpoint
            (work / "a" / f"hand{turn}.txt").write_text("mine\n")
        scanned = book._scan()
        keys = book._differing(-1, scanned)
        assert keys is not None  # a watched scan of the recorded state
        for back in book.turns():
            since = book.span(back).start
            target = book.manifest_at(since)
            full = plan(target, scanned.manifest, book.latest())
            assert plan(target, scanned.manifest, book.latest(), book._differing(since, scanned)) == full
            compared += bool(full.paths)
        book._record(scanned, turn=turn, kind="end")  # what the scan saw, recorded
    assert compared > 20


def test_a_watched_scan_looks_only_at_the_names_the_kernel_reported(tmp_path):
    """A change in a large directory costs the changed names, not the directory's size."""
    work = tmp_path / "w"
    work.mkdir()
    for i in range(300):
        (work / f"f{i:03d}.txt").write_text(f"{i}\n")
    pair = Pair(work)
    pair.check()
    (work / "f007.txt").write_text("seven\n")
    (work / "f100.txt").unlink()
    (work / "new.txt").write_text("new\n")
    result = pair.scanner.scan(pair.manifest, pair.objects)
    assert result.touched == {"f007.txt", "f100.txt", "new.txt"}
    assert result.read_files == 2
    pair.manifest = result.manifest
    pair.check()


def test_a_file_rewritten_within_the_racy_window_is_seen_by_the_next_watched_scan(tmp_path):
    """No re-read of recently modified files: the watch names every later write, even one of
    the same size within the same timestamp tick."""
    work = tmp_path / "w"
    work.mkdir()
    pair = Pair(work)
    pair.check()
    target = work / "hot.txt"
    for i in range(20):
        target.write_text(f"v{i % 10}\n")  # the same size every time
        assert pair.check()["hot.txt"][2] == 3
        result = pair.scanner.scan(pair.manifest, pair.objects)
        assert result.read_files == 0  # nothing changed since: nothing hashed again


def test_a_directory_removed_and_made_again_between_scans_is_read_again(tmp_path):
    work = tmp_path / "w"
    (work / "d").mkdir(parents=True)
    (work / "d" / "old.txt").write_text("old\n")
    pair = Pair(work)
    pair.check()
    shutil.rmtree(work / "d")
    (work / "d").mkdir()
    (work / "d" / "new.txt").write_text("new\n")
    assert set(pair.check()) == {"d/new.txt"}
    (work / "d" / "later.txt").write_text("later\n")  # the new directory is watched
    assert set(pair.check()) == {"d/new.txt", "d/later.txt"}


def test_quick_says_whether_the_next_scan_is_small_and_keeps_what_it_drained(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    pair = Pair(work)
    pair.check()
    assert pair.scanner.quick(4, 1024)  # nothing changed
    (work / "a.txt").write_text("changed\n")
    assert pair.scanner.quick(4, 1024)
    assert not pair.scanner.quick(4, 4)  # over the byte budget
    assert pair.check()["a.txt"][2] == len("changed\n")  # what quick drained was scanned
    for i in range(5):
        (work / f"n{i}.txt").write_text("n\n")
    assert not pair.scanner.quick(4, 1 << 20)  # over the name budget
    (work / "sub").mkdir()
    assert not pair.scanner.quick(64, 1 << 20)  # a new directory: a walk
    assert {"n0.txt", "n4.txt"} <= set(pair.check())
