"""The provider SDKs imported with their re-export packages loaded lazily: fewer modules at
import, and the same names as an eager import (each case in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from soulwire.llm.sdk_import import _reexports  # pyright: ignore[reportPrivateUsage]

# What every lazily loaded package binds, in a fresh interpreter: its public non-module names
# after resolving them all (`import *`), plus what the SDK's client needs to work.
_LAZY_SIDE = """
import json, sys, types
from soulwire.llm.sdk_import import LAZY_PACKAGES, import_sdk
sdk = import_sdk(sys.argv[1])
loaded_at_import = sorted(sys.modules)
lazy = sorted(
    name for name, module in list(sys.modules.items())
    if type(getattr(module, "__spec__", None) and module.__spec__.loader).__name__ == "_LazyPackage"
)
names = {}
for name in lazy:
    scope = {}
    exec(f"from {name} import *", scope)
    names[name] = sorted(k for k, v in scope.items() if not k.startswith("_") and not isinstance(v, types.ModuleType))
print(json.dumps({"modules": loaded_at_import, "lazy": names}))
"""

_EAGER_SIDE = """
import __future__, importlib, json, sys, types
names = {}
for name in json.loads(sys.argv[1]):
    module = importlib.import_module(name)
    public = getattr(module, "__all__", None) or [k for k in vars(module) if not k.startswith("_")]
    # (`annotations`, the `from __future__` line's feature: bound as a name, never used)
    skip = (types.ModuleType, __future__._Feature)
    names[name] = sorted(k for k in public if not isinstance(getattr(module, k), skip))
print(json.dumps(names))
"""


def _python(code: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("sdk", "never_needed"), [("openai", "openai.types.graders"), ("anthropic", "anthropic.resources.skills")]
)
def test_an_sdk_loads_fewer_modules_and_binds_the_same_names(sdk: str, never_needed: str) -> None:
    lazy = _python(_LAZY_SIDE, sdk)
    modules = lazy["modules"]
    assert isinstance(modules, list)
    assert never_needed not in modules  # an eager `types/__init__` imports every type
    names = lazy["lazy"]
    assert isinstance(names, dict) and f"{sdk}.types" in names
    eager = _python(_EAGER_SIDE, json.dumps(sorted(names)))
    for package, bound in names.items():
        assert bound == eager[package], package


def test_a_lazy_package_answers_attributes_submodules_and_dir() -> None:
    code = """
from soulwire.llm.sdk_import import import_sdk
openai = import_sdk("openai")
import sys
assert "openai.types.batch" not in sys.modules
from openai.types import Batch
assert Batch is sys.modules["openai.types.batch"].Batch
assert openai.types.chat.ChatCompletionChunk.__name__ == "ChatCompletionChunk"
assert "Batch" in dir(openai.types) and "chat" in dir(openai.types)
try:
    openai.types.NoSuchThing
except AttributeError as exc:
    assert "NoSuchThing" in str(exc)
else:
    raise SystemExit("a missing name did not raise AttributeError")
client = openai.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
assert client.chat.completions.with_streaming_response is not None
print("{}")
"""
    _python(code)


def test_only_a_pure_reexport_init_is_loaded_lazily(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text(
        "from __future__ import annotations\n"
        "from .alpha import A as A, B\n"
        "from .beta.gamma import C\n"
        "__all__ = ['A', 'C']\n"
    )
    assert _reexports(str(init)) == ({"A": "alpha", "B": "alpha", "C": "beta.gamma"}, ["A", "C"])
    for body in (
        "from .alpha import A\nX = 1\n",  # code besides the re-exports: run as usual
        "from .alpha import *\n",
        "from .alpha import alpha\n",  # a name its submodule's import would rebind
        "import os\n",
        "from . import alpha\n",
        "def broken(:\n",
    ):
        init.write_text(body)
        assert _reexports(str(init)) is None, body
