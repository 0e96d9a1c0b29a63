"""One definition of a session's settings: every host composes `SessionSettings`, and its
`engine_flags` is the one table from a setting to the engine flag."""

from __future__ import annotations

import inspect
import json
from dataclasses import fields
from pathlib import Path
from typing import get_args

import pytest

from soulwire.wire.session_settings import SessionSettings

SETTINGS = {f.name for f in fields(SessionSettings)}


def _hosts() -> list[type]:
    from soulwire.runtime.options import SessionOptions
    from soulwire.sdk.options import LaunchOptions, Options
    from soulwire.server.registry import ServeSettings

    return [SessionOptions, LaunchOptions, Options, ServeSettings]


@pytest.mark.parametrize("host", _hosts(), ids=lambda c: c.__name__)
def test_every_host_composes_the_one_definition_and_declares_none_of_it_again(host: type) -> None:
    assert issubclass(host, SessionSettings)
    own = set(inspect.get_annotations(host))
    assert not own & SETTINGS, f"{host.__name__} re-declares {sorted(own & SETTINGS)}"


def test_the_literals_are_the_ones_the_command_line_and_config_accept() -> None:
    from soulwire.cli.args import build_parser
    from soulwire.config.model import Config

    parser = build_parser()
    sandbox = next(a for a in parser._actions if "--sandbox" in a.option_strings)
    approval = next(a for a in parser._actions if "--approval" in a.option_strings)
    config = Config.model_fields
    assert tuple(sandbox.choices or ()) == get_args(config["sandbox"].annotation)
    assert tuple(approval.choices or ()) == get_args(config["approval"].annotation)


def test_a_fleet_task_and_an_sdk_session_give_the_engine_the_same_flags(tmp_path: Path) -> None:
    """The fleet's warm engines (`soulwire serve` flags) and its SDK sessions (`--wire` argv)
    read a task's settings through the same mapping and the same flag table."""
    from soulwire.fleet.spawn import engine_flags, peek_first_task
    from soulwire.fleet.tasks import parse_tasks
    from soulwire.sdk.options import Options

    line = {
        "id": "t",
        "prompt": "p",
        "model": "m",
        "thinking": False,
        "approval": "yolo",
        "max_steps": 7,
        "sandbox": "workspace-write",
        "sandbox_network": True,
    }
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(line) + "\n")
    [task] = parse_tasks(path.read_text().splitlines())
    expected = [
        "--model", "m", "--no-thinking", "--yolo", "--max-steps-per-turn", "7",
        "--sandbox", "workspace-write", "--sandbox-network", "on",
    ]  # fmt: skip
    assert list(engine_flags(task)) == expected
    peeked = peek_first_task(path)
    assert peeked is not None and list(engine_flags(peeked)) == expected
    argv = Options(executable="engine", **vars(task.session_settings())).argv()
    assert argv[argv.index("--model") : argv.index("--model") + len(expected)] == expected
    assert "--approval" not in argv and "--plan" not in argv  # unset settings are left out


def test_a_served_session_gets_the_servers_settings_and_keeps_its_own_model(tmp_path: Path) -> None:
    from soulwire.server.registry import ServeSettings

    served = ServeSettings(share=tmp_path, work_dir=tmp_path, model="m", yolo=True, max_steps_per_turn=3)
    session = served.session_settings()
    assert type(session) is SessionSettings
    assert vars(session) == {**vars(SessionSettings()), "model": "m", "yolo": True, "max_steps_per_turn": 3}
