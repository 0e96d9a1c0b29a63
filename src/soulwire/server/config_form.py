"""The configuration file as the web app edits it: the raw text and a form of the settings a
person changes (defaults, models, providers, loop control), both validated by the engine's own
models (`soulwire.config.model.Config`). Secrets — API keys, header and environment values —
never reach the page: they are sent as `SECRET`, and a `SECRET` that comes back keeps the
stored value. The file is edited in place (tomlkit for TOML), so comments and every key the
form does not know survive a save."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from soulwire.errors import SoulwireError

SECRET = "<secret: unchanged>"
"""Stands for a stored secret in what the page sees; saving it keeps the stored value."""

TOP_FIELDS = (
    "default_model", "default_thinking", "default_yolo", "default_plan_mode",
    "approval", "approval_scope", "sandbox", "sandbox_network",
)  # fmt: skip
LOOP_FIELDS = (
    "max_steps_per_turn", "max_retries_per_step", "max_ralph_iterations",
    "reserved_context_size", "compaction_trigger_ratio",
)  # fmt: skip
PROVIDER_FIELDS = ("type", "base_url", "api_key", "custom_headers", "env")
MODEL_FIELDS = ("provider", "model", "max_context_size", "capabilities", "display_name")
_ROOT_PROBLEMS = (
    (re.compile(r"default_model '()"), "default_model"),
    (re.compile(r"model '([^']+)' uses unknown provider"), "models.{}.provider"),
)
"""Problems the model reports for the whole configuration, and the field each is about."""


class FormError(SoulwireError):
    """A save that cannot be done: `errors` are `{field, message}` (field: a dotted path)."""

    def __init__(self, message: str, errors: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors


# -- secrets ----------------------------------------------------------------------------------
def _secret_paths(data: Any) -> Iterator[tuple[str, ...]]:
    """Where secrets live: providers'/services' `api_key`, values of `custom_headers`/`env`."""
    for section in ("providers", "services"):
        tables = data.get(section) if isinstance(data, dict) else None
        if not isinstance(tables, dict):
            continue
        for name, table in tables.items():
            if not isinstance(table, dict):
                continue
            if isinstance(table.get("api_key"), str) and table["api_key"]:
                yield (section, str(name), "api_key")
            for key in ("custom_headers", "env"):
                values = table.get(key)
                if isinstance(values, dict):
                    for inner, value in values.items():
                        if isinstance(value, str) and value:
                            yield (section, str(name), key, str(inner))


def _get(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def masked(data: Any) -> Any:
    """A copy of the configuration (plain or tomlkit) with every secret replaced by SECRET."""
    out = copy.deepcopy(data)
    for path in list(_secret_paths(out)):
        holder = _get(out, path[:-1])
        holder[path[-1]] = SECRET
    return out


def _restore(data: Any, stored: dict[str, Any], prefix: tuple[str, ...] = ()) -> None:
    """Put the stored value back wherever SECRET came back; an unknown one is an error."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in list(items):
        path = (*prefix, str(key))
        if value == SECRET:
            old = _get(stored, path)
            if not isinstance(old, str):
                field = ".".join(path)
                raise FormError(f"{field}: there is no stored secret to keep; type the value", [
                    {"field": field, "message": "there is no stored secret to keep; type the value"}
                ])  # fmt: skip
            data[key] = old
        elif isinstance(value, dict | list):
            _restore(value, stored, path)


# -- the file ---------------------------------------------------------------------------------
def load(path: Path) -> tuple[str, Any]:
    """(the text, an editable document: a tomlkit document or a JSON object)."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return text, parse(text, path)


def parse(text: str, path: Path) -> Any:
    if path.suffix == ".json":
        try:
            value = json.loads(text) if text.strip() else {}
        except ValueError as exc:
            raise FormError(f"{path}: not JSON: {exc}", []) from None
        if not isinstance(value, dict):
            raise FormError(f"{path}: a .json configuration must be a JSON object", [])
        return value
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise FormError(f"{path}: not TOML: {exc}", []) from None


def dump(document: Any, path: Path) -> str:
    if path.suffix == ".json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    import tomlkit

    return tomlkit.dumps(document)


def plain(document: Any) -> dict[str, Any]:
    unwrap = getattr(document, "unwrap", None)
    if callable(unwrap):
        return cast(dict[str, Any], unwrap())
    return copy.deepcopy(cast(dict[str, Any], document))


def masked_text(text: str, path: Path) -> str:
    """The file's text with secrets replaced (comments and layout kept); unparsable text is
    sent as it is only when it holds nothing that looks like a key."""
    try:
        document = parse(text, path)
    except FormError:
        return re.sub(r"(?m)^(\s*api_key\s*=\s*).*$", rf'\1"{SECRET}"', text)
    if not any(True for _ in _secret_paths(plain(document))):
        return text
    return dump(masked(document), path)


def text_to_save(text: str, path: Path) -> str:
    """The raw editor's text with SECRET replaced by the stored values (the text as typed
    when it holds none)."""
    if SECRET not in text:
        return text
    _, stored = load(path)
    document = parse(text, path)
    _restore(document, plain(stored))
    return dump(document, path)


# -- validation -------------------------------------------------------------------------------
def field_errors(raw: dict[str, Any]) -> list[dict[str, str]]:
    """What the engine's Config model says of `raw`, each problem with the field it is about."""
    from soulwire.config.model import Config

    try:
        Config.model_validate(raw)
    except ValidationError as exc:
        errors: list[dict[str, str]] = []
        for error in exc.errors():
            message = str(error["msg"]).removeprefix("Value error, ")
            field = ".".join(str(p) for p in error["loc"])
            if not field:
                for pattern, template in _ROOT_PROBLEMS:
                    if found := pattern.search(message):
                        field = template.format(found.group(1))
                        break
            errors.append({"field": field, "message": message})
        return errors
    return []


def check(raw: dict[str, Any], origin: Path) -> None:
    errors = field_errors(raw)
    if errors:
        summary = "; ".join(f"{e['field'] or 'configuration'}: {e['message']}" for e in errors)
        raise FormError(f"{origin}: {summary}", errors)


# -- the form ---------------------------------------------------------------------------------
def form_values(raw: dict[str, Any]) -> dict[str, Any]:
    """The settings the form shows (defaults filled in by the engine's model), secrets masked."""
    from soulwire.config.model import Config, LoopControl, ModelConfig, ProviderConfig

    try:
        config = Config.model_validate(raw)
        base = config.model_dump()
    except ValidationError:  # show what the file says; the form's save reports the problems
        base = {**Config.model_construct().model_dump(), **raw}
    values: dict[str, Any] = {k: base.get(k) for k in TOP_FIELDS}
    loop: dict[str, Any] = raw.get("loop_control") or {}
    if not isinstance(loop, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
        loop = {}
    loop_defaults = LoopControl.model_construct().model_dump()
    values["loop_control"] = {k: loop.get(k, loop_defaults[k]) for k in LOOP_FIELDS}
    provider_defaults = ProviderConfig.model_construct(type="").model_dump()
    values["providers"] = {
        str(name): {k: table.get(k, provider_defaults.get(k)) for k in PROVIDER_FIELDS}
        for name, table in (raw.get("providers") or {}).items()
        if isinstance(table, dict)
    }
    model_defaults = ModelConfig.model_construct(provider="", model="").model_dump()
    values["models"] = {
        str(alias): {k: table.get(k, model_defaults.get(k)) for k in MODEL_FIELDS}
        for alias, table in (raw.get("models") or {}).items()
        if isinstance(table, dict)
    }
    return masked(values)


def _table(document: Any, key: str) -> Any:
    if key not in document or not isinstance(document[key], dict):
        if isinstance(document, dict) and not hasattr(document, "as_string"):
            document[key] = {}
        else:
            import tomlkit

            document[key] = tomlkit.table()
    return document[key]


def _set(table: Any, key: str, value: Any, default: Any) -> None:
    """Write a field the file has, or one that differs from the default; leave others out."""
    if value is None or (key not in table and value == default):
        if value is None and key in table:
            del table[key]
        return
    if key not in table or plain(table[key]) != value:
        table[key] = value


def apply_form(document: Any, values: dict[str, Any]) -> Any:
    """The document with the form's values written in: known keys set, providers and models
    the form removed deleted; everything else (comments, unknown keys, other sections) kept."""
    from soulwire.config.model import Config, LoopControl, ModelConfig, ProviderConfig

    stored = plain(document)
    values = copy.deepcopy(values)
    _restore(values, stored)
    top = Config.model_construct().model_dump()
    for key in TOP_FIELDS:
        if key in values:
            _set(document, key, values[key], top.get(key))
    if isinstance(values.get("loop_control"), dict):
        loop_defaults = LoopControl.model_construct().model_dump()
        section = _table(document, "loop_control")
        for key in LOOP_FIELDS:
            if key in values["loop_control"]:
                _set(section, key, values["loop_control"][key], loop_defaults[key])
        if not section and "loop_control" not in stored:
            del document["loop_control"]
    for section_name, fields, defaults in (
        ("providers", PROVIDER_FIELDS, ProviderConfig.model_construct(type="").model_dump()),
        ("models", MODEL_FIELDS, ModelConfig.model_construct(provider="", model="").model_dump()),
    ):
        wanted = values.get(section_name)
        if not isinstance(wanted, dict):
            continue
        section = _table(document, section_name)
        for name in [n for n in section if n not in wanted]:
            del section[name]
        for name, entry in wanted.items():
            if not isinstance(entry, dict):
                raise FormError(f"{section_name}.{name} must be a table", [])
            table = _table(section, str(name))
            for key in fields:
                if key in entry:
                    _set(table, key, entry[key], defaults.get(key))
    return document


__all__ = [
    "SECRET",
    "FormError",
    "apply_form",
    "check",
    "dump",
    "form_values",
    "load",
    "masked_text",
    "parse",
    "plain",
    "text_to_save",
]
