"""The strict check of a loaded `state.json` (engine/state_check.py) over every damaged value:
a field of the wrong type falls back to its default (off, empty) and is named. The end-to-end
tests (tests/e2e/test_faults_state.py) resume a real session with a few of these values."""

from __future__ import annotations

from typing import Any

import pytest

from soulwire.engine.state_check import validated_state

NOT_A_BOOLEAN = ["no", "false", "", {"on": False}, [], [False], 0, 1, 1.5, None]
NOT_A_LIST_OF_STRINGS = ["run command", {"run command": True}, ["run command", 5], [["run command"]], 1, True]
NOT_A_TABLE = ["yes", "true", [True], [["yolo", True]], 1]
NOT_DIRECTORIES = ["/", "/etc", {"/": True}, ["/", 5], 7]


def state(approval: Any = None, **fields: Any) -> dict[str, Any]:
    table = {"yolo": False, "afk": False, "auto_approve_actions": []} if approval is None else approval
    return {"version": 1, "approval": table, "plan_mode": False, **fields}


@pytest.mark.parametrize("value", NOT_A_BOOLEAN, ids=repr)
@pytest.mark.parametrize("field", ["yolo", "afk"])
def test_a_mistyped_yolo_or_afk_is_off_and_named(field: str, value: Any) -> None:
    checked, bad = validated_state(state({"yolo": False, "afk": False, field: value}))
    assert checked["approval"][field] is False and bad == [f"approval.{field}"]


@pytest.mark.parametrize("value", NOT_A_LIST_OF_STRINGS, ids=repr)
def test_session_rules_that_are_not_a_list_of_strings_are_none(value: Any) -> None:
    checked, bad = validated_state(state({"auto_approve_actions": value}))
    assert checked["approval"]["auto_approve_actions"] == [] and bad == ["approval.auto_approve_actions"]


@pytest.mark.parametrize("value", NOT_A_TABLE, ids=repr)
def test_a_mistyped_approval_table_is_the_defaults(value: Any) -> None:
    checked, bad = validated_state(state(value))
    assert checked["approval"] == {"yolo": False, "afk": False, "auto_approve_actions": []}
    assert bad == ["approval"]


@pytest.mark.parametrize("value", NOT_A_BOOLEAN, ids=repr)
def test_a_mistyped_plan_mode_is_off(value: Any) -> None:
    checked, bad = validated_state(state(plan_mode=value))
    assert checked["plan_mode"] is False and bad == ["plan_mode"]


@pytest.mark.parametrize("value", NOT_DIRECTORIES, ids=repr)
def test_mistyped_extra_directories_are_none(value: Any) -> None:
    checked, bad = validated_state(state(additional_dirs=value))
    assert checked["additional_dirs"] == [] and bad == ["additional_dirs"]


def test_well_typed_values_are_kept_and_every_bad_field_is_named() -> None:
    approval = {"yolo": True, "afk": False, "auto_approve_actions": ["run command"]}
    checked, bad = validated_state(state(approval, additional_dirs=["/w"]))
    assert bad == [] and checked["approval"] == approval and checked["additional_dirs"] == ["/w"]
    _, bad = validated_state(state({"afk": "no"}, plan_mode="no", additional_dirs="/"))
    assert bad == ["additional_dirs", "approval.afk", "plan_mode"]
