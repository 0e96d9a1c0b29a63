"""External tools of a task, as data: a name, a description, a JSON Schema for the arguments
and a shell command that runs the tool in the task's workspace. The model's arguments (JSON)
arrive on the command's stdin; what it prints is the tool's output, and a non-zero exit is an
error result. The engine validates the arguments against the schema before calling."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from soulwire.wire.types import ToolReturnValue, tool_error, tool_ok

OUTPUT_LIMIT = 50_000


class ExternalTool(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
    description: str = Field(min_length=1)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """The JSON Schema of the arguments (an object)."""
    command: str = Field(min_length=1)
    """Run with `sh -c` in the workspace; the arguments as JSON on stdin."""
    time_limit: float = Field(default=120.0, gt=0)

    def spec(self) -> dict[str, Any]:
        """The entry for `initialize.external_tools`."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


async def run_external_tool(
    tool: ExternalTool, arguments: str | None, work_dir: Path, env: dict[str, str]
) -> ToolReturnValue:
    """Run `tool` once; never raises (but for cancellation)."""
    data = (arguments or "{}").encode()
    done: subprocess.CompletedProcess[bytes] | None = None
    try:
        with anyio.move_on_after(tool.time_limit):
            done = await anyio.run_process(
                ["sh", "-c", tool.command],
                input=data,
                cwd=work_dir,
                env=env,
                stderr=subprocess.STDOUT,
                check=False,
            )
    except OSError as exc:
        return tool_error(f"cannot run {tool.name}: {exc}", brief="Tool error")
    if done is None:
        return tool_error(f"{tool.name} took longer than {tool.time_limit:g}s", brief="Timed out")
    output = done.stdout.decode("utf-8", errors="replace")[-OUTPUT_LIMIT:]
    if done.returncode != 0:
        return tool_error(f"{tool.name} exited with {done.returncode}", brief="Tool failed", output=output)
    return tool_ok(output=output)


def tool_answer(tools: list[ExternalTool], payload: dict[str, Any]) -> tuple[ExternalTool | None, str, str]:
    """The tool a `ToolCallRequest` names, its call id and its arguments."""
    name = str(payload.get("name", ""))
    found = next((t for t in tools if t.name == name), None)
    return found, str(payload.get("id", "")), str(payload.get("arguments") or "{}")


__all__ = ["ExternalTool", "run_external_tool", "tool_answer"]
