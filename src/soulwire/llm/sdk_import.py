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
meaning.

The Anthropic SDK's own `__init__` (`LAZY_ROOTS`) holds more than re-exports: it also imports
its Vertex, Bedrock, Foundry, AWS and Google Cloud clients, tools and streaming helpers (half of
`import anthropic`), which a request through `AsyncAnthropic` never uses. Its names bound by a
relative import load the same way; its bare set-up calls (logging) run at once; and any other
name (one of those clients, `dir()`) runs the whole `__init__` first, as an eager import would
have. The OpenAI SDK's root is loaded the same way: its `__init__` imports its Bedrock, Vertex
and Azure clients (~35 CPU-ms of a first request's ~140 here). A root's module-level setting
(`openai.api_key = …`) runs its `__init__` first, so that a later run cannot reset it.

Two modules the Anthropic SDK's base client imports for a function it calls only after an
HTTP error status (`make_status_error`: its 200-odd typed error classes) or with OpenTelemetry
tracing on (`finish_api_call_span`: the Messages API's parameter types and models it records)
are `DEFERRED`: such a name is bound to a function that runs the module at its first call, and
any other name of the module runs it at once. Together they are four fifths of what a first
request would import."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

LAZY_PACKAGES = ("openai.types", "openai.lib", "anthropic.types", "anthropic.resources", "anthropic.lib")
"""Roots whose packages (and sub-packages) may load lazily."""
LAZY_ROOTS = ("anthropic", "openai")
"""SDK packages whose `__init__` runs only when a name it binds otherwise is asked for."""
DEFERRED: dict[str, tuple[str, ...]] = {
    "anthropic._error_classes": ("make_status_error",),
    "anthropic.lib._tracing._api_call": ("finish_api_call_span",),
}
"""Module → its functions that may be bound before the module runs (each must be a plain
top-level `def` in its source, else the module is imported as usual)."""
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
        if isinstance(node, ast.Assign) and (listed := _all_names(node)) is not None:
            exported = listed
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


def _all_names(node: Any) -> list[str] | None:
    """The names of `__all__ = [...]` (string literals only; `node` an `ast.Assign`), else None."""
    import ast

    if [getattr(target, "id", None) for target in node.targets] != ["__all__"]:
        return None
    value = node.value
    if not isinstance(value, ast.List | ast.Tuple):
        return None
    names = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return names if len(names) == len(value.elts) else None


def _is_subpackage(module: ModuleType, attribute: str) -> bool:
    if attribute.startswith("__"):
        return False
    found = importlib.machinery.PathFinder.find_spec(f"{module.__name__}.{attribute}", module.__path__)
    return found is not None


class _LazyPackage(importlib.abc.Loader):
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
            elif attribute in submodules or _is_subpackage(module, attribute):
                # (bound by the `__init__`'s imports when run eagerly, or by an eagerly run SDK
                # root's on their way: `openai.types.chat`)
                value = importlib.import_module(f"{package}.{attribute}")
            else:
                raise AttributeError(f"module {package!r} has no attribute {attribute!r}")
            setattr(module, attribute, value)
            return value

        def __dir__() -> list[str]:
            return sorted({*vars(module), *names, *submodules})

        # PEP 562; `import *` binds what the `__init__` would have: its `__all__`, else every re-export
        exported = list(self.exported if self.exported is not None else names)
        vars(module).update(__getattr__=__getattr__, __dir__=__dir__, __all__=exported)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the packages under `LAZY_PACKAGES` as the path finder does, with a lazy loader
    for those whose `__init__` only re-exports."""

    def find_spec(
        self, name: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        deferred = DEFERRED.get(name)
        if deferred is not None:
            return _deferred_spec(name, path, deferred)
        root = name in LAZY_ROOTS
        if not root and name not in LAZY_PACKAGES and not name.startswith(_UNDER_ROOTS):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.submodule_search_locations is None or spec.origin is None:
            return spec  # a plain module: loaded as usual
        if root:
            plan = _root_plan(spec.origin)
            if plan is not None:
                spec.loader = _LazyRoot(spec.origin, *plan)
            return spec
        found = _reexports(spec.origin)
        if found is not None:
            spec.loader = _LazyPackage(*found)
        return spec


def _root_plan(
    init_path: str,
) -> tuple[str, dict[str, tuple[str | None, str]], list[str] | None, list[str], bool] | None:
    """What a root's `__init__` binds by a relative import (name → (module or None for
    `from . import module`, its name there)), its `__all__`, its bare calls of such names
    (set-up), and whether it renames its exports' `__module__` to the package's; with its
    source. None when it cannot be read (then it is run as usual)."""
    import ast

    try:
        with open(init_path, encoding="utf-8") as source_file:
            source = source_file.read()
        tree = ast.parse(source, init_path)
    except (OSError, SyntaxError, ValueError):
        return None
    names: dict[str, tuple[str | None, str]] = {}
    exported: list[str] | None = None
    calls: list[str] = []
    renames = False
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Assign) and (listed := _all_names(node)) is not None:
            exported = listed
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id in names and not node.value.args:
                calls.append(func.id)
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Name) and node.iter.id == "__all__":
            renames = renames or "'__module__'" in ast.dump(node)
    return source, names, exported, calls, renames


class _RootModule(ModuleType):
    """A lazily loaded root package: setting a name calls its loader's `before_set` first."""

    def __setattr__(self, name: str, value: Any) -> None:
        hook = vars(self).get("_soulwire_before_set")
        if hook is not None:
            hook(name, value)
        super().__setattr__(name, value)


class _LazyRoot(importlib.abc.Loader):
    """Loader of an SDK's root package (see the module's docstring)."""

    def __init__(
        self,
        origin: str,
        source: str,
        names: dict[str, tuple[str | None, str]],
        exported: list[str] | None,
        calls: list[str],
        renames: bool,
    ) -> None:
        self.origin = origin
        self.source = source
        self.names = names
        self.exported = set(exported or ())
        self.all = exported
        self.calls = calls
        self.renames = renames

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        import threading

        package = module.__name__
        names = self.names
        lock = threading.RLock()
        ran: list[bool] = []

        def run_init() -> None:
            """The whole `__init__`, as an eager import runs it (once)."""
            with lock:
                if ran:
                    return
                ran.append(True)
                for own in ("__getattr__", "__dir__", "_soulwire_before_set"):
                    vars(module).pop(own, None)
                try:
                    exec(compile(self.source, self.origin, "exec"), vars(module))  # the SDK's own file
                except BaseException as exc:
                    vars(module)["__getattr__"] = _failed_init(package, exc)
                    raise

        def __getattr__(attribute: str) -> Any:
            found = names.get(attribute)
            if found is None:
                if attribute.startswith("__") or ran:
                    raise AttributeError(f"module {package!r} has no attribute {attribute!r}")
                submodule = f"{package}.{attribute}"
                if importlib.machinery.PathFinder.find_spec(submodule, module.__path__) is not None:
                    return importlib.import_module(submodule)  # (`from . import mod` asks so first)
                run_init()
                try:
                    return vars(module)[attribute]
                except KeyError:
                    raise AttributeError(f"module {package!r} has no attribute {attribute!r}") from None
            source, name = found
            if source is None:
                value: Any = importlib.import_module(f"{package}.{name}")
            else:
                value = getattr(importlib.import_module(f"{package}.{source}"), name)
            if self.renames and attribute in self.exported:
                try:
                    value.__module__ = package  # as the `__init__`'s own loop does
                except (TypeError, AttributeError):
                    pass
            setattr(module, attribute, value)
            return value

        def __dir__() -> list[str]:
            run_init()
            return sorted(vars(module))

        def before_set(attribute: str, value: Any) -> None:
            """A setting of the package's own (`openai.api_key = …`) runs the `__init__` first,
            which would otherwise reset it to its default when it ran later."""
            submodule = isinstance(value, ModuleType) and value.__name__ == f"{package}.{attribute}"
            if not ran and attribute not in names and not submodule and not attribute.startswith("__"):
                run_init()

        namespace = vars(module)
        namespace.update(__getattr__=__getattr__, __dir__=__dir__, _soulwire_before_set=before_set)
        module.__class__ = _RootModule  # (its `__setattr__` calls `before_set`)
        if self.all is not None:
            namespace["__all__"] = list(self.all)
        for call in self.calls:  # its set-up (the SDK's logging from the environment)
            getattr(module, call)()


def _failed_init(package: str, cause: BaseException) -> Any:
    """The `__getattr__` of a lazy root whose `__init__` raised: any name it did not bind
    before it failed raises ImportError with the cause, as the failed eager import did (not a
    bare "has no attribute" that hides why)."""
    reason = f"module {package!r} failed to import: {type(cause).__name__}: {cause}"

    def __getattr__(attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {attribute!r}")
        raise ImportError(reason) from cause

    return __getattr__


def _deferred_spec(name: str, path: Any, functions: tuple[str, ...]) -> importlib.machinery.ModuleSpec | None:
    """The path finder's spec of module `name`, with a `_DeferredModule` loader when its source
    defines each of `functions` with a top-level `def`."""
    import ast

    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None or spec.origin is None or spec.submodule_search_locations:
        return spec
    try:
        with open(spec.origin, encoding="utf-8") as source:
            tree = ast.parse(source.read(), spec.origin)
    except (OSError, SyntaxError, ValueError):
        return spec
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    if defined.issuperset(functions):
        spec.loader = _DeferredModule(spec.loader, functions)
    return spec


class _DeferredModule(importlib.abc.Loader):
    """Loader of a module that runs at the first use of any of its names: each of `functions`
    is bound meanwhile to a function that runs the module, then calls its own."""

    def __init__(self, loader: importlib.abc.Loader, functions: tuple[str, ...]) -> None:
        self.loader = loader
        self.functions = functions

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        import threading

        lock = threading.RLock()
        ran: list[bool] = []
        failed: list[BaseException] = []
        namespace = vars(module)

        def run() -> dict[str, Any]:
            """The module's namespace, once its code has run (the first caller runs it; if it
            raised, every later use raises ImportError from that, as a failed import would)."""
            with lock:
                if failed:
                    raise ImportError(f"module {module.__name__!r} failed to import") from failed[0]
                if not ran:
                    ran.append(True)
                    namespace.pop("__getattr__", None)
                    namespace.pop("__dir__", None)
                    try:
                        self.loader.exec_module(module)
                    except BaseException as exc:
                        failed.append(exc)
                        raise
            return namespace

        def forward(name: str) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                return run()[name](*args, **kwargs)

            call.__name__ = call.__qualname__ = name
            call.__module__ = module.__name__
            return call

        forwards = {name: forward(name) for name in self.functions}

        def __getattr__(attribute: str) -> Any:
            if attribute in forwards and not ran:
                return forwards[attribute]
            if attribute.startswith("__") and attribute != "__all__":
                # the import system's own probes (`__path__` for `from m import x`) run nothing
                raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}")
            try:
                return run()[attribute]
            except KeyError:
                raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}") from None

        def __dir__() -> list[str]:
            return sorted(run())

        namespace.update(__getattr__=__getattr__, __dir__=__dir__)  # PEP 562


_FINDER = _Finder()


def _install() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


__all__ = ["DEFERRED", "LAZY_PACKAGES", "LAZY_ROOTS", "import_names", "import_sdk"]
