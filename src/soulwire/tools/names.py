"""Names of the built-in tools, known without importing them (the start-up path checks
external tools for conflicts against this list)."""

BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "Agent",
    "AskUserQuestion",
    "SetTodoList",
    "Shell",
    "TaskList",
    "TaskOutput",
    "TaskStop",
    "ReadFile",
    "ReadMediaFile",
    "Glob",
    "Grep",
    "WriteFile",
    "StrReplaceFile",
    "SearchWeb",
    "FetchURL",
    "Think",
    "EnterPlanMode",
    "ExitPlanMode",
)

MEDIA_CAPABILITIES = frozenset({"image_in", "video_in"})
"""Model capabilities that make ReadMediaFile available."""
