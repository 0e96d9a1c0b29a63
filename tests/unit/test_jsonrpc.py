"""Classification of inbound lines (spec §2.2) without the engine."""

from __future__ import annotations

import json

import pytest

from soulwire.wire import jsonrpc


@pytest.mark.parametrize(
    ("line", "kind", "code"),
    [
        ("{", "invalid", jsonrpc.PARSE_ERROR),
        ("[]", "invalid", jsonrpc.INVALID_REQUEST),
        ("{}", "ignore", None),
        ('{"jsonrpc":"1.0","id":"a","method":"x"}', "invalid", jsonrpc.INVALID_REQUEST),
        ('{"id":5,"method":"cancel"}', "invalid", jsonrpc.INVALID_REQUEST),
        ('{"id":"a","method":"cancel"}', "request", None),
        ('{"method":"cancel"}', "notification", None),
        ('{"id":"a","result":{}}', "response", None),
        ('{"id":"a","method":"x","result":{}}', "response", None),
        ('{"id":"a","error":{"code":1,"message":"m"}}', "response", None),
        ('{"id":"a"}', "invalid", jsonrpc.INVALID_REQUEST),
    ],
)
def test_classify(line: str, kind: str, code: int | None):
    inbound = jsonrpc.classify(line)
    assert inbound.kind == kind
    assert (inbound.error.code if inbound.error else None) == code


def test_lines_are_compact_utf8():
    line = jsonrpc.response_line("i", {"text": "héllo"})
    assert line == '{"jsonrpc":"2.0","id":"i","result":{"text":"héllo"}}\n'.encode()
    error = json.loads(jsonrpc.error_line(None, jsonrpc.invalid_params("prompt")))
    assert error["error"] == {
        "code": -32602,
        "message": "Invalid parameters for method `prompt`",
        "data": None,
    }
