"""Reading MCP server configurations (spec §8.1, §8.2) from real files and JSON texts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soulwire.config.loader import ConfigError
from soulwire.tools.mcp_config import load_mcp_servers, tool_call_timeout_s


def write(path: Path, servers: dict[str, object]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def test_the_share_dir_file_is_used_only_when_no_file_is_given(tmp_path: Path):
    write(tmp_path / "mcp.json", {"global": {"command": "g"}})
    given = write(tmp_path / "given.json", {"local": {"command": "l", "args": ["-x", 1], "env": {"A": 2}}})
    assert [s.name for s in load_mcp_servers([], [], tmp_path)] == ["global"]
    text = json.dumps({"mcpServers": {"inline": {"url": "http://127.0.0.1:1/mcp", "headers": {"X": "y"}}}})
    [local, inline] = load_mcp_servers([given], [text], tmp_path)
    assert (local.command, local.args, local.env) == ("l", ["-x", "1"], {"A": "2"})
    assert (inline.url, inline.headers, inline.command) == ("http://127.0.0.1:1/mcp", {"X": "y"}, None)
    # --mcp-config alone still reads the share dir's file.
    assert [s.name for s in load_mcp_servers([], [text], tmp_path)] == ["global", "inline"]


def test_a_later_entry_replaces_an_earlier_one_of_the_same_name(tmp_path: Path):
    first = write(tmp_path / "a.json", {"s": {"command": "one"}, "t": {"command": "t"}})
    second = write(tmp_path / "b.json", {"s": {"command": "two"}})
    servers = load_mcp_servers([first, second], [], tmp_path)
    assert [(s.name, s.command) for s in servers] == [("t", "t"), ("s", "two")]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{nope", "Invalid MCP config in --mcp-config"),
        ("[]", "expected a JSON object"),
        ('{"mcpServers": {"x": {}}}', "Invalid MCP server `x` in --mcp-config: needs a `command`"),
        ('{"mcpServers": {"x": {"command": "c", "args": "a"}}}', "`args` must be a list"),
        (
            '{"mcpServers": {"x": {"url": "http://h", "transport": "carrier-pigeon"}}}',
            "unsupported transport",
        ),
    ],
)
def test_malformed_configs_are_named_errors(tmp_path: Path, text: str, why: str):
    with pytest.raises(ConfigError, match=None) as caught:
        load_mcp_servers([], [text], tmp_path)
    assert why in str(caught.value)


def test_a_missing_file_is_an_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="Cannot read MCP config file"):
        load_mcp_servers([tmp_path / "absent.json"], [], tmp_path)


def test_the_tool_call_timeout_comes_from_mcp_client():
    assert tool_call_timeout_s({}) == 60.0
    assert tool_call_timeout_s({"client": {"tool_call_timeout_ms": 1500}}) == 1.5
    assert tool_call_timeout_s({"client": {"tool_call_timeout_ms": "soon"}}) == 60.0
