"""The shell paints its input line before anything heavy loads: pydantic, rich and the
engine come after the first frame, in a worker thread."""

from __future__ import annotations

from tests.unit.test_import_budget import loaded_after

AFTER_FIRST_FRAME = (
    "pydantic",
    "rich",
    "soulwire.wire.types",
    "soulwire.engine.soul",
    "soulwire.runtime.builder",
)


def test_the_shell_module_loads_only_the_line_editor_before_the_first_frame():
    modules = loaded_after("import soulwire.cli, soulwire.ui.shell, soulwire.ui.shell.app")
    assert "prompt_toolkit" in modules  # the check itself works
    assert not [m for m in AFTER_FIRST_FRAME if m in modules]


def test_the_wire_and_print_paths_never_load_the_shell_libraries():
    modules = loaded_after("import soulwire.ui.wire.launch, soulwire.ui.print.app, soulwire.runtime.builder")
    assert not [m for m in ("prompt_toolkit", "rich", "soulwire.ui.shell") if m in modules]
