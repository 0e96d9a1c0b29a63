"""External tools: plain typed Python functions (or pydantic models) that the model can call.

The engine validates arguments against the JSON Schema registered in `initialize` and sends a
`ToolCallRequest`; the session answers it with a `ToolResult` built from what the function
returned, or an error result if it raised. Parameters come from type hints (pydantic builds
the schema); descriptions from the docstring (first paragraph; an `Args:` section describes
the parameters) or from `Annotated[..., Field(description=...)]`."""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable
from typing import Any, overload

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from soulwire.sdk.errors import ToolDefinitionError
from soulwire.wire.types import CONTENT_PART_TYPES, ToolReturnValue, tool_error, tool_ok

ToolHandler = Callable[..., Any]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|Attributes)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^\s*\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class ToolError(Exception):
    """Raise from a tool to report a failure to the model with a clean message (no
    exception class name); `brief` is a one-line status for the user."""

    def __init__(self, message: str, *, output: str = "", brief: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.output = output
        self.brief = brief


def _split_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) from a Google-style docstring: the text
    before the first section (`Args:`, `Returns:`, ...), and the `name: text` entries of the
    `Args:` section (deeper-indented lines continue an entry)."""
    if not doc:
        return "", {}
    body: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    entry_indent: int | None = None
    section: str | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line)
        if header:
            section = "args" if _ARGS_HEADER.match(line) else "other"
            current, entry_indent = None, None
            continue
        if section is None:
            body.append(line)
            continue
        if section != "args" or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line)
        if match and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            current = str(match.group(1))
            params[current] = str(match.group(2)).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(body).strip(), params


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def _as_return_value(value: Any) -> ToolReturnValue:
    """What a tool returned, as a ToolReturnValue for the engine."""
    if isinstance(value, ToolReturnValue):
        return value
    if value is None:
        return tool_ok("")
    if isinstance(value, str):
        return tool_ok(value)
    if isinstance(value, CONTENT_PART_TYPES):
        return tool_ok([value])
    if isinstance(value, list) and value and all(isinstance(v, CONTENT_PART_TYPES) for v in value):
        return tool_ok(list(value))
    if isinstance(value, BaseModel):
        return tool_ok(value.model_dump_json())
    return tool_ok(json.dumps(value, ensure_ascii=False, default=str))


class Tool:
    """An external tool: a name, a description, a JSON Schema for the arguments and the
    function that runs it. Calling the Tool object calls the function unchanged."""

    def __init__(
        self,
        handler: ToolHandler,
        *,
        name: str,
        description: str,
        arguments_model: type[BaseModel],
        single_model: bool,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        if not _NAME.match(name):
            raise ToolDefinitionError(f"invalid tool name {name!r}: use letters, digits, _ . - (max 64)")
        self.name = name
        self.description = description
        self.handler = handler
        self._model = arguments_model
        self._single_model = single_model
        self._positional: list[str] = []
        self.parameters = parameters or _clean_schema(arguments_model.model_json_schema())

    # -- construction -----------------------------------------------------------
    @classmethod
    def from_function(
        cls, func: ToolHandler, *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """A tool from a typed function (sync or async). A function taking exactly one
        parameter annotated with a pydantic model gets that model's schema as its arguments."""
        if not callable(func):
            raise ToolDefinitionError(f"{func!r} is not callable")
        tool_name = name or getattr(func, "__name__", "")
        doc_description, doc_params = _split_docstring(inspect.getdoc(func))
        try:
            signature = inspect.signature(func)
            hints = typing.get_type_hints(func, include_extras=True)
        except (TypeError, ValueError, NameError) as exc:
            raise ToolDefinitionError(f"cannot read the signature of tool {tool_name!r}: {exc}") from exc
        params = [p for p in signature.parameters.values() if p.name not in ("self", "cls")]
        for p in params:
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: *args/**kwargs cannot be described as a schema"
                )
        if len(params) == 1:
            hint = hints.get(params[0].name)
            if isinstance(hint, type) and issubclass(hint, BaseModel):
                return cls.from_model(hint, func, name=tool_name, description=description or doc_description)
        fields: dict[str, Any] = {}
        for p in params:
            annotation = hints.get(p.name, Any)
            default = ... if p.default is inspect.Parameter.empty else p.default
            text = doc_params.get(p.name)
            fields[p.name] = (annotation, Field(default, description=text) if text else default)
        try:
            model = create_model(
                f"{tool_name}_arguments",
                __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                **fields,
            )
            parameters = _clean_schema(model.model_json_schema())
        except Exception as exc:  # pydantic raises several kinds for unsupported types
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameters cannot be a JSON Schema: {exc}"
            ) from exc
        tool = cls(
            func,
            name=tool_name,
            description=description or doc_description or tool_name,
            arguments_model=model,
            single_model=False,
            parameters=parameters,
        )
        tool._positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_ONLY]
        return tool

    @classmethod
    def from_model(
        cls,
        model: type[BaseModel],
        handler: ToolHandler,
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """A tool whose arguments are one pydantic model; `handler(model_instance)` runs it.
        Name and description default to the model's class name and docstring."""
        doc_description, _ = _split_docstring(model.__doc__)
        try:
            parameters = _clean_schema(model.model_json_schema())
        except Exception as exc:
            raise ToolDefinitionError(f"model {model.__name__}: no JSON Schema: {exc}") from exc
        return cls(
            handler,
            name=name or model.__name__,
            description=description or doc_description or model.__name__,
            arguments_model=model,
            single_model=True,
            parameters=parameters,
        )

    # -- use --------------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        """The entry for `initialize.external_tools`."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.handler(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"

    async def invoke(self, arguments: str | None) -> ToolReturnValue:
        """Run the tool on the JSON arguments the model produced. Never raises (except
        cancellation): bad arguments and exceptions become error results."""
        try:
            raw = json.loads(arguments) if arguments else {}
        except ValueError as exc:
            return tool_error(f"Invalid JSON arguments: {exc}", brief="Invalid arguments")
        try:
            parsed = self._model.model_validate(raw)
        except ValidationError as exc:
            return tool_error(f"Invalid arguments: {exc}", brief="Invalid arguments")
        try:
            if self._single_model:
                value = await _call(self.handler, (parsed,), {})
            else:
                values = {name: getattr(parsed, name) for name in type(parsed).model_fields}
                args = tuple(values.pop(name) for name in self._positional)
                value = await _call(self.handler, args, values)
            return _as_return_value(value)
        except anyio.get_cancelled_exc_class():
            raise
        except ToolError as exc:
            return tool_error(exc.message, brief=exc.brief or "Tool error", output=exc.output)
        except Exception as exc:
            return tool_error(f"{type(exc).__name__}: {exc}", brief="Tool error")


async def _call(handler: ToolHandler, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Await async handlers; run sync ones in a worker thread so they cannot block the stream."""
    if inspect.iscoroutinefunction(handler):
        return await handler(*args, **kwargs)
    value = await anyio.to_thread.run_sync(
        functools.partial(handler, *args, **kwargs), abandon_on_cancel=True
    )
    if inspect.isawaitable(value):
        value = await value
    return value


@overload
def tool(func: ToolHandler, /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None) -> Callable[[ToolHandler], Tool]: ...
def tool(
    func: ToolHandler | None = None, /, *, name: str | None = None, description: str | None = None
) -> Tool | Callable[[ToolHandler], Tool]:
    """Decorator: `@tool` or `@tool(name=..., description=...)` turns a typed function into
    a Tool (the decorated name still calls the function)."""
    if func is not None:
        return Tool.from_function(func)

    def wrap(f: ToolHandler) -> Tool:
        return Tool.from_function(f, name=name, description=description)

    return wrap


def as_tools(items: Iterable[Tool | ToolHandler]) -> dict[str, Tool]:
    """Tools by name; plain functions are wrapped. Duplicate names are an error."""
    tools: dict[str, Tool] = {}
    for item in items:
        t = item if isinstance(item, Tool) else Tool.from_function(item)
        if t.name in tools:
            raise ToolDefinitionError(f"two external tools are named {t.name!r}")
        tools[t.name] = t
    return tools


__all__ = ["Tool", "ToolError", "as_tools", "tool"]
