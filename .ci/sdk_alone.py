"""Run in a venv where only `pip install ./sdk` was done: the SDK imports, the engine is not
there, and every installed distribution is soulwire-sdk or one of its requirements'."""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import re
import sys

import soulwire.sdk
import soulwire.wire.messages  # noqa: F401  (the pydantic models load)

assert importlib.util.find_spec("soulwire.engine") is None, "the engine is installed"
needed, todo = {"soulwire-sdk", "pip", "setuptools", "wheel"}, ["soulwire-sdk"]
while todo:
    try:
        requirements = metadata.requires(todo.pop()) or []
    except metadata.PackageNotFoundError:  # a requirement for another Python (a marker)
        continue
    for requirement in requirements:
        if "extra ==" in requirement:
            continue
        name = re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        if name not in needed:
            needed.add(name)
            todo.append(name)
installed = {(d.metadata["Name"] or "").lower().replace("_", "-") for d in metadata.distributions()}
extra = installed - needed
if extra:
    sys.exit(f"sdk_alone: installed beyond soulwire-sdk's requirements: {sorted(extra)}")
print(f"sdk_alone: soulwire.sdk {soulwire.__version__} with {sorted(installed - {'pip', 'setuptools'})}")
