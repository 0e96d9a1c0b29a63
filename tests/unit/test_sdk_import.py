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

from soulwire.llm.sdk_import import _reexports, _root_plan  # pyright: ignore[reportPrivateUsage]

# What every lazily loaded package binds, in a fresh interpreter: its public non-module names
# after resolving them all (`import *`), plus what the SDK's client needs to work.
_LAZY_SIDE = """
import json, sys, types
from soulwire.llm.sdk_import import LAZY_PACKAGES, import_sdk
sdk = import_sdk(sys.argv[1])
getattr(sdk, sys.argv[2])  # the client class (the Anthropic root binds it at first use)
loaded_at_import = sorted(sys.modules)
import_sdk(sys.argv[1] + ".types")  # (a request through the client needs none of its types)
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


def _run_beside(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter that imports the packages written under `tmp_path`."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )


@pytest.mark.parametrize(
    ("sdk", "client", "never_needed"),
    [
        ("openai", "AsyncOpenAI", "openai.types.graders"),
        ("anthropic", "AsyncAnthropic", "anthropic.resources.skills"),
    ],
)
def test_an_sdk_loads_fewer_modules_and_binds_the_same_names(
    sdk: str, client: str, never_needed: str
) -> None:
    lazy = _python(_LAZY_SIDE, sdk, client)
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
import subprocess
children = []
popen_init = subprocess.Popen.__init__
def counting_init(self, args, *rest, **kwargs):
    children.append(args)
    popen_init(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = counting_init

async def run():
    async for _ in model.provider.stream(ChatRequest("sys", [Message(role="user", content="hi")]), StreamResult()):
        pass

anyio.run(run)
print(sorted(name for name in sys.modules if name.startswith(sdk) and name not in before))
print(children)
"""


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_preload_leaves_no_sdk_module_for_the_first_request(kind: str) -> None:
    """The engine preloads the SDK while the person types; what the SDK (and `import_sdk`)
    defer to first use must be loaded then too, not at the first request — nor a child
    process (the OpenAI SDK's platform header runs `uname -p` through the stdlib, once)."""
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
    assert done.stdout.split("\n")[:2] == ["[]", "[]"]


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
    done = _run_beside(tmp_path, code)
    assert done.returncode == 0, done.stderr


_DEFERRED = """
import sys
from soulwire.llm import sdk_import
sdk_import.DEFERRED = {name: ("make_error",) for name in ("fakesdk.errors", "fakesdk.errors2",
                       "fakesdk.nodef", "fakesdk.broken")}
sdk_import.import_sdk("fakesdk")
from fakesdk.errors import make_error  # the module's code has not run
errors = sys.modules["fakesdk.errors"]
assert "RAN" not in vars(errors) and make_error.__name__ == "make_error"
assert not hasattr(errors, "__path__")  # the import system's probes run nothing either
assert "RAN" not in vars(errors)
assert make_error(404) == ("Missing", 404)  # the first call runs it
assert errors.RAN == 1 and errors.make_error is not make_error
assert make_error(500) == ("Failed", 500) and errors.RAN == 1  # (once)
import fakesdk.errors as again
assert again is errors
from fakesdk.errors2 import Missing  # any other name runs the module at once
assert sys.modules["fakesdk.errors2"].RAN == 1 and Missing.__name__ == "Missing"
from fakesdk.nodef import make_error as plain  # a name its source does not `def`: imported as usual
assert sys.modules["fakesdk.nodef"].RAN == 1 and plain() == "lambda"
from fakesdk.broken import make_error as broken
for _ in range(2):
    try:
        broken()
    except (ZeroDivisionError, ImportError) as exc:
        print(type(exc).__name__)
"""


def test_a_deferred_module_runs_at_the_first_use_of_any_of_its_names(tmp_path: Path) -> None:
    package = tmp_path / "fakesdk"
    package.mkdir()
    (package / "__init__.py").write_text("")
    errors = (
        "RAN = globals().get('RAN', 0) + 1\n"
        "class Missing(Exception): ...\n"
        "def make_error(status):\n"
        "    return ('Missing' if status == 404 else 'Failed', status)\n"
    )
    (package / "errors.py").write_text(errors)
    (package / "errors2.py").write_text(errors)
    (package / "nodef.py").write_text("RAN = 1\nmake_error = lambda: 'lambda'\n")
    (package / "broken.py").write_text("def make_error(): ...\n1 / 0\n")
    done = _run_beside(tmp_path, _DEFERRED)
    assert done.returncode == 0, done.stderr
    # the module's error, then ImportError from it at every later use (as a failed import)
    assert done.stdout.split() == ["ZeroDivisionError", "ImportError"]


# Each name the Anthropic SDK's root exports, described (kind, module, qualified name): through
# `import_sdk` (its `__init__` not run until a name needs it) and by a plain `import anthropic`.
_DESCRIBE = """
import types
def describe(value):
    if isinstance(value, types.ModuleType):  # (the `__init__` sets `__module__` on its `types` too)
        return ["module", value.__name__]
    return [type(value).__name__, getattr(value, "__module__", None), getattr(value, "__qualname__", None)]
"""
_ROOT_LAZY = (
    _DESCRIBE
    + """
import json, sys
from soulwire.llm.sdk_import import import_sdk
sdk = import_sdk("anthropic")
used = {n: describe(getattr(sdk, n)) for n in sys.argv[1:]}  # what the adapter and its errors use
sdk.DefaultAsyncHttpxClient()  # (its base client binds the deferred modules' functions)
unused = sorted(m for m in sys.modules if m.startswith(("anthropic.lib.vertex", "anthropic.lib.bedrock",
    "anthropic.lib.foundry", "anthropic.lib.aws", "anthropic.lib.google_cloud", "anthropic.lib.tools",
    "anthropic.types.beta", "anthropic.types.message_create_params", "anthropic.types.file_expired_error")))
exported = {n: describe(getattr(sdk, n)) for n in sdk.__all__}
vertex = describe(sdk.AnthropicVertex)  # bound by a star import: the whole __init__ runs for it
print(json.dumps({"used": used, "unused": unused, "exported": exported, "vertex": vertex,
                  "ran": "anthropic.lib.vertex" in sys.modules, "dir": "AnthropicBedrock" in dir(sdk)}))
"""
)
_ROOT_EAGER = (
    _DESCRIBE
    + """
import json, sys, anthropic
print(json.dumps({"exported": {n: describe(getattr(anthropic, n)) for n in anthropic.__all__},
                  "vertex": describe(anthropic.AnthropicVertex)}))
"""
)


def test_the_anthropic_root_loads_only_what_a_request_needs_and_binds_the_same_names() -> None:
    used = ["AsyncAnthropic", "DefaultAsyncHttpxClient", "APIError", "APIStatusError", "APITimeoutError"]
    lazy = _python(_ROOT_LAZY, *used, "APIConnectionError")
    eager = _python(_ROOT_EAGER)
    assert lazy["unused"] == []  # its Vertex, Bedrock, Foundry… clients: never imported for a request
    exported = eager["exported"]
    assert isinstance(exported, dict)
    assert lazy["used"] == {name: exported[name] for name in [*used, "APIConnectionError"]}
    assert lazy["exported"] == exported  # `__module__` renamed to "anthropic" as its `__init__` does
    assert lazy["vertex"] == eager["vertex"] and lazy["ran"] and lazy["dir"]


def test_a_root_plan_reads_the_inits_bindings_set_up_and_renames(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text(
        "import typing as _t\n"
        "from . import types\n"
        "from ._client import Client, AsyncClient as Async\n"
        "from ._logs import setup as _setup\n"
        "from .lib.extra import *\n"
        "__all__ = ['Client', 'Async']\n"
        "_setup()\n"
        "for __name in __all__:\n"
        "    locals()[__name].__module__ = 'pkg'\n"
    )
    plan = _root_plan(str(init))
    assert plan is not None
    _, names, exported, calls, renames = plan
    assert names == {
        "types": (None, "types"),
        "Client": ("_client", "Client"),
        "Async": ("_client", "AsyncClient"),
        "_setup": ("_logs", "setup"),
    }
    assert (exported, calls, renames) == (["Client", "Async"], ["_setup"], True)
    init.write_text("def broken(:\n")
    assert _root_plan(str(init)) is None


_PRELOAD_TLS = """
import json, ssl, sys
from soulwire import tls
from soulwire.config.model import Config
from soulwire.llm.registry import resolve_model

def preloaded(url):
    config = Config.model_validate({
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "test-model"}},
        "providers": {"p": {"type": sys.argv[1], "base_url": url, "api_key": "sk-x"}},
    })
    provider = resolve_model(config, model_alias=None, thinking=None, env={}).provider
    provider.preload()
    return provider._client.get()._client  # the SDK client's httpx2 client

plain = preloaded("http://127.0.0.1:9/v1")
after_plain = tls._context is not None
context = plain._transport._pool._ssl_context
secure = preloaded("https://127.0.0.1:9/v1")
print(json.dumps({
    "after_plain": after_plain,
    "after_https": tls._context is not None,
    "plain": [context.verify_mode == ssl.CERT_REQUIRED, context.check_hostname, len(context.get_ca_certs())],
    "https_shared": secure._transport._pool._ssl_context is tls._context,
}))
"""


@pytest.mark.parametrize("kind", ["anthropic", "openai_legacy"])
def test_a_plain_http_provider_reads_no_ca_bundle_and_an_https_one_shares_it(kind: str) -> None:
    """Over plain HTTP (a local server) there is nothing to verify: the client's TLS context
    trusts no certificate (so anything that would need TLS fails) and the CA bundle is never
    read; over HTTPS the preload builds the shared context."""
    result = _python(_PRELOAD_TLS, kind)
    assert result == {
        "after_plain": False,
        "after_https": True,
        "plain": [True, True, 0],
        "https_shared": True,
    }


_OPENAI_ROOT = """
import json, sys
from soulwire.llm.sdk_import import import_sdk
sdk = import_sdk("openai")
for name in ("AsyncOpenAI", "DefaultAsyncHttpxClient", "APIError", "APIStatusError", "APITimeoutError"):
    getattr(sdk, name)  # what the adapters and their errors use
sdk.AsyncOpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
unused = sorted(m for m in sys.modules if m.startswith(("openai.lib.bedrock", "openai.providers", "openai.lib.azure")))
sdk.api_key = "set before the __init__ ran"  # a module-level setting of the SDK's own
sdk.base_url  # any other name: the whole __init__ runs now
print(json.dumps({"unused": unused, "api_key": sdk.api_key, "ran": "openai.lib.bedrock" in sys.modules,
                  "azure": sdk.AzureOpenAI.__name__}))
"""


def test_the_openai_root_loads_no_bedrock_vertex_or_azure_client_and_keeps_its_settings() -> None:
    found = _python(_OPENAI_ROOT)
    assert found["unused"] == []  # ~35 CPU-ms of a first request's imports, never used by one
    # A setting made before the `__init__` ran is kept when it runs (it would reset it to None).
    assert found["api_key"] == "set before the __init__ ran" and found["ran"]
    assert found["azure"] == "AzureOpenAI"
