"""ReadMediaFile through the real engine: real image and video files in the sandbox, the
refusals, and the capability gating seen where it matters — in the tool list and the request
body a real provider adapter sends to a real HTTP server."""

from __future__ import annotations

import base64
import json
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, Call, stream_reply
from tests.tool_calls import answering, one_step_each, requests, results, run_turn
from tests.wire_client import Sandbox, WireProcess, engine_env


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x10\x20\x30" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def jpeg(width: int, height: int) -> bytes:
    """The segments a decoder reads before the pixels: JFIF header, then a baseline frame header."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


MP4 = struct.pack(">I", 24) + b"ftypisom" + b"\x00\x00\x02\x00" + b"isomiso2" + struct.pack(">I", 8) + b"free"
GIF = b"GIF89a\x03\x00\x02\x00\x00\x00\x00;"


def decoded(value: dict[str, Any], kind: str) -> tuple[str, bytes]:
    """(mime type, bytes) of the one media part of a result, after checking the tags around it."""
    opening, media, closing = value["output"]
    assert opening["type"] == "text" and opening["text"].startswith(f'<{kind} path="')
    assert closing == {"type": "text", "text": f"</{kind}>"}
    url: str = media[f"{kind}_url"]["url"]
    head, _, data = url.partition(";base64,")
    return head.removeprefix("data:"), base64.b64decode(data)


def test_images_load_as_data_urls_and_everything_else_is_refused(engine, sandbox: Sandbox):
    sandbox.capabilities = ["image_in"]
    sandbox.write()
    files: dict[str, bytes] = {
        "shot.png": png(3, 2),
        "photo.jpg": jpeg(640, 480),
        "anim.gif": GIF,
        "clip.mp4": MP4,
        "really_png.txt": png(1, 1),
        "notes.txt": b"hello\n",
        "fake.png": b"not a png at all\n",
        "blob.png": b"\x00\x01\x02\x03 unknown binary",
        "empty.png": b"",
        ".env": b"TOKEN=1\n",
        "sub/inner.png": png(1, 1),
    }
    for name, content in files.items():
        (sandbox.work / name).parent.mkdir(parents=True, exist_ok=True)
        (sandbox.work / name).write_bytes(content)
    with (sandbox.work / "huge.png").open("wb") as handle:  # sparse: no 100 MB written
        handle.write(png(1, 1))
        handle.truncate(100 * 1024 * 1024 + 1)
    outside = sandbox.root / "outside.png"
    outside.write_bytes(png(2, 2))
    cases = [(name, "ReadMediaFile", {"path": name}) for name in files if name != "sub/inner.png"]
    cases += [
        ("sub", "ReadMediaFile", {"path": "sub"}),
        ("missing.png", "ReadMediaFile", {"path": "missing.png"}),
        ("huge.png", "ReadMediaFile", {"path": "huge.png"}),
        ("abs", "ReadMediaFile", {"path": str(sandbox.work / "sub" / "inner.png")}),
        ("outside", "ReadMediaFile", {"path": str(outside)}),
    ]
    wire = engine(*one_step_each(*cases))
    messages, result = run_turn(wire, answer=answering("reject", "not that one"))
    assert result == {"status": "finished"}
    values = results(messages)

    shot = values["shot.png"]
    assert not shot["is_error"] and decoded(shot, "image") == ("image/png", files["shot.png"])
    assert shot["output"][0]["text"] == f'<image path="{sandbox.work / "shot.png"}">'
    assert f"(image/png, {len(files['shot.png'])} bytes, original size 3x2px)" in shot["message"]
    assert decoded(values["photo.jpg"], "image") == ("image/jpeg", files["photo.jpg"])
    assert "original size 640x480px" in values["photo.jpg"]["message"]
    assert decoded(values["anim.gif"], "image") == ("image/gif", GIF)
    assert "3x2px" in values["anim.gif"]["message"]
    assert decoded(values["really_png.txt"], "image")[0] == "image/png"  # content decides, not the name
    assert decoded(values["abs"], "image") == ("image/png", files["sub/inner.png"])

    def refusal(key: str) -> tuple[str, str]:
        value = values[key]
        assert value["is_error"] and value["output"] == "", key
        return value["message"], value["display"][0]["text"]

    assert refusal("clip.mp4") == (
        "The current model does not support video input. "
        "Tell the user to use a model with video input capability.",
        "Unsupported media type",
    )
    assert refusal("notes.txt") == (
        "`notes.txt` is a text file. Use ReadFile to read text files.",
        "Unsupported file type",
    )
    assert refusal("fake.png")[1] == "Unsupported file type"  # a text file named .png is not sent
    assert refusal("blob.png")[1] == "Unsupported file type"
    assert refusal("empty.png") == (f"`{sandbox.work / 'empty.png'}` is empty.", "Empty file")
    assert refusal(".env")[1] == "Sensitive file"
    assert refusal("sub")[1] == "Invalid path"
    assert refusal("missing.png") == ("`missing.png` does not exist.", "File not found")
    message, brief = refusal("huge.png")
    assert brief == "File too large" and str(100 * 1024 * 1024 + 1) in message

    # Outside the workspace the user decides, as for ReadFile; inside nobody is asked.
    (asked,) = requests(messages)
    assert asked["sender"] == "ReadMediaFile" and str(outside) in asked["description"]
    assert refusal("outside") == (
        "The tool call is rejected by the user. User feedback: not that one",
        "Rejected: not that one",
    )


def test_a_video_model_reads_videos_but_not_images(engine, sandbox: Sandbox):
    sandbox.capabilities = ["video_in"]
    sandbox.write()
    (sandbox.work / "clip.mp4").write_bytes(MP4)
    (sandbox.work / "clip.mov").write_bytes(MP4.replace(b"isom", b"qt  ", 1))
    (sandbox.work / "shot.png").write_bytes(png(1, 1))
    wire = engine(
        *one_step_each(
            ("mp4", "ReadMediaFile", {"path": "clip.mp4"}),
            ("mov", "ReadMediaFile", {"path": "clip.mov"}),
            ("png", "ReadMediaFile", {"path": "shot.png"}),
        )
    )
    messages, _ = run_turn(wire)
    values = results(messages)
    assert decoded(values["mp4"], "video") == ("video/mp4", MP4)
    assert (
        values["mp4"]["message"]
        == f"Loaded video file `{sandbox.work / 'clip.mp4'}` (video/mp4, {len(MP4)} bytes)."
    )
    assert decoded(values["mov"], "video")[0] == "video/quicktime"
    assert values["png"]["is_error"]
    assert values["png"]["message"].startswith("The current model does not support image input.")


def test_without_image_or_video_input_the_tool_is_not_offered(engine, sandbox: Sandbox):
    (sandbox.root / "a.png").parent.mkdir(parents=True, exist_ok=True)
    wire = engine(*one_step_each(("x", "ReadMediaFile", {"path": "a.png"})))
    messages, _ = run_turn(wire)
    value = results(messages)["x"]
    assert value["is_error"] and value["message"] == "Tool `ReadMediaFile` not found"


# ---------------------------------------------------------------- through a real provider adapter


def provider_engine(root: Path, server: FakeLLMServer, capabilities: list[str]) -> WireProcess:
    (root / "work").mkdir(parents=True, exist_ok=True)
    config = {
        "default_model": "m",
        "models": {
            "m": {
                "provider": "p",
                "model": "test-model",
                "max_context_size": 100_000,
                "capabilities": capabilities,
            }
        },
        "providers": {"p": {"type": "openai_legacy", "base_url": server.url + "/v1", "api_key": "sk-test"}},
    }
    (root / "config.json").write_text(json.dumps(config))
    argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(root / "config.json")]
    return WireProcess([*argv, "--work-dir", str(root / "work"), "--yolo"], engine_env(root), root / "work")


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body["tools"]]


def test_the_model_sees_the_tool_only_with_a_media_capability_and_receives_the_image(tmp_path: Path):
    with FakeLLMServer() as server:
        wire = provider_engine(tmp_path / "text-only", server, [])
        wire.initialize(protocol_version="1.10")
        server.queue(stream_reply("openai_legacy", Answer("m1", text=["ok"])))
        _, response = wire.prompt("hi", timeout=30)
        assert response["result"] == {"status": "finished"}
        names = tool_names(server.requests[-1].body)
        assert "ReadMediaFile" not in names
        assert names.index("FetchURL") == names.index("StrReplaceFile") + 1
        wire.close()

        root = tmp_path / "vision"
        wire = provider_engine(root, server, ["image_in"])
        (root / "work" / "shot.png").write_bytes(png(4, 4))
        wire.initialize(protocol_version="1.10")
        server.forget_requests()
        server.queue(
            stream_reply(
                "openai_legacy",
                Answer("m2", calls=[Call("call_1", "ReadMediaFile", ['{"path": "shot.png"}'])]),
            ),
            stream_reply("openai_legacy", Answer("m3", text=["a small image"])),
        )
        _, response = wire.prompt("look at shot.png", timeout=30)
        assert response["result"] == {"status": "finished"}
        first, second = (r.body for r in server.requests)
        names = tool_names(first)
        assert names.index("ReadMediaFile") == names.index("ReadFile") + 1
        description = next(t for t in first["tools"] if t["function"]["name"] == "ReadMediaFile")["function"]
        assert "video files are not supported" in description["description"]
        # Chat Completions tool messages carry text only: the image follows them as a user message.
        tool_message, media_message = second["messages"][-2:]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
        assert "Loaded image file" in tool_message["content"] and '<image path="' in tool_message["content"]
        assert media_message["role"] == "user"
        (image,) = [part for part in media_message["content"] if part["type"] == "image_url"]
        expected = "data:image/png;base64," + base64.b64encode(png(4, 4)).decode()
        assert image["image_url"]["url"] == expected
        wire.close()
