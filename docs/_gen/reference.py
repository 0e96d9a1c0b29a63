"""MkDocs hook: the reference pages, generated from the code at every build so they never drift.

- `reference/cli.md`: every command's `--help`, from the argument parsers themselves;
- `reference/config.md`: every configuration key, from the pydantic config model (types,
  defaults, bounds, the attribute docstrings);
- `reference/wire.md`: every Wire method, event and request, from the exported JSON Schema
  (`soulwire schema`), each with an example built from its schema.

The SDK reference (`reference/sdk.md`) is mkdocstrings reading the docstrings.
`python docs/_gen/reference.py OUT_DIR` writes the same pages without MkDocs (to look at them).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import itertools
import json
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

PAGES = ("reference/cli.md", "reference/config.md", "reference/wire.md")


# ---------------------------------------------------------------------------------- CLI


def _help(argv: list[str]) -> str:
    from soulwire.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit:
            pass
    return out.getvalue().rstrip()


def cli_page() -> str:
    from soulwire.cli.completion import subcommands

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: a fixed width, a stable page
    try:
        return _cli_page(subcommands())
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _cli_page(commands: list[str]) -> str:
    parts = [
        "# Command line",
        "",
        "Generated from the argument parsers (`soulwire … --help`), so it always matches the code.",
        "Every mistake on the command line is one line on stderr and exit code 2; see",
        "[Troubleshooting](../troubleshooting.md) for the messages and their fixes.",
        "",
        "## soulwire",
        "",
        "```text",
        _help(["--help"]),
        "```",
    ]
    for command in commands:
        if command == "acp":
            continue  # `soulwire acp` takes the main command's flags (it is `soulwire --acp`)
        parts += ["", f"## soulwire {command}", "", "```text", _help([command, "--help"]), "```"]
    for command, sub in (("sessions", ("list", "show", "delete", "export")), ("fleet", ("run", "report"))):
        for name in sub:
            parts += [
                "",
                f"### soulwire {command} {name}",
                "",
                "```text",
                _help([command, name, "--help"]),
                "```",
            ]
    parts += [
        "",
        "## Exit codes",
        "",
        "| code | meaning |",
        "| --- | --- |",
        "| 0 | success |",
        "| 1 | a runtime failure (a provider error that retrying will not fix, max steps reached, a bug) |",
        "| 2 | a usage or configuration error: fix what the one-line message says |",
        "| 75 | `--print`: a provider failure worth retrying later (rate limit, overload) |",
        "| 130 | stopped by Ctrl-C (the turn ends as a Wire `cancel` ends it; the session keeps its steps) |",
        "| 141 | the reader of stdout went away (`soulwire … \\| head`) |",
    ]
    return "\n".join(parts) + "\n"


# ------------------------------------------------------------------------------- config


def _attribute_docs(cls: type) -> dict[str, str]:
    """`field: T = …` followed by a string literal: that string documents the field."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    docs: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for before, after in itertools.pairwise(body):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[before.target.id] = " ".join(after.value.value.split())
    return docs


def _type_name(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "anyOf" in schema:
        return " or ".join(_type_name(s) for s in schema["anyOf"])
    if "$ref" in schema:
        return "table"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type_name(schema.get('items', {}))}"
    if kind == "object":
        values = schema.get("additionalProperties")
        return f"table of {_type_name(values)}" if isinstance(values, dict) else "table"
    return {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}.get(
        kind, kind
    )


def _bounds(schema: dict[str, Any]) -> str:
    parts = []
    for key, word in (
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("minLength", "length ≥"),
    ):
        if key in schema:
            parts.append(f"{word} {schema[key]}")
    return ", ".join(parts)


def _section_table(title: str, cls: Any, lead: str) -> list[str]:
    schema = cls.model_json_schema()
    docs = _attribute_docs(cls)
    required = set(schema.get("required", []))
    rows = [f"## {title}", "", lead, "", "| key | type | default | notes |", "| --- | --- | --- | --- |"]
    for name, prop in schema.get("properties", {}).items():
        if "$ref" in prop or (prop.get("type") == "object" and name in ("loop_control", "background")):
            continue  # a section of its own, below
        default = "required" if name in required else f"`{json.dumps(prop.get('default'))}`"
        if "default" not in prop and name not in required:
            default = "empty"
        notes = "; ".join(n for n in (_bounds(prop), docs.get(name, "")) if n)
        rows.append(f"| `{name}` | {_type_name(prop)} | {default} | {notes} |")
    return [*rows, ""]


def config_page() -> str:
    from soulwire.config import model

    doc = " ".join((model.Config.__doc__ or "").split())  # its own, not BaseModel's
    parts = [
        "# Configuration",
        "",
        "Generated from the configuration model (`soulwire.config.model`), so it always matches the code.",
        "The file is `config.toml` (or `config.json`) in the share dir (`$SOULWIRE_SHARE_DIR`, else",
        "`$KIMI_SHARE_DIR`, else `~/.soulwire`), or the file of `--config-file`, or the text of `--config`.",
        "The format is kimi's. Unknown keys are ignored; a value of the wrong type or out of bounds is",
        "refused before the engine starts (one line naming the file and the key, exit 2).",
        "`soulwire doctor` shows the configuration in use and where each value came from.",
        "",
        doc,
        "",
        "```toml",
        'default_model = "claude"',
        "",
        "[providers.anthropic]",
        'type = "anthropic"',
        'api_key = "sk-ant-…"              # or ANTHROPIC_API_KEY in the environment',
        "",
        "[models.claude]",
        'provider = "anthropic"',
        'model = "claude-sonnet-4-5"',
        "max_context_size = 200000",
        'capabilities = ["thinking", "image_in"]',
        "",
        "[loop_control]",
        "max_steps_per_turn = 200",
        "```",
        "",
    ]
    parts += _section_table("Top level", model.Config, "Keys at the top of the file.")
    parts += _section_table(
        "[providers.NAME]", model.ProviderConfig, "One table per provider; models name it in `provider`."
    )
    parts += _section_table(
        "[models.ALIAS]", model.ModelConfig, "One table per model alias (`--model ALIAS`)."
    )
    parts += _section_table("[loop_control]", model.LoopControl, "Limits of the agent loop.")
    parts += _section_table(
        "[background]", model.BackgroundConfig, " ".join((model.BackgroundConfig.__doc__ or "").split())
    )
    parts += _section_table(
        "[services.moonshot_search], [services.moonshot_fetch]",
        model.ServiceConfig,
        " ".join((model.ServiceConfig.__doc__ or "").split())
        + " `moonshot_search` enables the SearchWeb tool; FetchURL asks `moonshot_fetch` first.",
    )
    parts += _section_table(
        "[checkpoints]", model.CheckpointsConfig, " ".join((model.CheckpointsConfig.__doc__ or "").split())
    )
    parts += _section_table("[[hooks]]", model.HookConfig, " ".join((model.HookConfig.__doc__ or "").split()))
    parts += _budget_tables()
    return "\n".join(parts) + "\n"


def _budget_tables() -> list[str]:
    from soulwire.wire.budget import Budget, BudgetLimits

    lead = (
        "Limits on what the work may spend (see [Budgets](../guides/budgets.md)); the `--budget-*` flags, "
        "`initialize`'s `budget` and `set_budget` change them per session."
    )
    return [
        *_section_table("[budgets]", Budget, lead),
        *_section_table(
            "[budgets.turn], [budgets.session], [budgets.tree]",
            BudgetLimits,
            "The limits of one scope: each turn, the session's own calls (across turns and resumes), "
            "or the session with every sub-agent and background agent it started.",
        ),
    ]


# --------------------------------------------------------------------------------- Wire


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = root.get("$defs", {}).get(name, {})
    return schema


def example(
    schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0, name: str = ""
) -> Any:
    """A value that matches `schema`: its examples or default where given, else the simplest
    value of each required field (optional fields are left out unless they have a default);
    a string is named after its field (`"<tool_call_id>"`)."""
    root = root or schema
    if name == "protocol_version":
        from soulwire.wire import PROTOCOL_VERSION

        return PROTOCOL_VERSION
    schema = _resolve(schema, root)
    if schema.get("examples"):
        return schema["examples"][0]
    if "default" in schema and schema["default"] not in (None, [], {}):
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if _resolve(s, root).get("type") != "null"] or schema[key]
            return example(options[0], root, depth + 1, name)
    if "allOf" in schema:
        return example(schema["allOf"][0], root, depth + 1, name)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if depth > 6:
            return {}
        required = set(schema.get("required", []))
        return {
            key: example(prop, root, depth + 1, key)
            for key, prop in schema.get("properties", {}).items()
            if key in required or "default" in _resolve(prop, root)
        }
    if kind == "array":
        return [] if depth > 6 else [example(schema.get("items", {}), root, depth + 1)]
    if kind == "string":
        return f"<{name}>" if name else "…"
    return {"integer": 0, "number": 0.0, "boolean": False, "null": None}.get(kind or "")


def _json_block(value: Any) -> list[str]:
    return ["```json", json.dumps(value, ensure_ascii=False), "```", ""]


def _fields(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties", {})
    if not props:
        return ["(no fields)", ""]
    required = set(schema.get("required", []))
    rows = ["| field | type | required |", "| --- | --- | --- |"]
    for name, prop in props.items():
        rows.append(
            f"| `{name}` | {_type_name(_resolve(prop, schema))} | {'yes' if name in required else ''} |"
        )
    return [*rows, ""]


def _methods() -> dict[str, Any]:
    from soulwire.ui.wire.server import WireServer

    bare = object.__new__(WireServer)  # the method table only: no runtime needed to read it
    return WireServer.methods(bare)


def wire_page() -> str:
    from soulwire.cli.schema import wire_schemas
    from soulwire.wire import PROTOCOL_VERSION
    from soulwire.wire import checkpoints as checkpoint_models
    from soulwire.wire import methods as method_models

    schemas = wire_schemas()
    parts = [
        "# Wire protocol",
        "",
        f"Generated from the protocol types (`soulwire schema`), Wire {PROTOCOL_VERSION}.",
        "JSON-RPC 2.0, one JSON object per line on stdin/stdout of `soulwire --wire`.",
        "The client calls the methods below; the engine streams `event` notifications",
        "and sends `request`s the client answers. The examples",
        "are built from each message's schema (the simplest valid value of each required field).",
        "For the behaviour behind the messages see [Embed over Wire](../guides/wire.md).",
        "",
        "## Methods (client → engine)",
        "",
    ]
    for name, method in _methods().items():
        title = "".join(w.title() for w in name.split("_"))
        model = method.params or getattr(checkpoint_models, f"{title}Params", None)
        params = model.model_json_schema() if model is not None else None
        parts += [f"### `{name}`", ""]
        doc = method.handler.__doc__
        if doc:
            parts += [" ".join(doc.split()), ""]
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": "1", "method": name}
        if params is not None:
            request["params"] = example(params)
            parts += _fields(params)
        parts += _json_block(request)
        result_cls = getattr(method_models, f"{title}Result", None) or getattr(
            checkpoint_models, f"{title}Result", None
        )
        if result_cls is not None:
            parts += [
                "Result:",
                "",
                *_json_block(
                    {"jsonrpc": "2.0", "id": "1", "result": example(result_cls.model_json_schema())}
                ),
            ]
    parts += ["## Events (engine → client, method `event`)", ""]
    for name, schema in sorted(schemas["events"].items()):
        parts += [f"### `{name}`", ""]
        description = " ".join(schema.get("description", "").split())
        if description:
            parts += [description, ""]
        parts += _fields(schema)
        envelope = {"jsonrpc": "2.0", "method": "event", "params": {"type": name, "payload": example(schema)}}
        parts += _json_block(envelope)
    parts += ["## Requests (engine → client, method `request`)", ""]
    for name, schema in sorted(schemas["requests"].items()):
        parts += [f"### `{name}`", ""]
        description = " ".join(schema.get("description", "").split())
        if description:
            parts += [description, ""]
        parts += _fields(schema)
        payload = example(schema)
        envelope = {"jsonrpc": "2.0", "method": "request", "id": payload.get("id", "…"),
                    "params": {"type": name, "payload": payload}}  # fmt: skip
        parts += _json_block(envelope)
    parts += [
        "## Answers and results",
        "",
        "The shapes the client sends back (`result` of a `request`) and the other results.",
        "",
    ]
    for name, schema in sorted(schemas["methods"].items()):
        parts += [f"### `{name}`", "", *_fields(schema), *_json_block(example(schema))]
    return "\n".join(parts) + "\n"


GENERATORS = {
    "reference/cli.md": cli_page,
    "reference/config.md": config_page,
    "reference/wire.md": wire_page,
}


# -------------------------------------------------------------------------- MkDocs hook


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site (nothing is written into docs/)."""
    from mkdocs.structure.files import File

    for path, generate in GENERATORS.items():
        files.append(File.generated(config, path, content=generate()))
    return files


_LINK = re.compile(r"\[([^\]]+)\]\(([^)#\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """A link out of docs/ (`../bench/RESULTS.md`, `../examples`) names a file of the source
    tree, which the site does not carry: it becomes the path in code, so every other link
    stays checked by `mkdocs build --strict`."""
    here = Path(page.file.src_uri).parent

    def rewrite(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        if "://" in target or target.startswith(("mailto:", "/")):
            return match.group(0)
        resolved = os.path.normpath(here / target)
        if not resolved.startswith(".."):
            return match.group(0)
        source_path = resolved.removeprefix("../")
        return text if source_path.rstrip("/") in text else f"{text} (`{source_path}` in the source tree)"

    return _LINK.sub(rewrite, markdown)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "site-reference")
    for path, generate in GENERATORS.items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(generate(), encoding="utf-8")
        print(target)
