"""The `_scripted_echo` provider's scripts file: found and read with the stdlib only, so that
start-up can check it before answering anyone (config/precheck.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from soulwire.errors import SoulwireError

SCRIPTS_ENV = ("SOULWIRE_SCRIPTED_ECHO_SCRIPTS", "KIMI_SCRIPTED_ECHO_SCRIPTS")


class ScriptsFileError(SoulwireError, ValueError):
    """The scripts file is missing, unreadable or malformed (the message says which)."""


def scripts_path(env: Mapping[str, str]) -> Path:
    """The file the environment names. Raises ScriptsFileError when none is named."""
    text = next((env[k] for k in SCRIPTS_ENV if env.get(k)), None)
    if not text:
        raise ScriptsFileError(
            f"scripted provider needs {SCRIPTS_ENV[1]} (or {SCRIPTS_ENV[0]}) to name a scripts file"
        )
    return Path(text)


def check_scripts_file(path: Path, *, parse_up_to: int = 1 << 20) -> None:
    """What start-up checks, cheaply: the file is readable and, up to `parse_up_to` bytes, well
    formed. A bigger one (a benchmark's) is only opened and its first byte looked at here;
    the provider reads it in full later and a prompt then gets the error."""
    try:
        size = path.stat().st_size
        if size <= parse_up_to:
            read_scripts(path)
            return
        with path.open("rb") as handle:
            head = handle.read(4096).lstrip()
    except OSError as exc:
        raise ScriptsFileError(f"cannot read scripts file {path}: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".json" and not head.startswith(b"["):
        raise ScriptsFileError(f"scripts file {path}: expected a JSON list of strings")


_last_read: tuple[tuple[str, int, int], list[str]] | None = None
"""The file read last, by (path, mtime, size): start-up's check and the provider read the same
file moments apart, and a benchmark's can hold a 100k-line reply."""


def read_scripts(path: Path) -> list[str]:
    """A JSON list of strings (always for a `.json` file, or text starting with `[`), else
    text with scripts separated by lines of `---`."""
    global _last_read
    try:
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        if _last_read is not None and _last_read[0] == key:
            return list(_last_read[1])
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ScriptsFileError(f"cannot read scripts file {path}: {reason}") from None
    scripts = _parse(path, text)
    _last_read = (key, scripts)
    return list(scripts)


def _parse(path: Path, text: str) -> list[str]:
    if path.suffix.lower() == ".json" or text.lstrip().startswith("["):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ScriptsFileError(f"scripts file {path} is not valid JSON ({exc})") from None
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise ScriptsFileError(f"scripts file {path}: expected a JSON list of strings")
        return list(value)
    return [chunk for chunk in text.split("\n---\n") if chunk.strip()]
