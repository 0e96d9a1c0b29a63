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

ALWAYS_RESERVED_TOOL_NAMES = frozenset({"Agent"})
"""Names a client tool may not take although we do not offer the tool yet: the reference's
default agent always loads it, so it rejects them too. Any other name conflicts only with a
tool this session actually offers (`SearchWeb` without its service, or `ReadMediaFile` for a
model without media input, are free, as in the reference)."""

MEDIA_CAPABILITIES = frozenset({"image_in", "video_in"})
"""Model capabilities that make ReadMediaFile available."""
