"""Handshake, sessions, streaming and errors of `soulwire acp`."""

from __future__ import annotations

import pytest
from acp import RequestError

from tests.acp.conftest import run_agent, tool_script
from tests.wire_client import Sandbox

pytestmark = pytest.mark.anyio


async def test_initialize_advertises_what_the_agent_offers(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        reply = await agent.initialize()
        assert reply.protocol_version == 1
        caps = reply.agent_capabilities
        assert caps.load_session is True
        assert caps.prompt_capabilities.embedded_context is True
        assert caps.mcp_capabilities.http is True
        assert caps.session_capabilities.list is not None
        assert caps.session_capabilities.resume is not None
        assert reply.agent_info.name == "soulwire"
        assert [m.id for m in reply.auth_methods] == ["kimi-code"]


async def test_a_newer_client_version_is_answered_with_ours(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        reply = await agent.conn.initialize(protocol_version=7)
        assert reply.protocol_version == 1


async def test_prompt_streams_text_and_thinking_and_ends_the_turn(sandbox: Sandbox) -> None:
    script = "think: let me see\nthink: more\ntext: Hello\ntext: , world\nusage: input_other=10 output=5"
    async with run_agent(sandbox, script) as agent:
        await agent.initialize()
        session = await agent.new_session()
        reply = await agent.conn.prompt(
            session_id=session.session_id, prompt=[{"type": "text", "text": "hi"}]
        )
        assert reply.stop_reason == "end_turn"
        assert agent.editor.text("agent_thought_chunk") == "let me seemore"
        assert agent.editor.text() == "Hello, world"
        assert [u.content.text for u in agent.editor.of("agent_message_chunk")] == ["Hello", ", world"]
        assert reply.usage is not None and reply.usage.input_tokens == 10 and reply.usage.output_tokens == 5


async def test_sessions_have_distinct_ids_commands_modes_and_options(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        await agent.initialize()
        first, second = await agent.new_session(), await agent.new_session()
        assert first.session_id != second.session_id
        commands = await agent.wait_for_update("available_commands_update", first.session_id)
        assert commands and {"init", "compact", "clear", "yolo", "plan"} <= {
            c.name for c in commands[0].available_commands
        }
        compact = next(c for c in commands[0].available_commands if c.name == "compact")
        assert compact.input is not None and compact.input.root.hint
        assert first.modes.current_mode_id == "default"
        assert [m.id for m in first.modes.available_modes] == ["default", "plan", "yolo"]
        options = {o.id: o for o in first.config_options}
        assert options["mode"].current_value == "default"
        assert options["model"].current_value == "scripted"
        assert options["thinking"].current_value == "off"


async def test_cwd_of_the_session_is_the_work_dir_of_its_tools(sandbox: Sandbox) -> None:
    other = sandbox.root / "elsewhere"
    other.mkdir()
    (other / "marker.txt").write_text("in the other dir\n")
    async with run_agent(sandbox, tool_script("r1", "ReadFile", path="marker.txt"), "text: done") as agent:
        await agent.initialize()
        session = await agent.new_session(cwd=other)
        reply = await agent.conn.prompt(
            session_id=session.session_id, prompt=[{"type": "text", "text": "read"}]
        )
        assert reply.stop_reason == "end_turn"
        final = agent.editor.updates_of_call("r1")[-1]
        assert final.status == "completed"
        assert "in the other dir" in final.content[0].content.text


async def test_set_config_option_and_mode(sandbox: Sandbox) -> None:
    sandbox.capabilities = ["thinking"]
    async with run_agent(sandbox) as agent:
        await agent.initialize()
        session = await agent.new_session()
        reply = await agent.conn.set_config_option(
            config_id="thinking", session_id=session.session_id, value="on"
        )
        assert {o.id: o.current_value for o in reply.config_options}["thinking"] == "on"
        await agent.conn.set_session_mode(session_id=session.session_id, mode_id="plan")
        with pytest.raises(RequestError) as bad_mode:
            await agent.conn.set_session_mode(session_id=session.session_id, mode_id="turbo")
        assert bad_mode.value.code == -32602
        with pytest.raises(RequestError) as bad_model:
            await agent.conn.set_config_option(config_id="model", session_id=session.session_id, value="nope")
        assert bad_model.value.code == -32602


async def test_model_failure_is_a_json_rpc_error_and_the_agent_keeps_serving(sandbox: Sandbox) -> None:
    async with run_agent(sandbox, "error: 400 bad request from provider", "text: recovered") as agent:
        await agent.initialize()
        session = await agent.new_session()
        with pytest.raises(RequestError) as failure:
            await agent.conn.prompt(session_id=session.session_id, prompt=[{"type": "text", "text": "x"}])
        assert "bad request from provider" in str(failure.value)
        reply = await agent.conn.prompt(session_id=session.session_id, prompt=[{"type": "text", "text": "y"}])
        assert reply.stop_reason == "end_turn"
        assert "recovered" in agent.editor.text()


async def test_step_limit_is_max_turn_requests(sandbox: Sandbox) -> None:
    scripts = (tool_script("t1", "Glob", pattern="*"), "text: never")
    async with run_agent(sandbox, *scripts, args=("--max-steps-per-turn", "1")) as agent:
        await agent.initialize()
        session = await agent.new_session()
        reply = await agent.conn.prompt(
            session_id=session.session_id, prompt=[{"type": "text", "text": "go"}]
        )
        assert reply.stop_reason == "max_turn_requests"


async def test_unknown_session_is_a_clear_error(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        await agent.initialize()
        with pytest.raises(RequestError) as failure:
            await agent.conn.prompt(session_id="no-such-session", prompt=[{"type": "text", "text": "x"}])
        assert "Session not found: no-such-session" in str(failure.value)


async def test_image_prompts_follow_the_models_capabilities(sandbox: Sandbox) -> None:
    image = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    async with run_agent(sandbox) as agent:
        reply = await agent.initialize()
        assert reply.agent_capabilities.prompt_capabilities.image is False
        session = await agent.new_session()
        with pytest.raises(RequestError) as refused:
            await agent.conn.prompt(session_id=session.session_id, prompt=[image])
        assert refused.value.code == -32602
    sandbox.capabilities = ["image_in"]
    async with run_agent(sandbox, "text: a picture") as agent:
        reply = await agent.initialize()
        assert reply.agent_capabilities.prompt_capabilities.image is True
        session = await agent.new_session()
        answer = await agent.conn.prompt(
            session_id=session.session_id, prompt=[{"type": "text", "text": "see"}, image]
        )
        assert answer.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("variable", "image"), [("KIMI_MODEL_CAPABILITIES", False), ("SOULWIRE_MODEL_CAPABILITIES", True)]
)
async def test_the_capabilities_variable_counts_only_for_the_providers_the_engine_applies_it_to(
    sandbox: Sandbox, variable: str, image: bool
) -> None:
    """`KIMI_MODEL_CAPABILITIES` is a `kimi` provider's (the scripted model is not one);
    `SOULWIRE_MODEL_CAPABILITIES` any provider's: `initialize` offers images exactly when the
    engine would take them."""
    picture = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    async with run_agent(sandbox, "text: a picture", env={variable: "image_in"}) as agent:
        reply = await agent.initialize()
        assert reply.agent_capabilities.prompt_capabilities.image is image
        session = await agent.new_session()
        prompt = [{"type": "text", "text": "see"}, picture]
        if image:
            answer = await agent.conn.prompt(session_id=session.session_id, prompt=prompt)
            assert answer.stop_reason == "end_turn"
        else:
            with pytest.raises(RequestError) as refused:
                await agent.conn.prompt(session_id=session.session_id, prompt=prompt)
            assert refused.value.code == -32602


async def test_a_slash_command_that_changes_the_mode_is_announced(sandbox: Sandbox) -> None:
    async with run_agent(sandbox) as agent:
        await agent.initialize()
        session = await agent.new_session()
        await agent.conn.prompt(session_id=session.session_id, prompt=[{"type": "text", "text": "/yolo"}])
        assert [u.current_mode_id for u in agent.editor.of("current_mode_update")] == ["yolo"]
        options = agent.editor.of("config_option_update")[-1].config_options
        assert {o.id: o.current_value for o in options}["mode"] == "yolo"
        reply = await agent.conn.set_config_option(
            config_id="mode", session_id=session.session_id, value="plan"
        )
        assert {o.id: o.current_value for o in reply.config_options}["mode"] == "plan"


async def test_skills_are_offered_as_commands_and_run(sandbox: Sandbox) -> None:
    skill = sandbox.work / ".agents" / "skills" / "tidy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: tidy\ndescription: Tidy the imports\n---\nSort the imports.\n")
    async with run_agent(sandbox, "text: tidied") as agent:
        await agent.initialize()
        session = await agent.new_session()
        [update] = await agent.wait_for_update("available_commands_update", session.session_id)
        offered = {c.name: c for c in update.available_commands}
        assert {"skill:tidy", "skill:soulwire-help", "skill:skill-creator"} <= set(offered)
        assert offered["skill:tidy"].description == "Tidy the imports"
        reply = await agent.conn.prompt(
            session_id=session.session_id, prompt=[{"type": "text", "text": "/skill:tidy src/"}]
        )
        assert reply.stop_reason == "end_turn"
        assert agent.editor.text() == "tidied"
