"""Tool names that matter before any tool is loaded."""

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
    "EnterPlanMode",
    "ExitPlanMode",
)
"""The reference's default-agent tools; ours are a subset of them."""

MEDIA_CAPABILITIES = frozenset({"image_in", "video_in"})
"""Model capabilities that make ReadMediaFile available."""
