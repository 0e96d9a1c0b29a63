"""soulwire-sdk (./sdk) ships src/soulwire/{wire,sdk} and the leaf modules they import; the
root project's wheel leaves exactly those out and depends on it. The SDK's modules import
nothing of soulwire outside it, and nothing but pydantic, anyio and its extras' packages."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk"
SRC = ROOT / "src"
REQUIRED = {"pydantic", "anyio"}
EXTRAS = {"websockets", "httpx2", "jsonschema", "mcp"}  # imported at first use of a feature


def _sdk_paths() -> list[Path]:
    """The files and directories soulwire-sdk ships, as paths of this repository."""
    config = tomllib.loads((SDK / "pyproject.toml").read_text(encoding="utf-8"))
    forced: dict[str, str] = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    for source, target in forced.items():
        assert (SDK / source).resolve() == SRC / target, (source, target)  # shipped where it lives
    return [(SDK / source).resolve() for source in forced]


def _modules(paths: list[Path]) -> dict[str, Path]:
    files = [f for p in paths for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p])]
    return {".".join(f.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): f for f in files}


def _imports(path: Path) -> set[str]:
    """Every absolute import of the module, also those inside functions (imported lazily)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_root_wheel_leaves_out_exactly_what_the_sdk_ships() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    excluded = config["tool"]["hatch"]["build"]["targets"]["wheel"]["exclude"]
    assert sorted(ROOT / e for e in excluded) == sorted(_sdk_paths())


def test_one_version_for_both_distributions() -> None:
    for project in (ROOT, SDK):
        config = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
        assert config["project"]["dynamic"] == ["version"]
        assert (
            project / config["tool"]["hatch"]["version"]["path"]
        ).resolve() == SRC / "soulwire/__init__.py"


def test_the_sdk_needs_pydantic_and_anyio_only() -> None:
    config = tomllib.loads((SDK / "pyproject.toml").read_text(encoding="utf-8"))
    assert {d.split(">")[0].split("=")[0] for d in config["project"]["dependencies"]} == REQUIRED


def test_the_sdks_modules_import_nothing_outside_it() -> None:
    modules = _modules(_sdk_paths())
    every = _modules([SRC / "soulwire"])
    assert {"soulwire", "soulwire.sdk", "soulwire.wire", "soulwire.sdk.session"} <= set(modules)
    outside: list[str] = []
    for name, path in modules.items():
        for imported in _imports(path):
            top = imported.split(".")[0]
            if top == "soulwire":
                # `from soulwire.x import y` names module x.y, or an attribute of module x
                module = imported if imported in every else imported.rsplit(".", 1)[0]
                if module not in modules:
                    outside.append(f"{name} imports {imported}")
            elif top not in sys.stdlib_module_names and top not in REQUIRED | EXTRAS:
                outside.append(f"{name} imports {imported}")
    assert not outside, "\n".join(outside)
