"""The task file: valid lines become Tasks; a bad line is one error naming its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soulwire.fleet import TaskFileError, load_tasks, parse_tasks


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_task_file_with_every_field(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "config.toml").write_text("")
    line = {
        "id": "t-1",
        "prompt": "fix it",
        "workspace": "repo",
        "model": "m",
        "config_file": "config.toml",
        "approval": "approve",
        "max_steps": 5,
        "time_limit": 30,
        "check": "pytest -q",
        "env": {"A": "1"},
    }
    path = write(tmp_path, "# a comment", "", json.dumps(line), json.dumps({"id": "t-2", "prompt": "p"}))
    first, second = load_tasks(path)
    assert first.workspace == tmp_path / "repo"  # relative to the task file
    assert first.config_file == tmp_path / "config.toml"
    assert (first.approval, first.max_steps, first.time_limit, first.check) == ("approve", 5, 30, "pytest -q")
    assert second.workspace is None and second.approval == "reject" and second.check is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "tasks.jsonl:2: not JSON"),
        ("[1, 2]", "tasks.jsonl:2: a task must be a JSON object"),
        ('{"id": "a"}', "tasks.jsonl:2: prompt: Field required"),
        ('{"id": "b", "prompt": "p", "approval": "maybe"}', "tasks.jsonl:2: approval: Input should be"),
        (
            '{"id": "c", "prompt": "p", "time_limit": 0}',
            "tasks.jsonl:2: time_limit: Input should be greater than 0",
        ),
        (
            '{"id": "d", "prompt": "p", "colour": "red"}',
            "tasks.jsonl:2: colour: Extra inputs are not permitted",
        ),
        ('{"id": "../x", "prompt": "p"}', "tasks.jsonl:2: id: String should match pattern"),
        ('{"id": "ok", "prompt": "p"}', "tasks.jsonl:2: duplicate id 'ok' (first on line 1)"),
        ('{"id": "e", "prompt": "p", "workspace": "missing"}', "tasks.jsonl:2: workspace is not a directory"),
        (
            '{"id": "f", "prompt": "p", "config": {}, "config_file": "c"}',
            "config and config_file cannot be combined",
        ),
    ],
)
def test_a_bad_line_is_one_error_naming_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, '{"id": "ok", "prompt": "p"}', line)
    with pytest.raises(TaskFileError) as caught:
        load_tasks(path)
    text = str(caught.value)
    assert message in text and "\n" not in text


def test_parse_tasks_from_lines_without_a_file() -> None:
    (task,) = parse_tasks(['{"id": "x", "prompt": "hello", "approval": "yolo"}'])
    assert task.id == "x" and task.approval == "yolo"


def test_an_unreadable_task_file(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="cannot read"):
        load_tasks(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"approval": "yolo", "model": "m", "max_steps": 4, "thinking": False},
        {"config_file": "config.toml", "sandbox": "read-only", "sandbox_network": True},
        {"config": {"default_model": "m", "models": {}}, "env": {"A": "1", "B": "two"}},
        {"approval": {"rules": [{"action": "Shell", "decision": "approve"}]}},
    ],
)
def test_the_first_task_peeked_without_pydantic_gets_its_validated_group(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    """`soulwire fleet run` spawns the first task's engines from its line read with the
    standard library; those engines serve the validated task only if both give one key."""
    from soulwire.fleet.engines import GroupKey, peek_first_task

    (tmp_path / "config.toml").write_text("")
    path = write(tmp_path, "# a comment", "", json.dumps({"id": "a", "prompt": "p", **fields}), '{"id": "b"}')
    peeked = peek_first_task(path)
    assert peeked is not None
    (task,) = parse_tasks(path.read_text().splitlines()[:3], base=tmp_path)
    assert GroupKey.of(peeked) == GroupKey.of(task)


@pytest.mark.parametrize("text", ["", "# only a comment\n", "not json\n", "[1, 2]\n", '{"env": [1]}\n'])
def test_a_first_line_that_is_not_a_task_is_not_peeked_at(tmp_path: Path, text: str) -> None:
    from soulwire.fleet.engines import peek_first_task

    path = tmp_path / "tasks.jsonl"
    path.write_text(text)
    peeked = peek_first_task(path)
    assert peeked is None or peeked.env == {}
    assert peek_first_task(tmp_path / "missing.jsonl") is None
