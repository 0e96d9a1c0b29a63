"""`Shell`: run one bash command in the work dir, after approval (spec §5.1, §9)."""

from __future__ import annotations

import shutil
import signal
from functools import cache
from pathlib import Path

from pydantic import Field, model_validator

from soulwire.config.process_env import child_environ
from soulwire.tools.base import ActionRequest, ToolContext, ToolParams, TypedTool, refused
from soulwire.tools.builtin.background import BackgroundTasks, TooManyTasks
from soulwire.tools.builtin.output import MAX_OUTPUT_CHARS, cap_line, clip_output
from soulwire.tools.builtin.process import Capture, run_captured
from soulwire.tools.sandbox import ESCAPE_BOUNDARIES, Escape, SandboxPolicy, leaving_action
from soulwire.wire.types import BriefDisplayBlock, ShellDisplayBlock, ToolReturnValue, tool_error, tool_ok

RUN_COMMAND = "run command"
RUN_BACKGROUND_COMMAND = "run background command"
MAX_FOREGROUND_TIMEOUT_S = 300
MAX_BACKGROUND_TIMEOUT_S = 86_400
_CAPTURE_BYTES = 4 * MAX_OUTPUT_CHARS  # per end; decoding and line caps shrink it further
_BRIEF_TAIL_LINES = 5
_BRIEF_LINE_CHARS = 200

# Nobody can type into the command: tools that would wait for input or open a pager or an
# editor should fail or print instead.
_NON_INTERACTIVE = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "DEBIAN_FRONTEND": "noninteractive",
    "PIP_NO_INPUT": "1",
    "NPM_CONFIG_YES": "true",
}


@cache
def _environment() -> dict[str, str]:
    return child_environ(_NON_INTERACTIVE)


@cache
def _bash() -> str:
    """bash's absolute path, looked up once rather than on every command."""
    return shutil.which("bash") or "bash"


class ShellParams(ToolParams):
    command: str = Field(min_length=1, description="The bash command line to run.")
    timeout: int = Field(
        default=60,
        ge=1,
        le=MAX_BACKGROUND_TIMEOUT_S,
        description=(
            "Seconds before the command (and everything it started) is killed: at most "
            f"{MAX_FOREGROUND_TIMEOUT_S} in the foreground, {MAX_BACKGROUND_TIMEOUT_S} in the background."
        ),
    )
    description: str = Field(
        default="", description="A few words on what the command is for (required in the background)."
    )
    run_in_background: bool = Field(
        default=False,
        description=(
            "Start the command as a background task and return at once with its task id; you are "
            "notified when it ends. Use it for servers, watchers and long builds."
        ),
    )

    @model_validator(mode="after")
    def _mode_rules(self) -> ShellParams:
        if self.run_in_background:
            if not self.description.strip():
                raise ValueError("description is required when run_in_background is true")
        elif self.timeout > MAX_FOREGROUND_TIMEOUT_S:
            raise ValueError(
                f"timeout must be at most {MAX_FOREGROUND_TIMEOUT_S} seconds for a foreground command; "
                "use run_in_background for longer ones"
            )
        return self


class SandboxedShellParams(ShellParams):
    """Shell's arguments in a sandboxed session: a command may ask to leave the sandbox."""

    sandbox_escape: Escape | None = Field(
        default=None,
        description=(
            "Commands run in a sandbox (workspace writable, the rest read-only, no network unless "
            "enabled, credentials hidden). Only when a command cannot work inside it, ask to leave "
            "it, with the user's approval: `network` for network access, `write` to write outside "
            "the workspace, `full` for no sandbox at all. Leave unset otherwise."
        ),
    )


# What commands print when the sandbox stopped them: the model is told it may ask to leave it.
_SANDBOX_SYMPTOMS = (
    "Read-only file system",
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
)


def sandboxed_command(
    policy: SandboxPolicy | None,
    command: str,
    *,
    cwd: Path,
    escape: Escape | None = None,
    outlive_engine: bool = False,
) -> tuple[list[str], dict[str, str] | None]:
    """The argv and environment `command` really runs with: wrapped in the session's
    sandbox, if any. The one place where Shell's commands (foreground and background) meet
    the sandbox."""
    argv, env = [_bash(), "-c", command], _environment()
    if policy is None:
        return argv, env
    wrapped = policy.command_argv(argv, cwd=cwd, escape=escape, outlive_engine=outlive_engine)
    return wrapped, policy.command_env(env, escape=escape)


def _sandbox_hint(ctx: ToolContext, escape: Escape | None, output: str) -> list[str]:
    policy = ctx.sandbox
    if policy is None or not policy.active or escape is not None:
        return []
    if not any(symptom in output for symptom in _SANDBOX_SYMPTOMS):
        return []
    return [
        f"The command ran in the {policy.describe()}. If it must reach the network or write outside "
        "the workspace, run it again with sandbox_escape set (the user is asked first)."
    ]


def _exit_text(code: int) -> tuple[str, str]:
    """(message for the model, brief headline) for a non-zero exit status."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"Command was terminated by {name}.", f"Terminated by {name}"
    return f"Command failed with exit code: {code}.", f"Failed with exit code: {code}"


async def _approve(
    ctx: ToolContext, action: str, description: str, command: str, escape: Escape | None
) -> ToolReturnValue | None:
    """Ask for the command; the user sees it exactly, and a session rule covers exactly it.
    In a sandbox the command is `confined`, unless it asks to leave: then the request names
    the boundary it would cross, and only a person can approve it."""
    policy = ctx.sandbox
    sandboxed = policy is not None and policy.active
    crossing = ESCAPE_BOUNDARIES[escape] if sandboxed and escape is not None else None
    display: list[BriefDisplayBlock | ShellDisplayBlock] = []
    if crossing is not None and escape is not None:
        action = leaving_action(action, escape)
        description = f"{description} — it leaves the sandbox: {crossing}"
        display.append(BriefDisplayBlock(text=f"Leaves the sandbox: {crossing}"))
    display.append(ShellDisplayBlock(language="bash", command=command))
    return await refused(
        ctx,
        ActionRequest(
            tool_call_id=ctx.tool_call_id,
            sender=Shell.name,
            action=action,
            description=description,
            display=display,
            scope_key=command,
            confined=sandboxed and crossing is None,
            crossing=crossing,
        ),
    )


class Shell(TypedTool[ShellParams]):
    name = "Shell"
    description = (
        "Run a bash command in the working directory and return its combined stdout and "
        "stderr. The command cannot read input (stdin is closed) and has no terminal, so use "
        "non-interactive flags. It is killed, with every process it started, when the timeout "
        "runs out. Long outputs are clipped in the middle. Prefer the file tools for reading, "
        "searching and editing files. Each command needs the user's approval."
    )
    params = ShellParams

    def __init__(self, tasks: BackgroundTasks | None = None, *, sandboxed: bool = False) -> None:
        self._tasks = tasks
        if sandboxed:
            self.params = SandboxedShellParams

    async def execute(self, params: ShellParams, ctx: ToolContext) -> ToolReturnValue:
        if params.run_in_background:
            return await self._start_background(params, ctx)
        command = params.command
        escape = _escape(params, ctx)
        refusal = await _approve(ctx, RUN_COMMAND, f"Run command `{command}`", command, escape)
        if refusal is not None:
            return refusal
        sandboxed = ctx.sandbox is not None and ctx.sandbox.active
        if ctx.terminal is not None and not sandboxed:  # a sandboxed command always runs here
            ran = await ctx.terminal.run(
                [_bash(), "-c", command],
                cwd=ctx.work_dir,
                env=dict(_NON_INTERACTIVE),
                timeout=params.timeout,
                tool_call_id=ctx.tool_call_id,
            )
            output, notes = clip_output(ran.output, ran.truncated, len(ran.output.encode()))
            timed_out, returncode = ran.timed_out, ran.returncode
        else:
            capture = Capture(head=_CAPTURE_BYTES, tail=_CAPTURE_BYTES)
            argv, env = sandboxed_command(ctx.sandbox, command, cwd=ctx.work_dir, escape=escape)
            finished = await run_captured(
                argv, cwd=ctx.work_dir, timeout=params.timeout, out=capture, env=env
            )
            output, notes = _model_output(capture)
            if finished.returncode:
                notes += _sandbox_hint(ctx, escape, output)
            timed_out, returncode = finished.timed_out, finished.returncode
        if timed_out:
            message = f"Command killed by timeout ({params.timeout}s)"
            return _failure(message, f"Killed by timeout ({params.timeout}s)", output, notes)
        code = returncode or 0
        if code != 0:
            message, headline = _exit_text(code)
            return _failure(message, headline, output, notes)
        return tool_ok(output=output, message=" ".join(["Command executed successfully.", *notes]))

    async def _start_background(self, params: ShellParams, ctx: ToolContext) -> ToolReturnValue:
        if self._tasks is None:
            return tool_error(
                "Background commands are not available in this session; run the command in the "
                f"foreground (timeout up to {MAX_FOREGROUND_TIMEOUT_S} s).",
                brief="Background not supported",
            )
        command = params.command
        escape = _escape(params, ctx)
        refusal = await _approve(
            ctx, RUN_BACKGROUND_COMMAND, f"Run background command `{command}`", command, escape
        )
        if refusal is not None:
            return refusal
        outlive = self._tasks.limits.keep_alive_on_exit  # (then bubblewrap is not tied to the engine)
        argv, env = sandboxed_command(
            ctx.sandbox, command, cwd=ctx.work_dir, escape=escape, outlive_engine=outlive
        )
        try:
            task = self._tasks.start(
                command,
                description=params.description.strip(),
                cwd=ctx.work_dir,
                timeout_s=params.timeout,
                tool_call_id=ctx.tool_call_id,
                argv=argv,
                env=env,
            )
        except TooManyTasks:
            limit = self._tasks.limits.max_running_tasks
            return tool_error(
                f"Too many background tasks are running ({limit}); wait for one to finish or stop "
                "one with TaskStop before starting another.",
                brief="Too many background tasks",
            )
        except OSError as exc:
            return tool_error(f"Failed to start background command: {exc}", brief="Start failed")
        output = "\n".join(
            [
                *task.summary_lines(),
                "automatic_notification: true",
                "next_step: You will be automatically notified when it completes.",
                "next_step: Use TaskOutput with this task_id for a non-blocking status/output snapshot. "
                "Only set block=true when you intentionally want to wait.",
                "next_step: Use TaskStop only if the task must be cancelled.",
            ]
        )
        value = tool_ok(output=output, message="Background task started.")
        value.display = [BriefDisplayBlock(text=f"Started {task.id}"), task.display()]
        return value


def _escape(params: ShellParams, ctx: ToolContext) -> Escape | None:
    """The sandbox escape the command asks for (only meaningful in a sandbox)."""
    if ctx.sandbox is None or not ctx.sandbox.active:
        return None
    return params.sandbox_escape if isinstance(params, SandboxedShellParams) else None


def _model_output(capture: Capture) -> tuple[str, list[str]]:
    return clip_output(capture.text(), bool(capture.dropped), capture.total)


def _failure(message: str, headline: str, output: str, notes: list[str]) -> ToolReturnValue:
    lines = output.rstrip("\n").splitlines()[-_BRIEF_TAIL_LINES:]
    tail = "\n".join(cap_line(line, _BRIEF_LINE_CHARS)[0] for line in lines)
    value = tool_error(" ".join([message, *notes]), output=output)
    value.display = [BriefDisplayBlock(text=f"{headline}\n{tail}" if tail else headline)]
    return value
