"""The hook event names of the protocol (spec §4.12): `initialize.hooks.supported_events`,
`HookRequest.event`, the `event` of a `[[hooks]]` config entry. Stdlib only: the start-up
path reports them before anything heavy is loaded."""

HOOK_EVENTS: tuple[str, ...] = (
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "Stop", "StopFailure",
    "SessionStart", "SessionEnd", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
    "Notification",
)  # fmt: skip
AMENDABLE_EVENTS: tuple[str, ...] = ("PreToolUse",)
"""Soulwire extension: events whose client hooks may answer `updated_input` (the tool then runs
with those arguments). Announced as `hooks.updated_input` in the `initialize` result."""
