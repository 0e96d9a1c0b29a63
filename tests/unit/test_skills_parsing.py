"""SKILL.md front matter and flow diagrams: the plain reader agrees with YAML wherever it
answers, anything richer goes to YAML, and discovery sees edits (a server's later sessions)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from soulwire.engine.flows import FlowError, parse_d2, parse_mermaid
from soulwire.engine.skills import discover_skills, parse_front_matter, read_skill, skill_roots

PLAIN_AND_RICH = [
    "name: a\ndescription: Does things, well.",
    "name: \"quoted\"\ndescription: 'single quoted'",
    "name: x\ndescription: text # and a comment",
    "name: x\ndescription: >\n  folded\n  text",
    "name: x\nallowed-tools:\n  - Read\n  - Grep",
    'name: x\ndescription: "escaped \\" quote"',
]


@pytest.mark.parametrize("block", PLAIN_AND_RICH)
def test_the_front_matter_reads_as_yaml_does(block: str):
    assert parse_front_matter(block) == yaml.safe_load(block)


def test_what_yaml_refuses_is_refused_with_the_line():
    with pytest.raises(ValueError, match="not valid YAML at line 3: mapping values are not allowed"):
        parse_front_matter("name: x\ndescription: has: a colon inside")


def test_names_that_cannot_be_commands_and_unknown_types_are_refused(tmp_path: Path):
    path = tmp_path / "SKILL.md"
    for text, reason in [
        ("---\nname: two words\n---\n", "cannot be a command"),
        ("---\nname: ok\ntype: wizard\n---\n", "type 'wizard' is unknown"),
        ("---\nname: ok\ndescription: [a, b]\n---\n", "description must be text"),
        ("---\n- just\n- a list\n---\n", "not a mapping"),
    ]:
        path.write_text(text)
        with pytest.raises(ValueError, match=reason):
            read_skill(path, "dir-name", "project")
    path.write_text("No front matter.\nSecond line.\n")
    skill = read_skill(path, "dir-name", "project")
    assert (skill.name, skill.description) == ("dir-name", "No front matter.")


def test_flow_diagrams_in_mermaid_and_d2():
    flow = parse_mermaid('flowchart LR\n  s((BEGIN)) --> a["Do it"] -- done --> e([END])\n  a -->|again| a')
    assert flow.kind("s") == "begin" and flow.kind("a") == "decision" and flow.labels["a"] == "Do it"
    flow = parse_d2("b: BEGIN\nt: |md\n  Write\n  it\n|\ne: END\nb -> t\nt -> e")
    assert flow.labels["t"] == "Write\nit" and flow.kind("t") == "task"
    with pytest.raises(FlowError, match="same label"):
        parse_mermaid("A[BEGIN] --> B[x]\nB -->|y| C[END]\nB -->|y| A")
    with pytest.raises(FlowError, match="cannot be reached"):
        parse_mermaid("A[BEGIN] --> B[x]\nC[END]")


def test_discovery_sees_a_skill_added_or_edited_later(tmp_path: Path):
    work = tmp_path / "work"
    skills = work / ".agents" / "skills"
    (skills / "one").mkdir(parents=True)
    (skills / "one" / "SKILL.md").write_text("---\ndescription: first\n---\n")
    roots = skill_roots(work, tmp_path / "share", home=tmp_path / "home")
    assert [s.name for s in discover_skills(roots).skills][:1] == ["one"]
    assert discover_skills(roots) is discover_skills(roots)  # shared while nothing changed
    (skills / "two").mkdir()
    (skills / "two" / "SKILL.md").write_text("---\ndescription: second\n---\n")
    os.utime(skills, ns=(1, 1))  # a coarse clock must not hide the change
    names = {s.name for s in discover_skills(roots).skills}
    assert {"one", "two"} <= names
    (skills / "one" / "SKILL.md").write_text("---\ndescription: edited\n---\n")
    os.utime(skills / "one" / "SKILL.md", ns=(2, 2))
    [one] = [s for s in discover_skills(roots).skills if s.name == "one"]
    assert one.description == "edited"
