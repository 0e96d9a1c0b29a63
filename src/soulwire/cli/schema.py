"""`soulwire schema [--out DIR]`: the JSON Schema of every Wire message, generated from the
protocol types."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def wire_schemas() -> dict[str, Any]:
    from pydantic import TypeAdapter

    from soulwire.wire import checkpoints, messages, methods, types

    out: dict[str, Any] = {"events": {}, "requests": {}, "methods": {}}
    out["events"]["ContentPart"] = TypeAdapter(types.ContentPart).json_schema()
    for name, cls in messages.EVENT_TYPES.items():
        out["events"][name] = cls.model_json_schema()
    for name, cls in messages.REQUEST_TYPES.items():
        out["requests"][name] = cls.model_json_schema()
    for cls in (
        methods.InitializeParams, methods.PromptParams, methods.PromptResult, methods.ReplayResult,
        methods.SteerParams, methods.SetPlanModeParams, methods.SetPlanModeResult, methods.SetBudgetParams,
        methods.SetBudgetResult, methods.SetModelParams, methods.SetModelResult, methods.ApprovalAnswer,
        methods.ToolResultAnswer, messages.QuestionResponse, messages.HookResponse,
        checkpoints.CheckpointsResult, checkpoints.ChangesParams, checkpoints.ChangesResult,
        checkpoints.RewindParams, checkpoints.RewindResult, checkpoints.ForkParams, checkpoints.ForkResult,
        checkpoints.OverlayApplied, checkpoints.OverlayChangesParams, checkpoints.OverlayChangesResult,
    ):  # fmt: skip
        out["methods"][cls.__name__] = cls.model_json_schema()
    out["serve"] = serve_schemas()
    return out


def serve_schemas() -> dict[str, Any]:
    """Params, results and notices of the extensions `soulwire serve` offers over WebSocket
    and negotiated stdio (docs/serve.md)."""
    from soulwire.server import messages, protocol

    shapes = {shape.__name__: shape.model_json_schema() for shape in protocol.SHAPES}
    return {
        **shapes,
        "ServeOptions": messages.ServeOptions.model_json_schema(),  # `serve` in initialize params
        "AttachParams": messages.AttachParams.model_json_schema(),
        "BlobReadParams": messages.BlobReadParams.model_json_schema(),
        "RuleParams": messages.RuleParams.model_json_schema(),
    }


def run_schema(argv: list[str]) -> int:
    from soulwire.usage import CommandParser

    parser = CommandParser(
        prog="soulwire schema",
        description="The JSON Schema of every Wire message, generated from the protocol types.",
        examples=(
            "soulwire schema > wire.schema.json",
            "soulwire schema --out schema/  # one file per message",
        ),
    )
    parser.add_argument("--out", "-o", metavar="DIR", help="write one file per message under DIR")
    args = parser.parse_args(argv)
    schemas = wire_schemas()
    if args.out:
        root = Path(args.out)
        for group, items in schemas.items():
            (root / group).mkdir(parents=True, exist_ok=True)
            for name, schema in items.items():
                (root / group / f"{name}.json").write_text(
                    json.dumps(schema, indent=2) + "\n", encoding="utf-8"
                )
        return 0
    sys.stdout.write(json.dumps(schemas, indent=2) + "\n")
    return 0
