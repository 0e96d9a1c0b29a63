"""Structured output: ask for a reply matching a JSON Schema or a pydantic model, validate the
final text, and retry once with the validation error.

The schema travels in the prompt (Wire has no structured-output request): the model is asked
to answer with only a JSON value. The reply may be bare JSON or a fenced ```json block."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from soulwire.sdk.errors import ConfigurationError, SDKError

_FENCED = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.DOTALL)


class StructuredOutputError(SDKError):
    """The final reply did not match the requested schema (after the retry)."""


class OutputSpec:
    """What the caller asked for: a pydantic model class or a JSON Schema (a dict)."""

    def __init__(self, output_format: Any) -> None:
        if isinstance(output_format, type) and issubclass(output_format, BaseModel):
            self.model: type[BaseModel] | None = output_format
            self.schema: dict[str, Any] = output_format.model_json_schema()
        elif isinstance(output_format, dict):
            # Only when a schema is used: jsonschema is slow to import.
            from jsonschema.exceptions import SchemaError
            from jsonschema.validators import validator_for

            try:
                validator_for(output_format).check_schema(output_format)
            except SchemaError as exc:
                raise ConfigurationError(f"output_format is not a valid JSON Schema: {exc.message}") from None
            self.model = None
            self.schema = dict(output_format)
        else:
            raise ConfigurationError(
                f"output_format must be a pydantic model class or a JSON Schema dict, not {output_format!r}"
            )

    def instruction(self) -> str:
        return (
            "\n\nWhen you are done, reply with only a JSON value (no prose, no code fence) that "
            f"matches this JSON Schema:\n{json.dumps(self.schema, indent=2)}"
        )

    def retry_prompt(self, error: StructuredOutputError) -> str:
        return (
            f"Your reply did not match the required JSON Schema: {error}\n"
            "Reply again with only the corrected JSON value." + self.instruction()
        )

    def parse(self, text: str) -> Any:
        """The validated value (a model instance, or the decoded JSON); StructuredOutputError
        says what is wrong."""
        value = _decode(text)
        if self.model is not None:
            try:
                return self.model.model_validate(value)
            except ValidationError as exc:
                raise StructuredOutputError(_pydantic_summary(exc)) from None
        from jsonschema.validators import validator_for

        validator: Any = validator_for(self.schema)(self.schema)
        errors: list[Any] = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            first: Any = errors[0]
            where = "/".join(str(p) for p in first.path) or "(root)"
            raise StructuredOutputError(f"at {where}: {first.message}")
        return value


def _decode(text: str) -> Any:
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCED.finditer(text)]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise StructuredOutputError(f"the reply is not JSON: {text[:200]!r}")


def _pydantic_summary(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "(root)"
        parts.append(f"at {where}: {error['msg']}")
    return "; ".join(parts)


__all__ = ["OutputSpec", "StructuredOutputError"]
