"""Drive the real `soulwire acp` as an editor does: through the official SDK's client side
(`acp.spawn_agent_process`, i.e. `connect_to_agent` over the child's pipes), with the scripted
offline model."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    Implementation,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from tests.server.conftest import serve  # noqa: F401  (the real `soulwire serve`, for the WebSocket tests)
from tests.wire_client import Sandbox, WireProcess

WAIT_S = 20.0


def tool_script(call_id: str, name: str, **arguments: Any) -> str:
    """A model step that calls one tool."""
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": json.dumps(arguments)})


@dataclass
class Editor:
    """The client side: records every update and answers permission requests from `answers`
    (option ids, or "cancelled"); with no answer queued it waits for one."""

    updates: list[tuple[str, Any]] = field(default_factory=list)
    permissions: list[Any] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    asked: anyio.Event = field(default_factory=anyio.Event)
    answer_given: anyio.Event = field(default_factory=anyio.Event)
    files: dict[str, str] = field(default_factory=dict)
    terminals: dict[str, dict[str, Any]] = field(default_factory=dict)
    extensions: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Soulwire's `_soulwire/redraw` (the SDK strips the `_`): as an editor that offers
        `_meta.soulwire.redraw` would, the session's view is cleared; its replay follows."""
        self.extensions.append((method, params))
        if method == "soulwire/redraw":
            self.updates[:] = [(s, u) for s, u in self.updates if s != params.get("sessionId")]

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        self.permissions.append(tool_call)
        self.asked.set()
        while not self.answers:
            await self.answer_given.wait()
            self.answer_given = anyio.Event()
        answer = self.answers.pop(0)
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> Any:
        """An open buffer (unsaved text) when the test put one in `files`, else an error."""
        if path not in self.files:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.files[path])

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        self.files[path] = content
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: Any = None,
        cwd: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """A real process, as an editor's terminal would run it."""
        extra = {e.name: e.value for e in env or []}
        process = await asyncio.create_subprocess_exec(
            command, *(args or []), cwd=cwd, env={**os.environ, **extra},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        terminal_id = f"term-{len(self.terminals) + 1}"
        output = bytearray()

        async def pump() -> None:
            assert process.stdout is not None
            while chunk := await process.stdout.read(65536):
                output.extend(chunk)

        self.terminals[terminal_id] = {
            "process": process,
            "output": output,
            "reader": asyncio.ensure_future(pump()),
            "command": [command, *(args or [])],
            "events": [],
        }
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        terminal = self.terminals[terminal_id]
        code = await terminal["process"].wait()
        await terminal["reader"]
        return WaitForTerminalExitResponse(
            exit_code=code if code >= 0 else None, signal=None if code >= 0 else "SIGKILL"
        )

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        terminal = self.terminals[terminal_id]
        return TerminalOutputResponse(output=terminal["output"].decode(), truncated=False)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        terminal = self.terminals[terminal_id]
        terminal["events"].append("kill")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(terminal["process"].pid, signal.SIGKILL)
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        terminal = self.terminals[terminal_id]
        terminal["events"].append("release")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(terminal["process"].pid, signal.SIGKILL)
        return ReleaseTerminalResponse()

    def answer(self, option_id: str) -> None:
        self.answers.append(option_id)
        self.answer_given.set()

    def of(self, kind: str, session_id: str | None = None) -> list[Any]:
        return [
            u for s, u in self.updates if u.session_update == kind and (session_id is None or s == session_id)
        ]

    def text(self, kind: str = "agent_message_chunk", session_id: str | None = None) -> str:
        return "".join(u.content.text for u in self.of(kind, session_id) if u.content.type == "text")

    def tool_statuses(self, call_id: str) -> list[str]:
        return [u.status for u in self.updates_of_call(call_id) if u.status is not None]

    def updates_of_call(self, call_id: str) -> list[Any]:
        return [
            u
            for _, u in self.updates
            if u.session_update in ("tool_call", "tool_call_update")
            and u.tool_call_id.split("/")[-1] == call_id
        ]

    def clear(self) -> None:
        self.updates.clear()
        self.permissions.clear()


@dataclass
class Agent:
    conn: ClientSideConnection
    editor: Editor
    process: Any
    sandbox: Sandbox

    async def initialize(self, **capabilities: Any) -> Any:
        return await self.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(**capabilities),
            client_info=Implementation(name="pytest-editor", version="1"),
        )

    async def new_session(self, cwd: Path | None = None, **kwargs: Any) -> Any:
        return await self.conn.new_session(cwd=str(cwd or self.sandbox.work), mcp_servers=[], **kwargs)

    async def wait_for_update(self, kind: str, session_id: str) -> list[Any]:
        """Updates sent right after a response (they follow it on the pipe) once they came."""
        with anyio.fail_after(WAIT_S):
            while not self.editor.of(kind, session_id):
                await anyio.sleep(0.02)
        return self.editor.of(kind, session_id)


def acp_argv(sandbox: Sandbox, *extra: str, config_file: bool = True) -> list[str]:
    config = ["--config-file", str(sandbox.config_path)] if config_file else []
    return [sys.executable, "-m", "soulwire", "acp", *config, "--work-dir", str(sandbox.work), *extra]


@asynccontextmanager
async def run_agent(
    sandbox: Sandbox,
    *scripts: str,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    config_file: bool = True,
) -> AsyncIterator[Agent]:
    """`soulwire acp` driven by the SDK's client side; without `config_file` it reads the share
    dir's config.toml as an editor's plain `soulwire acp` does."""
    if scripts:
        sandbox.scripts = list(scripts)
    sandbox.write()
    editor = Editor()
    argv = acp_argv(sandbox, *args, config_file=config_file)
    with (sandbox.root / "stderr.log").open("ab") as stderr:
        async with (
            spawn_agent_process(
                editor,  # pyright: ignore[reportArgumentType]
                argv[0],
                *argv[1:],
                env={**sandbox.env(), **(env or {})},
                cwd=sandbox.work,
                transport_kwargs={"stderr": stderr.fileno()},
            ) as (conn, process)
        ):
            with anyio.fail_after(WAIT_S * 3):
                yield Agent(conn, editor, process, sandbox)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def raw_agent(sandbox: Sandbox) -> Any:
    """`soulwire acp` spoken to line by line (for malformed input)."""
    started: list[WireProcess] = []

    def start(*scripts: str, args: tuple[str, ...] = ()) -> WireProcess:
        if scripts:
            sandbox.scripts = list(scripts)
        sandbox.write()
        proc = WireProcess(acp_argv(sandbox, *args), sandbox.env(), sandbox.work)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.close()
