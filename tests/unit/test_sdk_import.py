"""The provider SDKs imported with their re-export packages loaded lazily: fewer modules at
import, and the same names as an eager import (each case in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import PROVIDERS, Answer, stream_reply

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
    assert _reexports(str(init)) == (
        {"A": ("alpha", "A"), "B": ("alpha", "B"), "C": ("beta.gamma", "C")},
        ["A", "C"],
    )
    for body in (
        "from .alpha import A\nX = 1\n",  # code besides the re-exports: run as usual
        "from .alpha import *\n",
        "from .alpha import alpha\n",  # a name its submodule's import would rebind
        "from .alpha import beta\nfrom .beta import B\n",  # another submodule's name
        "import os\n",
        "from . import alpha\n",
        "def broken(:\n",
    ):
        init.write_text(body)
        assert _reexports(str(init)) is None, body


_FIRST_REQUEST = """
import sys, anyio
from soulwire.config.model import Config
from soulwire.llm.message import Message
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.registry import resolve_model

kind, url = sys.argv[1], sys.argv[2]
config = Config.model_validate({
    "default_model": "m",
    "models": {"m": {"provider": "p", "model": "test-model"}},
    "providers": {"p": {"type": kind, "base_url": url, "api_key": "sk-x"}},
})
model = resolve_model(config, model_alias=None, thinking=None, env={})
model.provider.preload()
sdk = "anthropic" if kind == "anthropic" else "openai"
before = {name for name in sys.modules if name.startswith(sdk)}

async def run():
    async for _ in model.provider.stream(ChatRequest("sys", [Message(role="user", content="hi")]), StreamResult()):
        pass

anyio.run(run)
print(sorted(name for name in sys.modules if name.startswith(sdk) and name not in before))
"""


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_preload_leaves_no_sdk_module_for_the_first_request(kind: str) -> None:
    """The engine preloads the SDK while the person types; what the SDK (and `import_sdk`)
    defer to first use must be loaded then too, not at the first request."""
    with FakeLLMServer() as server:
        server.queue(stream_reply(kind, Answer(message_id="m1", text=["hi"])))
        url = server.url if kind == "anthropic" else server.url + "/v1"
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_REQUEST, kind, url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_alias_a_dunder_all_and_an_init_with_code(tmp_path: Path) -> None:
    """On a package of our own under a lazy root: `as` names resolve to the right object,
    `import *` follows `__all__`, and a sub-package whose `__init__` has code runs it."""
    types_dir = tmp_path / "fakesdk" / "types"
    (types_dir / "eager").mkdir(parents=True)
    (tmp_path / "fakesdk" / "__init__.py").write_text("")
    (types_dir / "__init__.py").write_text(
        "from .alpha import Thing as Alias, Other\nfrom .eager import Flag\n__all__ = ['Alias']\n"
    )
    (types_dir / "alpha.py").write_text("class Thing: ...\nclass Other: ...\nLOADED = True\n")
    (types_dir / "eager" / "__init__.py").write_text("from .beta import Flag\nRAN = True\n")
    (types_dir / "eager" / "beta.py").write_text("Flag = 'flag'\n")
    code = """
import sys
from soulwire.llm import sdk_import
sdk_import.LAZY_PACKAGES = ("fakesdk.types",)
sdk_import._UNDER_ROOTS = ("fakesdk.types.",)
types = sdk_import.import_sdk("fakesdk.types")
assert type(types.__spec__.loader).__name__ == "_LazyPackage"
assert "fakesdk.types.alpha" not in sys.modules
from fakesdk.types.alpha import Thing
assert types.Alias is Thing and types.Other.__name__ == "Other"
assert types.Flag == "flag"
eager = sys.modules["fakesdk.types.eager"]
assert eager.RAN and type(eager.__spec__.loader).__name__ != "_LazyPackage"
scope = {}
exec("from fakesdk.types import *", scope)
assert sorted(k for k in scope if not k.startswith("_")) == ["Alias"]
print("{}")
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    assert done.returncode == 0, done.stderr
