"""The `soulwire` wheel depends on `soulwire-sdk` (./sdk), which ships src/soulwire/{wire,sdk}
and the leaf modules they import; this project's wheel leaves those out (pyproject's
`exclude`). The dependency is added here, to a standard wheel only: an editable install serves
the whole src/ tree itself, and an installed copy of the SDK would shadow it (its
`soulwire/__init__.py` in site-packages comes before the editable path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class SDKDependency(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version != "standard":
            return
        sdk = Path(self.root) / "sdk"
        if (sdk / "pyproject.toml").is_file():  # a clone (or this project's sdist): the SDK beside it
            requirement = f"soulwire-sdk @ {sdk.resolve().as_uri()}"
        else:
            requirement = f"soulwire-sdk=={self.metadata.version}"
        build_data["dependencies"].append(requirement)
