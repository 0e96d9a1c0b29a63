"""Fuzzing the request surface with Hypothesis, against one real engine per test that must
keep serving through every example: random JSON values and bytes, wrong types in every
params field, random content-part types, invalid UTF-8, lone surrogates, deep lines.

Each example is followed by a barrier request (`cancel`, which answers at once), so the
answers to an example are exactly the responses that come before the barrier's. Examples
are derandomized: CI runs the same ones every time."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.wire_client import Sandbox, WireProcess

BARRIER = "__barrier__"
KNOWN_CODES = {-32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32003}
FUZZ = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def exchange(wire: WireProcess, line: bytes) -> list[dict[str, Any]]:
    """Send one line and the barrier; the responses that came for the line."""
    wire.send_raw(line.replace(b"\n", b" ") + b"\n")
    wire.send({"jsonrpc": "2.0", "id": BARRIER, "method": "cancel"})
    got: list[dict[str, Any]] = []
    while True:
        message = wire.recv()
        assert message is not None, "engine died: " + "".join(wire.stderr_lines)[-2000:]
        if message.get("id") == BARRIER and "method" not in message:
            return got
        if "method" not in message:
            got.append(message)
        elif message.get("method") == "request":  # an approval of a turn a random prompt began
            wire.send({"jsonrpc": "2.0", "id": message["id"], "result": {"response": "reject"}})


def started(sandbox: Sandbox) -> WireProcess:
    sandbox.scripts = []
    sandbox.write()
    wire = WireProcess(sandbox.argv(), sandbox.env(), sandbox.work)
    wire.initialize()
    return wire


def alive(wire: WireProcess) -> None:
    assert "result" in wire.initialize()
    wire.close()


def request(method: str, params: Any, rid: str = "r") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def test_random_json_values_and_bytes(sandbox: Sandbox):
    wire = started(sandbox)

    @FUZZ
    @given(
        st.one_of(
            json_values.map(lambda v: json.dumps(v).encode()),
            st.binary(max_size=64),
            st.builds(
                request, st.sampled_from(["initialize", "prompt", "steer", "set_plan_mode", "x"]), json_values
            ),
        )
    )
    def check(line: bytes) -> None:
        for answer in exchange(wire, line):
            assert answer.get("jsonrpc") == "2.0"
            if "error" in answer:
                assert answer["error"]["code"] in KNOWN_CODES, answer
                assert isinstance(answer["error"]["message"], str)

    check()
    alive(wire)


WRONG_FOR = {
    "str": json_values.filter(lambda v: not isinstance(v, str)),
    "bool": json_values.filter(lambda v: not isinstance(v, bool)),
    "object": json_values.filter(lambda v: not isinstance(v, dict)),
    "list": json_values.filter(lambda v: not isinstance(v, list) and v is not None),
    "number": json_values.filter(lambda v: isinstance(v, str | list | dict | bool)),
}

# (method, valid params, dotted field to spoil, its type)
FIELDS = [
    ("initialize", {"protocol_version": "1.9"}, "protocol_version", "str"),
    ("initialize", {"protocol_version": "1.9", "capabilities": {}}, "capabilities", "object"),
    ("initialize", {"protocol_version": "1.9", "capabilities": {}}, "capabilities.supports_question", "bool"),
    (
        "initialize",
        {"protocol_version": "1.9", "capabilities": {}},
        "capabilities.supports_plan_mode",
        "bool",
    ),
    ("initialize", {"protocol_version": "1.9", "client": {"name": "c"}}, "client.name", "str"),
    ("initialize", {"protocol_version": "1.9", "hooks": []}, "hooks", "list"),
    (
        "initialize",
        {"protocol_version": "1.9", "hooks": [{"id": "h", "event": "Stop"}]},
        "hooks.0.event",
        "str",
    ),
    (
        "initialize",
        {"protocol_version": "1.9", "hooks": [{"id": "h", "event": "Stop"}]},
        "hooks.0.timeout",
        "number",
    ),
    (
        "initialize",
        {"protocol_version": "1.9", "external_tools": [{"name": "t"}]},
        "external_tools.0.name",
        "str",
    ),
    (
        "initialize",
        {"protocol_version": "1.9", "external_tools": [{"name": "t"}]},
        "external_tools.0.parameters",
        "object",
    ),
    ("prompt", {"user_input": [{"type": "text", "text": "x"}]}, "user_input.0.text", "str"),
    (
        "prompt",
        {"user_input": [{"type": "image_url", "image_url": {"url": "u"}}]},
        "user_input.0.image_url.url",
        "str",
    ),
    ("steer", {"user_input": [{"type": "text", "text": "x"}]}, "user_input.0.text", "str"),
    ("set_plan_mode", {"enabled": True}, "enabled", "bool"),
]


def spoiled(params: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    params = json.loads(json.dumps(params))
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    target: Any = params
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return params


def test_wrong_types_in_every_params_field(sandbox: Sandbox):
    wire = started(sandbox)

    @FUZZ
    @given(st.sampled_from(FIELDS).flatmap(lambda f: st.tuples(st.just(f), WRONG_FOR[f[3]])))
    def check(case: tuple[tuple[str, dict[str, Any], str, str], Any]) -> None:
        (method, params, path, _kind), value = case
        if value is None and path not in (
            "protocol_version",
            "client.name",
            "hooks.0.event",
            "external_tools.0.name",
        ):
            return  # null is a valid "not given" for optional fields
        [answer] = exchange(wire, request(method, spoiled(params, path, value)))
        assert answer["error"]["code"] == -32602, answer
        assert answer["error"]["data"]["field"].startswith(path.split(".")[0]), answer

    check()
    alive(wire)


def test_random_content_part_types_and_text(sandbox: Sandbox):
    wire = started(sandbox)
    part_types = st.text(max_size=12).filter(
        lambda t: t not in ("text", "think", "image_url", "audio_url", "video_url")
    )

    @FUZZ
    @given(part_types, json_values)
    def check(part_type: str, extra: Any) -> None:
        part = {"type": part_type, "text": "x", "data": extra}
        [answer] = exchange(wire, request("prompt", {"user_input": [part]}))
        assert answer["error"]["code"] == -32602, answer

    check()
    alive(wire)


def test_surrogates_invalid_utf8_and_deep_lines(sandbox: Sandbox):
    wire = started(sandbox)
    surrogate = st.integers(0xD800, 0xDFFF).map(lambda c: f"\\u{c:04x}")
    deep = st.tuples(st.integers(101, 5000), st.sampled_from(["[", '{"a":'])).map(
        lambda t: (t[1] * t[0] + ("1" if t[1] != "[" else "") + ("]" if t[1] == "[" else "}") * t[0]).encode()
    )
    bad_utf8 = st.binary(min_size=1, max_size=8).filter(_invalid_utf8_in_one_string)

    @FUZZ
    @given(
        st.one_of(
            surrogate.map(
                lambda s: (
                    b'{"jsonrpc":"2.0","id":"s","method":"set_plan_mode","params":{"x":"'
                    + s.encode()
                    + b'","enabled":false}}'
                )
            ),
            surrogate.map(lambda s: b'{"jsonrpc":"2.0","id":"' + s.encode() + b'","method":"nope"}'),
            deep,
            bad_utf8.map(
                lambda b: b'{"jsonrpc":"2.0","id":"b","method":"prompt","params":{"user_input":"' + b + b'"}}'
            ),
        )
    )
    def check(line: bytes) -> None:
        answers = exchange(wire, line)
        assert len(answers) <= 1
        for answer in answers:
            if "error" in answer:
                assert answer["error"]["code"] in (-32700, -32600, -32601, -32602), answer

    check()
    alive(wire)


def _invalid_utf8_in_one_string(data: bytes) -> bool:
    """Bytes that are not UTF-8 and stay inside one JSON string on one line (no quote, no
    backslash, no newline: a newline would make two requests of the one line)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return b'"' not in data and b"\\" not in data and b"\n" not in data
    return False
