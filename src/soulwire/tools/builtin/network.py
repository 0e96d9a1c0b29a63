"""The engine's own requests to the network on the model's behalf (FetchURL, SearchWeb and the
reference's web services): in a sandbox without network they leave it, so a person approves
each one first, as a Shell command asking for `sandbox_escape = "network"` would be."""

from __future__ import annotations

from soulwire.tools.base import ActionRequest, ToolContext, refused
from soulwire.tools.sandbox import BOUNDARY_NETWORK, leaving_action
from soulwire.wire.types import BriefDisplayBlock, ToolReturnValue


async def network_refusal(
    ctx: ToolContext, *, sender: str, action: str, what: str, scope_key: str
) -> ToolReturnValue | None:
    """None when the session may reach the network (no sandbox, or one with network on) or a
    person approved leaving the sandbox for it; else the refusal to return. `what` says what
    would be sent where, e.g. "Fetch `https://…`"."""
    sandbox = ctx.sandbox
    if sandbox is None or not sandbox.active or sandbox.network:
        return None
    return await refused(
        ctx,
        ActionRequest(
            tool_call_id=ctx.tool_call_id,
            sender=sender,
            action=leaving_action(action, "network"),
            description=f"{what} — it leaves the sandbox: {BOUNDARY_NETWORK}",
            display=[BriefDisplayBlock(text=f"Leaves the sandbox: {BOUNDARY_NETWORK}")],
            scope_key=scope_key,
            crossing=BOUNDARY_NETWORK,
        ),
    )
