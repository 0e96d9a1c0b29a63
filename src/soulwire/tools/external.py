"""Tools implemented by the Wire client and registered in `initialize` (seed KLIP-12)."""

from __future__ import annotations

from functools import cache
from typing import Any

from soulwire.tools.base import DescribedTool, ToolContext, invalid_arguments, parse_arguments
from soulwire.wire.types import ToolReturnValue, tool_error


@cache
def _validator_for(schema_json: str) -> Any:
    import json

    import jsonschema.validators

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def schema_problem(parameters: Any) -> str | None:
    """Why `parameters` is not a usable JSON Schema (checked against the meta-schema it
    declares with `$schema`, 2020-12 by default), or None when it is fine."""
    import jsonschema.exceptions
    import jsonschema.validators

    if not isinstance(parameters, dict):
        return "parameters must be a JSON Schema object"
    cls = jsonschema.validators.validator_for(parameters, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(parameters)
    except jsonschema.exceptions.SchemaError as exc:
        return str(exc)
    return None


class ExternalTool(DescribedTool):
    """A client tool: arguments are validated here, then the client runs it."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        super().__init__(name, description or "No description provided.", parameters)

    async def run(self, arguments: str | None, ctx: ToolContext) -> ToolReturnValue:
        import json

        import jsonschema.exceptions

        try:
            value = parse_arguments(arguments)
        except ValueError as exc:
            return invalid_arguments("parsing", str(exc))
        validator = _validator_for(json.dumps(self._parameters, sort_keys=True))
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            return invalid_arguments("validating", error.message)
        if ctx.client is None:
            return tool_error("No client is connected to run this tool.", brief="External tool error")
        return await ctx.client.call_external(ctx.tool_call_id, self._name, arguments)
