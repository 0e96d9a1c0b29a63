"""A Soulwire turn in the terminal UI delegates to the reference `kimi acp` (its own scripted
model): kimi's write asks for approval, the person answers it in Soulwire's shell, and only
then is the file written; kimi's steps show under the Agent call as a native sub-agent's do."""

from __future__ import annotations

from collections.abc import Callable

from tests.acp.kimi import kimi_agent, needs_kimi
from tests.tool_calls import call
from tests.tui.conftest import Tmux, tool_call

pytestmark = needs_kimi
TURN_S = 90.0  # kimi-cli loads its runtime at its first prompt: seconds on a busy machine


def test_a_kimi_acp_sub_agent_writes_after_the_approval_answered_in_the_shell(
    tmux_shell: Callable[..., Tmux],
) -> None:
    shell = tmux_shell(
        tool_call("a1", "Agent", description="delegate", prompt="write the file", subagent_type="kimi"),
        "text: parent done",
    )
    kimi = kimi_agent(
        shell.sandbox.root,
        call("w1", "WriteFile", {"path": "from-kimi.txt", "content": "written by kimi\n"}),
        "text: kimi wrote from-kimi.txt",
    )
    shell.sandbox.config_extra = {"acp_agents": {"kimi": kimi}}
    shell.start()
    shell.ready()
    target = shell.sandbox.work / "from-kimi.txt"
    shell.type("ask kimi to write it")
    shell.keys("Enter")
    # the dialog and the diff above it (a capture may catch the terminal between the two)
    screen = shell.wait_until(
        lambda s: "Approve once" in s and "written by kimi" in s, "the approval with its diff", timeout=TURN_S
    )
    assert "kimi wants to edit files (ACP)" in screen and "asked by the kimi sub-agent" in screen
    # the diff, before the answer (its header's path is as long as pytest's temp dir: it may wrap)
    assert "from-kimi.txt" in "".join(screen.split())
    assert not target.exists()
    shell.keys("Enter")  # approve once (preselected)
    screen = shell.wait_for(r"^parent done\s*$", timeout=TURN_S, history=True)
    assert target.read_text() == "written by kimi\n"
    assert "approved once" in screen
    assert "↳ kimi:" in screen  # kimi's own tool call, folded under the Agent call
