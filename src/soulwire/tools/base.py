"""The tool protocol, the context a tool runs with, and the toolset that dispatches calls.

Argument errors, unknown tools and exceptions become error results for the model, never a
crash of the turn (spec §4.14)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from soulwire.wire.types import ToolCall, ToolReturnValue, tool_error

if TYPE_CHECKING:
    from soulwire.tools.sandbox import SandboxPolicy

REJECTED_MESSAGE = (
    "The tool call is rejected by the user. "
    "Stop what you are doing and wait for the user to tell you how to proceed."
)
SUBAGENT_REJECTED_MESSAGE = (
    "The tool call is rejected by the user. Try a different approach to complete your task, or "
    "explain the limitation in your summary if no alternative is available. Do not retry the same "
    "tool call, and do not attempt to bypass this restriction through indirect means."
)
SUBAGENT_STATE_KEY = "subagent"
PLAN_FILE_KEY = "plan_file"
"""Session state key of the plan file: the one file a session in plan mode may write."""
"""Set in a sub-agent's tool state: a rejection there does not stop its turn (spec §4.11)."""


class ApprovalOutcome(NamedTuple):
    approved: bool
    feedback: str = ""
    refusal: str = ""
    """Set when a policy, not the user, refused (a sandbox escape nobody can approve): the
    message for the model."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ActionRequest:
    """What a tool asks before it acts: may `sender` do `action` (what the user sees:
    `description` and `display`) for call `tool_call_id`? The one shape of the question from the
    tool, through a sub-agent's tagging, to the approvals broker."""

    tool_call_id: str
    sender: str
    action: str
    description: str
    display: Sequence[Any] = ()
    scope_key: str | None = None
    """What an `approve_for_session` rule covers beside the action (the exact command, file …)."""
    confined: bool = False
    """The action stays inside the session's sandbox (approved without asking under
    `approval = "on-escape"`)."""
    crossing: str | None = None
    """The sandbox boundary the action would cross (network, writes outside the workspace …):
    only a person can approve it."""
    agent_id: str | None = None
    """The sub-agent asking, if any (set by the engine, never by a tool; spec §4.11)."""
    subagent_type: str | None = None


class Approver(Protocol):
    """Asks the user (or a policy) whether a tool may act. Implemented by the engine's broker."""

    async def request(self, request: ActionRequest, /) -> ApprovalOutcome: ...


class Notice(Protocol):
    """Something that happened outside a turn, for the model (`text`) and the client (`event`)."""

    @property
    def text(self) -> str: ...

    @property
    def event(self) -> Any: ...


class NoticeSource(Protocol):
    """Where the engine collects notices between steps (e.g. ended background tasks)."""

    def take_notices(self) -> Sequence[Notice]: ...


class StartedJob(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def status(self) -> str: ...


class BackgroundJobs(Protocol):
    """Runs engine work (a background sub-agent) as a background task: `job(output_path)` writes
    its output there; TaskList / TaskOutput / TaskStop see it like a command."""

    def start_job(
        self,
        job: Callable[[Path], Awaitable[None]],
        *,
        kind: str,
        description: str,
        timeout_s: int,
        tool_call_id: str,
    ) -> StartedJob: ...


class ClientTools(Protocol):
    """Calls a tool implemented by the Wire client (ToolCallRequest)."""

    async def call_external(self, tool_call_id: str, name: str, arguments: str | None) -> ToolReturnValue: ...


class FileAccess(Protocol):
    """Where the file tools read and write text when not the disk: an editor's buffers (ACP
    `fs/read_text_file`, `fs/write_text_file`), so that unsaved changes are what they see."""

    async def read_text(self, path: Path) -> str | None:
        """The file's text; None when the file does not exist."""
        ...

    async def write_text(self, path: Path, text: str) -> None:
        """Replace the file's text; raises OSError when it cannot."""
        ...


class CommandResult(NamedTuple):
    """How a command run elsewhere ended, and what it printed."""

    output: str
    returncode: int | None
    timed_out: bool = False
    truncated: bool = False


class CommandRunner(Protocol):
    """Runs a foreground Shell command somewhere else: an editor's terminal (ACP
    `terminal/*`), so the user watches it there. Cancelling the call kills the command."""

    async def run(
        self, argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float, tool_call_id: str
    ) -> CommandResult: ...


@dataclass(eq=False)  # compared by identity (and cheaper to define)
class ToolContext:
    """Everything a tool may use while it runs; passed explicitly, never global."""

    tool_call_id: str
    work_dir: Path
    approver: Approver
    client: ClientTools | None = None
    additional_dirs: Sequence[Path] = ()
    state: dict[str, Any] = field(default_factory=dict)
    sandbox: SandboxPolicy | None = None
    """The session's sandbox (None or mode `off`: none); Shell and the file tools obey it."""
    files: FileAccess | None = None
    """The editor's view of files, when a front end provides one (else the disk)."""
    terminal: CommandRunner | None = None
    """The editor's terminal for foreground commands, when a front end provides one."""
    rejected: bool = False
    """Set when the user rejected an action without feedback: the turn stops after the step."""


def rejection_result(ctx: ToolContext, feedback: str) -> ToolReturnValue:
    """The result a tool returns when its approval was refused."""
    if feedback:
        return tool_error(
            f"The tool call is rejected by the user. User feedback: {feedback}", brief=f"Rejected: {feedback}"
        )
    if ctx.state.get(SUBAGENT_STATE_KEY):
        return tool_error(SUBAGENT_REJECTED_MESSAGE, brief="Rejected by user")
    ctx.rejected = True
    return tool_error(REJECTED_MESSAGE, brief="Rejected by user")


async def refused(ctx: ToolContext, request: ActionRequest) -> ToolReturnValue | None:
    """Ask the user whether a tool may act: None when approved, else the result to return."""
    outcome = await ctx.approver.request(request)
    if outcome.approved:
        return None
    if outcome.refusal:
        return tool_error(outcome.refusal, brief="Sandbox escape refused")
    return rejection_result(ctx, outcome.feedback)


class Tool(Protocol):
    """A callable tool: a name, a description and JSON Schema parameters for the model."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]: ...

    async def run(self, arguments: str | None, ctx: ToolContext) -> ToolReturnValue: ...


class DescribedTool:
    """Base of a tool whose name, description and JSON Schema arrive at run time (from the
    client, or from an MCP server) rather than from a parameters model."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        self._name = name
        self._description = description
        self._parameters = parameters

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:
        return self._parameters


def parse_arguments(arguments: str | None) -> Any:
    """Decode the model's JSON argument string (null/empty → {}); raises ValueError."""
    if arguments is None or not arguments.strip():
        return {}
    return json.loads(arguments)


def invalid_arguments(kind: str, detail: str) -> ToolReturnValue:
    return tool_error(f"Error {kind} JSON arguments: {detail}", brief="Invalid arguments")


def object_arguments(arguments: str | None) -> dict[str, Any] | ToolReturnValue:
    """The model's arguments decoded as a JSON object, or the error result to return."""
    try:
        value = parse_arguments(arguments)
    except ValueError as exc:
        return invalid_arguments("parsing", str(exc))
    if not isinstance(value, dict):
        return invalid_arguments("validating", "the arguments must be a JSON object")
    return value


async def approved_object_arguments(
    arguments: str | None, ctx: ToolContext, *, action: str, description: str, confined: bool = False
) -> dict[str, Any] | ToolReturnValue:
    """What a tool that runs something outside the engine (a plugin command, an MCP server)
    does first: its arguments decoded as a JSON object, then the user's approval asked
    (`confined`: it runs in the session's sandbox). The object, or the error or refusal to
    return as the tool's result."""
    value = object_arguments(arguments)
    if isinstance(value, ToolReturnValue):
        return value
    name = action.split(":", 1)[-1]
    request = ActionRequest(
        tool_call_id=ctx.tool_call_id, sender=name, action=action, description=description, confined=confined
    )
    refusal = await refused(ctx, request)
    return value if refusal is None else refusal


class ToolParams(BaseModel):
    """Base of the models that describe a tool's arguments. Their validators and schemas are
    built at first use: most sessions call few of the tools they offer."""

    model_config = ConfigDict(defer_build=True)


P = TypeVar("P", bound=BaseModel)


class TypedTool(Generic[P]):
    """A tool whose parameters are a pydantic model: the schema the model sees is generated
    from it and arguments are validated against it before `execute` runs."""

    name: ClassVar[str]
    description: ClassVar[str]
    params: type[P]

    @property
    def parameters(self) -> dict[str, Any]:
        return parameters_schema(self.params)

    async def run(self, arguments: str | None, ctx: ToolContext) -> ToolReturnValue:
        try:
            raw = parse_arguments(arguments)
        except ValueError as exc:
            return invalid_arguments("parsing", str(exc))
        try:
            params = self.params.model_validate(raw)
        except ValidationError as exc:
            return invalid_arguments("validating", _validation_text(exc))
        return await self.execute(params, ctx)

    async def execute(self, params: P, ctx: ToolContext) -> ToolReturnValue:
        raise NotImplementedError


@cache
def parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema the model sees for a parameters model: built once per model (tools
    are listed on every step) and without pydantic's generated `title`s, which only cost
    tokens. Shared between callers: do not mutate."""
    return _drop_titles(model.model_json_schema())


def _drop_titles(node: Any) -> Any:
    if isinstance(node, dict):
        cleaned: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs") and isinstance(value, dict):
                # Keys here are names (a property may be called `title`), not keywords.
                cleaned[key] = {name: _drop_titles(sub) for name, sub in value.items()}
            else:
                cleaned[key] = _drop_titles(value)
        return cleaned
    if isinstance(node, list):
        return [_drop_titles(item) for item in node]
    return node


def _validation_text(exc: ValidationError) -> str:
    parts: list[str] = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"])
        text = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {text}" if where else text)
    return "; ".join(parts)


def tool_failed(name: str, exc: BaseException) -> ToolReturnValue:
    """The result of a tool that raised: a plain sentence for the model (an exception's text
    and type are Python's internals, not something it can act on); the details, traceback
    included, go to the log file."""
    import logging

    from soulwire.logtags import FILE_ONLY

    logging.getLogger("soulwire.tools").error(
        "tool %s failed: %s: %s", name, type(exc).__name__, exc, exc_info=exc, extra={FILE_ONLY: True}
    )
    message = (
        f"Error running tool: `{name}` stopped on an internal error before it could finish "
        "(the engine's log has the details). Its effects, if any, are unknown: check before "
        "trying again, or try another way."
    )
    return tool_error(message, brief="Tool runtime error")


class Toolset:
    """The tools offered to the model, by name, with per-client visibility."""

    def __init__(self, tools: Sequence[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._hidden: set[str] = set()
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def set_hidden(self, names: set[str]) -> None:
        self._hidden = set(names)

    def visible(self) -> list[Tool]:
        return [t for n, t in self._tools.items() if n not in self._hidden]

    async def call(self, call: ToolCall, ctx: ToolContext) -> ToolReturnValue:
        tool = self._tools.get(call.function.name)
        if tool is None or call.function.name in self._hidden:
            message = f"Tool `{call.function.name}` not found"
            return tool_error(message, brief=message)
        try:
            return await tool.run(call.function.arguments, ctx)
        except Exception as exc:  # a broken tool must not end the turn
            return tool_failed(tool.name, exc)
