"""Edits of the user's default config file (`<share>/config.toml`, or `config.json` when only
that exists) for `login` / `logout`: read with tomlkit so that comments and layout the user
wrote survive, written atomically with private permissions (the file may hold API keys)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def default_config_path(share: Path) -> Path:
    toml, js = share / "config.toml", share / "config.json"
    return js if js.is_file() and not toml.is_file() else toml


def load_document(path: Path) -> Any:
    """The file as an editable mapping (a tomlkit document for TOML); empty when missing."""
    import tomlkit

    if not path.is_file():
        return {} if path.suffix == ".json" else tomlkit.document()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return tomlkit.parse(text)


def save_document(path: Path, document: Any) -> None:
    import tomlkit

    text = json.dumps(document, indent=2) + "\n" if path.suffix == ".json" else tomlkit.dumps(document)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def table(document: Any, key: str) -> Any:
    """`document[key]`, created as an empty table when missing."""
    if key not in document:
        if isinstance(document, dict) and not hasattr(document, "as_string"):
            document[key] = {}
        else:
            import tomlkit

            document[key] = tomlkit.table()
    return document[key]
