"""The approval title's action as a person reads it (the web UI's util.js words it the same:
tests/js/util.test.js)."""

from soulwire.ui.shell.blocks import spoken_action


def test_a_delegated_acp_agents_kind_is_worded_for_a_person() -> None:
    assert spoken_action("acp:kimi:edit") == "edit files (ACP)"
    assert spoken_action("acp:kimi:execute") == "run a command (ACP)"
    assert spoken_action("acp:kimi:other") == "act (ACP)"
    assert spoken_action("run command") == "run command"
