"""One exception root per public surface, and no two public classes of one name: a script
over `src/` finds every class, so a new one that breaks either rule fails here."""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def _public_classes() -> list[tuple[str, str]]:
    """(module, class name) of every public top-level class under src/."""
    found: list[tuple[str, str]] = []
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.append((module, node.name))
    return found


def _exception_classes() -> list[tuple[str, type[BaseException]]]:
    """The public exception classes, imported from their modules: only modules whose classes
    name a base that may be an exception are imported (the Ray backend needs Ray)."""
    hints = ("Error", "Exception", "Failed", "Warning")
    modules: set[str] = set()
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                any(h in ast.unparse(base) for h in hints) for base in node.bases
            ):
                modules.add(".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"))
    found: list[tuple[str, type[BaseException]]] = []
    for name in sorted(modules):
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not value.__name__.startswith("_")
            ):
                found.append((name, value))
    return found


def test_every_exception_derives_from_its_surfaces_root() -> None:
    from soulwire.errors import SoulwireError
    from soulwire.fleet.errors import FleetError
    from soulwire.sdk.errors import SDKError
    from soulwire.wire.jsonrpc import WireError

    roots = {"soulwire.wire": WireError, "soulwire.sdk": SDKError, "soulwire.fleet": FleetError}
    # Raised by a user's tool function for the SDK to report, never by the SDK itself.
    users = {"soulwire.sdk.tools.ToolError"}
    wrong: list[str] = []
    classes = _exception_classes()
    assert len(classes) > 60  # the scan found them
    for module, cls in classes:
        qualified = f"{module}.{cls.__name__}"
        root = next((r for prefix, r in roots.items() if module.startswith(prefix + ".")), SoulwireError)
        if cls not in (root, SoulwireError) and not issubclass(cls, root) and qualified not in users:
            wrong.append(f"{qualified} is not a {root.__name__}")
    assert not wrong, "\n".join(wrong)
    assert issubclass(FleetError, SoulwireError)


def test_no_two_public_exceptions_share_a_name() -> None:
    where: defaultdict[str, list[str]] = defaultdict(list)
    for module, cls in _exception_classes():
        where[cls.__name__].append(module)
    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}


def test_the_provider_errors_root_keeps_its_published_error_type() -> None:
    """`StepRetry.error_type` and StopFailure hook matchers see `ChatProviderError` for the
    engine's provider error root, as the reference names it, though the class is ProviderError
    (the SDK's ChatProviderError is the JSON-RPC error a client receives)."""
    from soulwire.llm.errors import APITimeoutError, ProviderError

    assert ProviderError("x").error_type == "ChatProviderError"
    assert APITimeoutError("x").error_type == "APITimeoutError"


# Left as they are (each says why), so that no other name is added to them.
KNOWN_SHARED_NAMES = {
    # The ACP client's capabilities and the Wire client's: two protocols' words.
    "ClientCapabilities",
    # engine.hooks' structural Protocol of tools.commands' NamedTuple: the engine may not
    # import tools.commands (import-linter); one definition needs it moved to tools.base.
    "CommandOutcome",
    # The engine's client-run tool and a fleet task's command tool (a task-file schema).
    "ExternalTool",
    # The engine's configured hook and the SDK's published Hook (a callback).
    "Hook",
    # The SDK's published dataclass re-declares wire.methods.ReplayResult: to be one type (the
    # SDK's is looser about `status`, which other engines may extend).
    "ReplayResult",
    # serve's HTTP listing model (its OpenAPI component name) and the SDK's published SessionInfo.
    "SessionInfo",
    # The engine's tool protocol and the SDK's published Tool.
    "Tool",
}


def test_no_new_public_class_shares_a_name() -> None:
    where: defaultdict[str, list[str]] = defaultdict(list)
    for module, name in _public_classes():
        where[name].append(module)
    shared = {name for name, modules in where.items() if len(modules) > 1}
    assert shared == KNOWN_SHARED_NAMES
