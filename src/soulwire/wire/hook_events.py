"""The hook event names of the protocol (spec §4.12): `initialize.hooks.supported_events`,
`HookRequest.event`, the `event` of a `[[hooks]]` config entry. Stdlib only: the start-up
path reports them before anything heavy is loaded."""

HOOK_EVENTS: tuple[str, ...] = (
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "Stop", "StopFailure",
    "SessionStart", "SessionEnd", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
    "Notification",
)  # fmt: skip
