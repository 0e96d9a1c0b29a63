"""Drive the real `soulwire` shell inside tmux, the way a person uses it: keys go in with
`send-keys`, the screen comes back with `capture-pane`. Every wait polls the screen until
the expected text shows up (generous timeouts, no fixed sleeps as assertions)."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.system_tools import require
from tests.wire_client import Sandbox

pytestmark = pytest.mark.tui
WAIT_S = 20.0
_COUNTER = itertools.count()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/tui/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.tui)


class Tmux:
    """One tmux server (private socket) with one pane running `soulwire`."""

    def __init__(self, sandbox: Sandbox, *, width: int = 100, height: int = 40) -> None:
        self.sandbox = sandbox
        self.socket = f"soulwire-tui-{os.getpid()}-{next(_COUNTER)}"
        self.width, self.height = width, height
        self.started = False

    def tmux(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {out.stderr}")
        return out.stdout

    def start(self, *args: str, env: dict[str, str] | None = None, work: Path | None = None) -> Tmux:
        """Run `soulwire --config-file … --work-dir … ARGS`; when it ends the pane prints
        `EXIT=<status>` and stays open, so the test can read the restored terminal."""
        self.sandbox.write()
        work = work or self.sandbox.work
        argv = [
            sys.executable,
            "-m",
            "soulwire",
            "--config-file",
            str(self.sandbox.config_path),
            "--work-dir",
            str(work),
            *args,
        ]
        environment = {**self.sandbox.env(), "TERM": "xterm-256color", **(env or {})}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items() if "\n" not in v)
        command = (
            f"cd {shlex.quote(str(work))} && env -i {exports} {shlex.join(argv)}; echo EXIT=$?; sleep 600"
        )
        if self.started:
            self.tmux("respawn-pane", "-k", "-t", "t", command)
        else:
            size = ["-x", str(self.width), "-y", str(self.height)]
            self.tmux("new-session", "-d", "-s", "t", *size, command)
            self.tmux("set-option", "-t", "t", "history-limit", "10000")
            self.started = True
        return self

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "t", "-l", text)

    def paste(self, text: str) -> None:
        """A paste as a terminal delivers it: bracketed, when the application asked for that."""
        self.tmux("set-buffer", "-b", "p", text)
        self.tmux("paste-buffer", "-p", "-d", "-b", "p", "-t", "t")

    def screen(self, *, history: bool = False, escapes: bool = False) -> str:
        args = ["capture-pane", "-p", "-t", "t"]
        if history:
            args += ["-S", "-", "-J"]
        if escapes:
            args.append("-e")
        return self.tmux(*args)

    def wait_for(
        self, pattern: str, *, timeout: float = WAIT_S, history: bool = False, escapes: bool = False
    ) -> str:
        """Poll until `pattern` (a regex) is on the screen; returns the screen."""
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen(history=history, escapes=escapes)
            if regex.search(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not on the screen after {timeout} s:\n{text}")
            time.sleep(0.1)

    def wait_until(
        self, check: Callable[[str], bool], what: str, *, timeout: float = WAIT_S, interval: float = 0.1
    ) -> str:
        """The screen once `check` accepts it (`interval`: seconds between looks; 0 to catch a
        passing moment)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if check(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not seen after {timeout} s:\n{text}")
            time.sleep(interval)

    def ready(self, model: str = "scripted_echo") -> str:
        """The prompt is painted and the engine has loaded (the status line names the model)."""
        return self.wait_for(model)

    def flags(self, *names: str) -> list[str]:
        return self.tmux("display-message", "-p", "-t", "t", " ".join(f"#{{{n}}}" for n in names)).split()

    def close(self) -> None:
        self.tmux("kill-server", check=False)
        socket_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (socket_dir / self.socket).unlink(missing_ok=True)  # tmux may leave the socket file


@pytest.fixture
def tmux_shell(tmp_path: Path) -> Iterator[Callable[..., Tmux]]:
    require("tmux")  # the shell tests drive a real terminal
    opened: list[Tmux] = []

    def open_shell(*scripts: str, width: int = 100, height: int = 40, **config: Any) -> Tmux:
        sandbox = Sandbox(tmp_path)
        sandbox.scripts = list(scripts)
        sandbox.config_extra = config
        shell = Tmux(sandbox, width=width, height=height)
        opened.append(shell)
        return shell

    yield open_shell
    for shell in opened:
        shell.close()


def wire_records(share: Path) -> list[dict[str, Any]]:
    """Every message recorded in the (single) session's wire.jsonl under `share`."""
    out: list[dict[str, Any]] = []
    for path in sorted(share.glob("sessions/*/*/wire.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if "message" in record:
                out.append(record["message"])
    return out


def user_inputs(share: Path) -> list[Any]:
    return [m["payload"]["user_input"] for m in wire_records(share) if m["type"] == "TurnBegin"]


def wait_for_file(check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen after {timeout} s")
        time.sleep(0.1)


def tool_call(call_id: str, name: str, **arguments: Any) -> str:
    """A scripted model step that calls one tool."""
    payload = {"id": call_id, "name": name, "arguments": json.dumps(arguments)}
    return "tool_call: " + json.dumps(payload)
