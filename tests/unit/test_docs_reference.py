"""The reference pages of the docs site are generated from the code (docs/_gen/reference.py):
every command, every configuration key, every Wire method, event and request is on its page,
and every example matches its message's schema."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest

from soulwire.cli.completion import subcommands
from soulwire.cli.schema import wire_schemas
from soulwire.config import model

# pytest-xdist (--dist loadgroup): its module fixture is built once.
pytestmark = pytest.mark.xdist_group("docs-reference")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "_gen" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_page_has_every_command_and_its_flags(reference):
    page = reference.cli_page()
    for command in subcommands():
        if command != "acp":
            assert f"## soulwire {command}\n" in page
    assert "--max-steps-per-turn" in page and "--listen HOST:PORT" in page and "examples:" in page


def test_the_config_page_has_every_key_of_every_section(reference):
    page = reference.config_page()
    for cls in (model.Config, model.ProviderConfig, model.ModelConfig, model.LoopControl,
                model.BackgroundConfig, model.HookConfig, model.ServiceConfig, model.CheckpointsConfig):  # fmt: skip
        for name in cls.model_fields:
            if name not in (
                "loop_control",
                "background",
                "services",
                "checkpoints",
                "budgets",
            ):  # sections of their own
                assert f"| `{name}` |" in page, name
    assert "| `max_steps_per_turn` | integer | `1000` | ≥ 1; Model calls one turn may make" in page


def test_the_wire_page_has_every_method_event_and_request_with_a_valid_example(reference):
    page = reference.wire_page()
    schemas = wire_schemas()
    for name in ("initialize", "prompt", "steer", "set_plan_mode", "cancel", "replay"):
        assert f"### `{name}`" in page
    for group in ("events", "requests"):
        for name, schema in schemas[group].items():
            section = page.split(f"### `{name}`\n", 1)[1].split("\n### ", 1)[0]
            [line] = re.findall(r"```json\n(.*)\n```", section)
            envelope = json.loads(line)
            assert envelope["params"]["type"] == name
            jsonschema.validate(envelope["params"]["payload"], schema)


def test_links_out_of_the_docs_dir_name_the_source_file(reference):
    class Page:
        class file:
            src_uri = "guides/x.md"

    text = "see [the numbers](../../bench/RESULTS.md), [SDK](../sdk.md) and [web](https://example.com)"
    assert reference.on_page_markdown(text, Page, None, None) == (
        "see the numbers (`bench/RESULTS.md` in the source tree), [SDK](../sdk.md) and [web](https://example.com)"
    )
