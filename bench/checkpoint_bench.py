"""Workspace checkpoints on a real-sized repository (issue 39), side by side with git.

The benchmark makes a work dir of 20,000 files / ~200 MiB (text-like lines in 200
directories, a `.gitignore`, committed to a git repository) and measures, in process, with
the file session store on the same disk:

- `first`: the first checkpoint (every file read, hashed and stored);
- `unchanged`: a checkpoint of the unchanged tree (goal ≤ 30 ms);
- `changed50`: a checkpoint after 50 files changed (goal ≤ 60 ms);
- `rewind50`: a files-only rewind that puts 50 changed files back (goal ≤ 100 ms);
- `storage`: bytes the session's checkpoints grow by over 100 turns that each change 10
  files of 10 KiB (checkpoints at each turn's start and end; goal ≤ 12 MiB), for text-like
  and for incompressible (random) content;
- `step overhead`: the real engine (`soulwire --wire`, scripted model) running a turn of N
  WriteFile steps in the tree, checkpoints on vs off (goal: within 10%).

Beside each, the obvious alternative with git on the same tree, never touching the repo's
own index, refs or stash: a private index (`GIT_INDEX_FILE`) refreshed by `git add -A` and
written with `git write-tree` (the incremental snapshot), `git stash create` (which uses the
repo's index, as a user's tool would), and `git read-tree -m -u OLD NEW` for the rewind.

    python3 bench/checkpoint_bench.py [--files 20000] [--mib 200] [--repeat 7] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procfs import cpu_ns
from scripted_config import scripted_config

from soulwire.sessions.checkpoints.book import CheckpointBook
from soulwire.sessions.checkpoints.scan import Scanner
from soulwire.sessions.store import FileSessionStore

WORDS = [f"w{i:x}" for i in range(4096)] + ["def", "return", "import", "self", "class", "(", ")", ":"]


def text(rng: random.Random, size: int) -> bytes:
    """Text-like lines of `size` bytes (compresses like source code, ~3x)."""
    out: list[str] = []
    total = 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) + "\n"
        out.append(line)
        total += len(line)
    return "".join(out).encode()[:size]


def make_tree(root: Path, files: int, total_mib: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    per_file = total_mib * (1 << 20) // files
    dirs = max(1, files // 100)
    pool = text(rng, 8 << 20)  # files are slices of one text: quick to make, still distinct
    for i in range(files):
        directory = root / f"pkg{i % dirs:03d}" / f"mod{(i // dirs) % 10}"
        directory.mkdir(parents=True, exist_ok=True)
        size = min(len(pool) - 1, max(64, int(rng.gauss(per_file, per_file / 3))))
        start = rng.randrange(len(pool) - size)
        (directory / f"file{i:05d}.py").write_bytes(f"# file {i}\n".encode() + pool[start : start + size])
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "tree")


def git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    ).stdout.strip()


CPU: list[float] = []
"""The CPU time (user + system of this process) of each `timed` call: less sensitive than the
wall clock to a machine others are loading."""


def cpu_s() -> float:
    """CPU time of this process and of the children it waited for (git)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def timed(fn: Callable[[], Any]) -> float:
    cpu = cpu_s()
    started = time.perf_counter()
    fn()
    CPU.append((cpu_s() - cpu) * 1000)
    return (time.perf_counter() - started) * 1000


def median_ms(samples: list[float]) -> str:
    cpu = CPU[-len(samples) :]
    return (
        f"{statistics.median(samples):.1f} ms wall (min {min(samples):.1f}), "
        f"{statistics.median(cpu):.1f} ms CPU (min {min(cpu):.1f})"
    )


def all_files(root: Path) -> list[Path]:
    """The tree's source files (not git's own: a background `git gc` may be rewriting it)."""
    found: list[Path] = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d != ".git"]
        found += [Path(directory, n) for n in names if n.endswith(".py")]
    return sorted(found)


def change(files: list[Path], rng: random.Random, n: int) -> list[Path]:
    picked = rng.sample(files, n)
    for path in picked:
        with path.open("ab") as handle:
            handle.write(f"# changed {rng.random()}\n".encode())
    return picked


def du(path: Path) -> tuple[int, int]:
    """(apparent bytes, bytes on disk) under `path`."""
    apparent = disk = 0
    for p in path.rglob("*"):
        if p.is_file():
            st = p.stat()
            apparent += st.st_size
            disk += st.st_blocks * 512
    return apparent, disk


def bench_checkpoints(root: Path, share: Path, repeat: int, report: dict[str, Any], *, watch: bool) -> None:
    """`watch`: the scanner reads only the directories inotify names (the engine's default on
    Linux); without, every checkpoint walks the tree (one `lstat` per file)."""
    store = FileSessionStore(share, root, f"bench-{watch}", protocol_version="1.3")
    book = CheckpointBook(store, str(root))
    book.scanner = Scanner(book.roots, excludes=book.excludes, limits=book.limits, watch=watch)
    label = "" if watch else " (full walk, no inotify)"
    files = all_files(root)
    rng = random.Random(11)
    report["first" + label] = f"{timed(lambda: book.take(turn=1, kind='turn')):.0f} ms"
    book.take(turn=1, kind="end")  # settles the racy window's re-hashes
    samples = [timed(lambda: book.take(turn=1, kind="end")) for _ in range(repeat)]
    report["unchanged" + label] = median_ms(samples)
    samples = []
    for _ in range(repeat):
        change(files, rng, 50)
        samples.append(timed(lambda: book.take(turn=1, kind="step")))
    report["changed50" + label] = median_ms(samples)
    samples = []
    for turn in range(2, 2 + repeat):
        book.take(turn=turn, kind="turn")
        change(files, rng, 50)
        book.take(turn=turn, kind="end")
        samples.append(timed(lambda turn=turn: book.rewind(turn, context=False, current_turn=turn)))
    report["rewind50" + label] = median_ms(samples)
    store.close()


def bench_storage(root: Path, share: Path, random_content: bool) -> str:
    store = FileSessionStore(share, root, f"storage-{random_content}", protocol_version="1.3")
    book = CheckpointBook(store, str(root))
    book.take(turn=0, kind="turn")
    base = du(store.dir / "checkpoints")
    rng = random.Random(5)
    files = all_files(root)
    for turn in range(1, 101):
        book.take(turn=turn, kind="turn")
        for path in rng.sample(files, 10):
            path.write_bytes(rng.randbytes(10 * 1024) if random_content else text(rng, 10 * 1024))
        book.take(turn=turn, kind="end")
    apparent, disk = du(store.dir / "checkpoints")
    store.close()
    return f"{(apparent - base[0]) / (1 << 20):.2f} MiB ({(disk - base[1]) / (1 << 20):.2f} MiB on disk)"


def bench_git(root: Path, repeat: int, report: dict[str, Any], *, storage: bool = True) -> None:
    index = str(root.parent / "private-index")
    env = {"GIT_INDEX_FILE": index}
    files = all_files(root)
    rng = random.Random(13)

    def snapshot() -> str:
        git(root, "add", "-A", env=env)
        return git(root, "write-tree", env=env)

    report["git first (add -A + write-tree, private index)"] = f"{timed(snapshot):.0f} ms"
    report["git unchanged"] = median_ms([timed(snapshot) for _ in range(repeat)])
    samples = []
    for _ in range(repeat):
        change(files, rng, 50)
        samples.append(timed(snapshot))
    report["git changed50"] = median_ms(samples)
    report["git stash create, unchanged since the last"] = median_ms(
        [timed(lambda: git(root, "stash", "create")) for _ in range(repeat)]
    )
    samples = []
    for _ in range(repeat):
        old = snapshot()
        change(files, rng, 50)
        new = snapshot()
        samples.append(timed(lambda old=old, new=new: git(root, "read-tree", "-m", "-u", new, old, env=env)))
    report["git rewind50 (read-tree -m -u)"] = median_ms(samples)
    if not storage:
        return
    objects = root / ".git" / "objects"
    before = du(objects)
    for _ in range(100):
        snapshot()
        for path in rng.sample(files, 10):
            path.write_bytes(text(rng, 10 * 1024))
        snapshot()
    after = du(objects)
    report["git storage, 100 turns x 10 text files (loose objects)"] = (
        f"{(after[0] - before[0]) / (1 << 20):.2f} MiB ({(after[1] - before[1]) / (1 << 20):.2f} MiB on disk)"
    )


def process_cpu_ms(pid: int) -> float:
    """CPU time of a live process's threads so far (Linux /proc, the scheduler's nanoseconds)."""
    return cpu_ns(pid) / 1e6


def bench_engine(
    root: Path, tmp: Path, steps: int, repeat: int, report: dict[str, Any], label: str = ""
) -> None:
    scripts = [
        "tool_call: "
        + json.dumps(
            {
                "id": f"w{i}",
                "name": "WriteFile",
                "arguments": json.dumps({"path": f"out{i % 5}.txt", "content": f"step {i}\n"}),
            }
        )
        for i in range(steps)
    ] + ["text: done"]
    # Two turns: the first takes the session's first snapshot of the tree (once per session),
    # the second is timed. Modes alternate run by run so both see the same load.
    scripts = scripts + scripts
    by_mode: dict[str, list[float]] = {"off": [], "on": []}
    cpu_by_mode: dict[str, list[float]] = {"off": [], "on": []}
    for run in range(repeat):
        for mode in ("off", "on"):
            samples = by_mode[mode]
            home = tmp / f"home{label.strip().replace(' ', '-')}-{mode}-{run}"
            home.mkdir(parents=True)
            scripts_path = home / "scripts.json"
            scripts_path.write_text(json.dumps(scripts))
            config = scripted_config(scripts_path, checkpoints={"enabled": mode == "on"})
            (home / "config.json").write_text(json.dumps(config))
            env = {**os.environ, "HOME": str(home), "SOULWIRE_SHARE_DIR": str(home / "share")}
            argv = [
                sys.executable,
                "-m",
                "soulwire",
                "--wire",
                "--yolo",
                "--config-file",
                str(home / "config.json"),
                "--work-dir",
                str(root),
            ]
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": "i",
                        "method": "initialize",
                        "params": {"protocol_version": "1.10"},
                    }
                )
                + "\n"
            )
            proc.stdin.flush()
            while json.loads(proc.stdout.readline()).get("id") != "i":
                pass
            ask(proc, "warm")  # the first turn: the session's first snapshot
            cpu = process_cpu_ms(proc.pid)
            started = time.perf_counter()
            ask(proc, "p")
            samples.append((time.perf_counter() - started) * 1000 / steps)
            cpu_by_mode[mode].append((process_cpu_ms(proc.pid) - cpu) / steps)
            proc.stdin.close()
            proc.wait(timeout=60)
    for mode, samples in by_mode.items():
        CPU.extend(cpu_by_mode[mode])
        report[f"engine{label}: one WriteFile step, checkpoints {mode}"] = median_ms(samples)
    for what, table in (("wall", by_mode), ("engine CPU", cpu_by_mode)):
        ratios = [on / off for on, off in zip(table["on"], table["off"], strict=True) if off > 0]
        report[f"engine{label}: step {what} on/off (median of per-run ratios)"] = (
            f"{statistics.median(ratios):.3f} (runs: {', '.join(f'{r:.2f}' for r in ratios)})"
        )


def ask(proc: subprocess.Popen[str], request_id: str) -> None:
    """One prompt, answered."""
    assert proc.stdin is not None and proc.stdout is not None
    prompt = {"jsonrpc": "2.0", "id": request_id, "method": "prompt", "params": {"user_input": "go"}}
    proc.stdin.write(json.dumps(prompt) + "\n")
    proc.stdin.flush()
    while json.loads(proc.stdout.readline()).get("id") != request_id:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20, help="WriteFile steps per engine turn")
    parser.add_argument("--dir", help="where to build the tree (default: a temporary dir)")
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--engine-only", action="store_true", help="only the step overhead, on vs off")
    parser.add_argument("--skip-storage", action="store_true", help="no 100-turn storage runs")
    parser.add_argument(
        "--engine-files",
        default="",
        help="also measure the step overhead on trees of these sizes (comma-separated file "
        "counts, 1 MiB per 100 files), in the same run: `--engine-files 2000,20000`",
    )
    args = parser.parse_args()
    tmp = Path(args.dir or tempfile.mkdtemp(prefix="ckpt-bench-"))
    report: dict[str, Any] = {"files": args.files, "MiB": args.mib}
    try:
        root = tmp / "tree"
        started = time.perf_counter()
        make_tree(root, args.files, args.mib)
        report["tree built in"] = f"{time.perf_counter() - started:.1f} s"
        sizes = [int(n) for n in args.engine_files.split(",") if n.strip()]
        if args.engine_only and not sizes:
            bench_engine(root, tmp, args.steps, args.repeat, report)
        for size in sizes:  # each size's off and on runs alternate; the sizes follow each other
            other = root if size == args.files else tmp / f"tree-{size}"
            if other != root:
                make_tree(other, size, max(1, size // 100))
            bench_engine(other, tmp, args.steps, args.repeat, report, f" ({size} files)")
        if not args.engine_only:
            bench_checkpoints(root, tmp / "share", args.repeat, report, watch=True)
            bench_checkpoints(root, tmp / "share", args.repeat, report, watch=False)
            if not args.skip_storage:
                text_storage = bench_storage(root, tmp / "share", False)
                report["storage, 100 turns x 10 text files of 10 KiB"] = text_storage
                report["storage, 100 turns x 10 random files of 10 KiB"] = bench_storage(
                    root, tmp / "share", True
                )
            if not args.skip_engine and not sizes:
                bench_engine(root, tmp, args.steps, max(3, args.repeat // 2), report)
            bench_git(root, args.repeat, report, storage=not args.skip_storage)
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    for key, value in report.items():
        print(f"{key:58} {value}")


if __name__ == "__main__":
    main()
