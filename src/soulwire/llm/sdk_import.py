"""Import a provider SDK without loading every type it declares.

The OpenAI and Anthropic SDKs declare hundreds of pydantic models, and their `types` (and
`resources`) packages re-export all of them from `__init__`: importing one request type runs
every module (evals, graders, fine-tuning, realtime, beta…). On a slow core that is most of a
second per process (`import openai` 1.0 s → 0.45 s here, `import anthropic` 2.6 s → 2.0 s), paid
before a session's first model call, by every engine and by `soulwire --print`.

`import_sdk` loads such a package lazily instead: its `__init__` is not run, and a name it
re-exports is imported from its module at the first access (`pkg.Name`, `from pkg import Name`,
`import *`, `dir()` all behave as before). Only a package whose `__init__` holds nothing but
relative `from .mod import Name` lines is loaded this way; any other `__init__` (a future SDK
that adds code there) is run as usual, so the worst case is the old cost, never a different
meaning."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

LAZY_PACKAGES = ("openai.types", "openai.lib", "anthropic.types", "anthropic.resources", "anthropic.lib")
"""Roots whose packages (and sub-packages) may load lazily."""
_UNDER_ROOTS = tuple(f"{root}." for root in LAZY_PACKAGES)


def import_sdk(name: str) -> ModuleType:
    """`importlib.import_module(name)`, with the SDKs' re-export packages loaded lazily."""
    if name not in sys.modules:
        _install()
    return importlib.import_module(name)


def import_names(names: Iterable[str]) -> bool:
    """Import each `module[:Name]` (an SDK's lazily imported resources, the types a first
    request needs); stops with False at the first that cannot be imported (the request that
    needs it reports why)."""
    for name in names:
        module_name, _, attribute = name.partition(":")
        try:
            loaded = import_sdk(module_name)
            if attribute:
                getattr(loaded, attribute)  # a lazy export: its module loads now
        except (ImportError, AttributeError):
            return False
    return True


def _reexports(init_path: str) -> tuple[dict[str, tuple[str, str]], list[str] | None] | None:
    """Bound name → (module, its name there) of each `from .module import Name [as Alias]` in
    an `__init__`, and its `__all__` if it has one; None when it holds anything else (then it
    is run as usual)."""
    import ast  # (here: the SDK's import is the only user)

    try:
        with open(init_path, encoding="utf-8") as source:
            tree = ast.parse(source.read(), init_path)
    except (OSError, SyntaxError, ValueError):
        return None
    names: dict[str, tuple[str, str]] = {}
    exported: list[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.Assign) and _is_all(node):
            exported = [element.value for element in node.value.elts]  # type: ignore[attr-defined]
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            if alias.name == "*":
                return None
            names[alias.asname or alias.name] = (node.module, alias.name)
    if any(source.partition(".")[0] in names for source, _ in names.values()):
        return None  # a name that a submodule's import would overwrite with the module
    return names, exported


def _is_all(node: Any) -> bool:
    """`__all__ = [...]` of string literals (`node` an `ast.Assign`)."""
    import ast

    return (
        [getattr(target, "id", None) for target in node.targets] == ["__all__"]
        and isinstance(node.value, ast.List | ast.Tuple)
        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts)
    )


class _LazyPackage:
    """Loader of a re-export package: binds its names on first access instead of at import."""

    def __init__(self, names: dict[str, tuple[str, str]], exported: list[str] | None) -> None:
        self.names = names
        self.exported = exported

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        names = self.names
        package = module.__name__
        submodules = {source.partition(".")[0] for source, _ in names.values()}

        def __getattr__(attribute: str) -> Any:
            found = names.get(attribute)
            if found is not None:
                source, name = found
                value = getattr(importlib.import_module(f"{package}.{source}"), name)
            elif attribute in submodules:  # bound by the `__init__`'s imports when run eagerly
                value = importlib.import_module(f"{package}.{attribute}")
            else:
                raise AttributeError(f"module {package!r} has no attribute {attribute!r}")
            setattr(module, attribute, value)
            return value

        def __dir__() -> list[str]:
            return sorted({*vars(module), *names, *submodules})

        module.__getattr__ = __getattr__  # type: ignore[attr-defined]  # PEP 562
        module.__dir__ = __dir__  # type: ignore[attr-defined]
        # `import *` binds what the `__init__` would have: its `__all__`, else every re-export
        module.__all__ = list(self.exported if self.exported is not None else names)  # type: ignore[attr-defined]


class _Finder:
    """Finds the packages under `LAZY_PACKAGES` as the path finder does, with a lazy loader
    for those whose `__init__` only re-exports."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name not in LAZY_PACKAGES and not name.startswith(_UNDER_ROOTS):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.submodule_search_locations is None or spec.origin is None:
            return spec  # a plain module: loaded as usual
        found = _reexports(spec.origin)
        if found is not None:
            spec.loader = _LazyPackage(*found)  # type: ignore[assignment]
        return spec


def _install() -> None:
    if _Finder not in sys.meta_path:
        sys.meta_path.insert(0, _Finder)  # type: ignore[arg-type]


__all__ = ["LAZY_PACKAGES", "import_names", "import_sdk"]
