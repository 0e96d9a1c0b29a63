"""Skills and flows over the real engine: discovery in every place the spec lists (project
directories up to the git root, the user's, `extra_skill_dirs`, built-ins), `--skills-dir`
replacing project and user discovery, broken skills reported once and skipped, `/skill:<name>`
as a plain turn with the skill text, `/flow:<name>` and Ralph mode as nested turns."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.wire_client import Sandbox, WireProcess, event_types, payloads

BUILTIN = {"skill:skill-creator", "skill:soulwire-help"}
FLOW_SKILL = """---
name: ship-it
description: Write, test, ship.
type: flow
---
# Ship it

```mermaid
flowchart TD
    A([BEGIN]) --> B[Write the change]
    B --> C{Do the tests pass?}
    C -->|yes| D([END])
    C -->|no| B
```
"""


def write_skill(directory: Path, name: str, description: str, body: str = "Do it well.") -> Path:
    path = directory / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")
    return path


def layout(sandbox: Sandbox) -> Path:
    """A git repository with the work dir two levels below its root, and skills everywhere."""
    repo = sandbox.root / "repo"
    sandbox_work = repo / "packages" / "app"
    sandbox_work.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    write_skill(repo / ".agents" / "skills", "root-skill", "From the repository root")
    write_skill(repo / "packages" / ".claude" / "skills", "middle-skill", "From a level between")
    write_skill(sandbox_work / ".kimi" / "skills", "near-skill", "From the work dir")
    write_skill(sandbox.home / ".kimi" / "skills", "user-skill", "From the user's kimi dir")
    flat = sandbox.home / ".agents" / "skills" / "flat-skill.md"
    flat.parent.mkdir(parents=True)
    flat.write_text("A flat skill: the first line is its description.\n")
    write_skill(repo / "team-skills", "extra-skill", "From extra_skill_dirs")
    # Outside the repository: never looked at.
    write_skill(sandbox.root / ".agents" / "skills", "outside-skill", "Above the git root")
    # Broken ones: each reported once by name and reason, none stops the engine.
    write_skill(repo / ".agents" / "skills", "bad-name", "x").write_text("---\nname: has space\n---\nbody\n")
    (repo / ".agents" / "skills" / "unclosed" / "SKILL.md").parent.mkdir()
    (repo / ".agents" / "skills" / "unclosed" / "SKILL.md").write_text("---\nname: unclosed\nbody\n")
    bad_flow = repo / ".agents" / "skills" / "bad-flow" / "SKILL.md"
    bad_flow.parent.mkdir()
    bad_flow.write_text("---\nname: bad-flow\ntype: flow\n---\n```mermaid\nA[BEGIN] --> B[work]\n```\n")
    bad_yaml = repo / ".agents" / "skills" / "bad-yaml" / "SKILL.md"
    bad_yaml.parent.mkdir()
    bad_yaml.write_text("---\nname: bad-yaml\ndescription: [unclosed\n---\nbody\n")
    sandbox.config_extra = {"extra_skill_dirs": ["team-skills"]}
    return sandbox_work


def start(sandbox: Sandbox, work: Path, *scripts: str, args: tuple[str, ...] = ()) -> WireProcess:
    sandbox.scripts = list(scripts)
    sandbox.write()
    argv = [*sandbox.argv(*args)]
    argv[argv.index("--work-dir") + 1] = str(work)
    return WireProcess(argv, sandbox.env(), work)


def command_names(reply: dict[str, Any]) -> list[str]:
    return [c["name"] for c in reply["result"]["slash_commands"]]


def test_skills_are_found_everywhere_the_spec_lists_and_broken_ones_are_reported_once(sandbox):
    work = layout(sandbox)
    wire = start(sandbox, work)
    early = wire.initialize(protocol_version="1.10", client={"name": "t"})  # the lean start-up path
    late = wire.initialize(protocol_version="1.10", external_tools=[])  # the full server
    assert command_names(early) == command_names(late)
    names = command_names(early)
    assert names[:5] == ["init", "compact", "clear", "yolo", "plan"]
    skills = {n for n in names if n.startswith("skill:")}
    assert skills == BUILTIN | {
        "skill:root-skill", "skill:middle-skill", "skill:near-skill", "skill:user-skill",
        "skill:flat-skill", "skill:extra-skill",
    }  # fmt: skip
    described = {c["name"]: c["description"] for c in early["result"]["slash_commands"]}
    assert described["skill:flat-skill"] == "A flat skill: the first line is its description."
    wire.close()
    problems = [line for line in wire.stderr_lines if "skipped skill" in line]
    assert len(problems) == 4, problems
    text = "".join(problems)
    assert '"bad-name"' in text and "'has space' cannot be a command" in text
    assert '"unclosed"' in text and "no closing `---`" in text
    assert '"bad-flow"' in text and "BEGIN and one END" in text
    assert '"bad-yaml"' in text and "not valid YAML" in text


def test_skills_dir_replaces_project_and_user_discovery(sandbox):
    work = layout(sandbox)
    own = sandbox.root / "own-skills"
    write_skill(own, "only-mine", "Given with --skills-dir")
    wire = start(sandbox, work, args=("--skills-dir", str(own)))
    names = {n for n in command_names(wire.initialize()) if n.startswith("skill:")}
    assert names == BUILTIN | {"skill:only-mine", "skill:extra-skill"}
    wire.close()


def test_a_skill_runs_as_a_plain_turn_with_its_text_and_the_request(sandbox):
    write_skill(sandbox.work / ".agents" / "skills", "greet", "Greets", body="Say hello in French.")
    sandbox.work.mkdir(parents=True, exist_ok=True)
    wire = start(sandbox, sandbox.work, "text: Bonjour")
    wire.initialize(protocol_version="1.10", client={"name": "t"})
    events, response = wire.prompt("/skill:greet to the whole team")
    assert response["result"] == {"status": "finished"}
    assert event_types(events) == ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    wire.close()
    [context] = sandbox.share.glob("sessions/*/*/context.jsonl")
    records = [json.loads(line) for line in context.read_text().splitlines()]
    [user] = [r for r in records if r["role"] == "user"]
    assert user["content"].startswith("---\nname: greet")
    assert user["content"].endswith("Say hello in French.\n\nUser request:\nto the whole team")
    assert "greet" in records[0]["content"]  # the system prompt lists the skills


def test_a_flow_runs_each_node_as_a_nested_turn_and_asks_again_for_a_valid_choice(sandbox):
    path = sandbox.work / ".kimi" / "skills" / "ship-it" / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(FLOW_SKILL)
    wire = start(
        sandbox,
        sandbox.work,
        "text: wrote it",
        "text: <choice>maybe</choice>",  # not a branch: asked again
        "text: <choice>no</choice>",
        "text: fixed it",
        "text: all green <choice>yes</choice>",
    )
    reply = wire.initialize(protocol_version="1.10", client={"name": "t"})
    assert {"skill:ship-it", "flow:ship-it"} <= set(command_names(reply))
    events, response = wire.prompt("/flow:ship-it")
    assert response["result"] == {"status": "finished"}
    kinds = event_types(events)
    assert kinds.count("TurnBegin") == 6 and kinds.count("TurnEnd") == 6
    assert kinds[0] == "TurnBegin" and kinds[-1] == "TurnEnd"
    inputs = [p["user_input"] for p in payloads(events, "TurnBegin")]
    assert inputs[0] == "/flow:ship-it"
    assert inputs[1] == inputs[4] == "Write the change"
    assert inputs[2].startswith("Do the tests pass?\n\nAvailable branches:\n- yes\n- no")
    assert "did not include a valid choice" in inputs[3]
    assert inputs[5] == inputs[2]
    wire.close()


def test_ralph_mode_feeds_the_prompt_again_until_the_model_says_stop(sandbox):
    wire = start(
        sandbox,
        sandbox.work,
        "text: step one",
        "text: more to do <choice>CONTINUE</choice>",
        "text: done <choice>STOP</choice>",
        args=("--max-ralph-iterations", "5"),
    )
    wire.initialize(protocol_version="1.10", client={"name": "t"})
    events, response = wire.prompt("make the tests pass")
    assert response["result"] == {"status": "finished"}
    inputs = [p["user_input"] for p in payloads(events, "TurnBegin")]
    assert inputs[:2] == ["make the tests pass", "make the tests pass"]
    assert len(inputs) == 4 and "automated loop" in inputs[2] and inputs[3] == inputs[2]
    wire.close()


def test_ralph_mode_stops_at_its_iteration_limit(sandbox):
    wire = start(
        sandbox,
        sandbox.work,
        "text: step one",
        "text: <choice>CONTINUE</choice>",
        args=("--max-ralph-iterations", "1"),
    )
    wire.initialize(protocol_version="1.10", client={"name": "t"})
    events, response = wire.prompt("go")
    assert response["result"]["status"] == "max_steps_reached"
    assert event_types(events).count("TurnBegin") == 3
    wire.close()
