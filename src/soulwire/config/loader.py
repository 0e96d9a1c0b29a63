"""Finding and reading configuration without validating it (cheap enough for start-up)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soulwire.errors import SoulwireError
from soulwire.wire.environment import SERVER_TOKEN_ENV, SERVER_TOKEN_FILE, share_dir_from


class ConfigError(SoulwireError):
    """The configuration cannot be used; the CLI reports it as a usage error (exit 2)."""


def share_dir(env: Mapping[str, str] | None = None) -> Path:
    """`SOULWIRE_SHARE_DIR`, else `KIMI_SHARE_DIR` (so kimi clients keep working), else ~/.soulwire."""
    value = share_dir_from(os.environ if env is None else env)
    return Path(value).expanduser() if value else Path.home() / ".soulwire"


def client_token(token_file: str | None = None, share: Path | None = None) -> str | None:
    """The token a client sends to a `serve`: `token_file`'s if given, else
    `$SOULWIRE_SERVER_TOKEN`, else the local server's in the share dir (`share`, default
    `share_dir()`); None when there is none. Raises OSError when `token_file` cannot be read."""
    if token_file:
        return Path(token_file).expanduser().read_text(encoding="utf-8").strip() or None
    env = os.environ.get(SERVER_TOKEN_ENV, "").strip()
    if env:
        return env
    try:
        return ((share or share_dir()) / SERVER_TOKEN_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def parse_config_text(text: str, *, origin: str = "--config") -> dict[str, Any]:
    """Parse a whole config given as text: JSON is tried first, then TOML."""
    try:
        value = json.loads(text)
    except ValueError:
        value = _parse_toml(text, origin, "neither valid JSON nor valid TOML")
    return _table(value, origin)


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a config file: `.json` as JSON, anything else as TOML."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".json":
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{path}: invalid JSON ({exc})") from None
    else:
        value = _parse_toml(text, str(path), "invalid TOML")
    return _table(value, str(path))


def _parse_toml(text: str, origin: str, problem: str) -> Any:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: {problem} ({exc})") from None


def _table(value: Any, origin: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{origin}: the configuration must be a table/object")
    return value


def load_raw_config(
    *, config_file: str | None, config_text: str | None, share: Path
) -> tuple[dict[str, Any], Path | None]:
    """The raw config mapping and the file it came from (None for --config text or defaults)."""
    if config_text is not None:
        return parse_config_text(config_text), None
    if config_file is not None:
        path = Path(config_file).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file does not exist: {path}")
        return read_config_file(path), path
    for name in ("config.toml", "config.json"):
        path = share / name
        if path.is_file():
            return read_config_file(path), path
    return {}, None
