"""ACP prompt content blocks → engine input (in-process: a pure conversion)."""

from __future__ import annotations

from acp.schema import (
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from soulwire.ui.acp.prompts import user_input
from soulwire.wire.types import ImageURLPart, TextPart


def test_text_image_and_resources_become_parts() -> None:
    parts = user_input(
        [
            TextContentBlock(type="text", text="look at"),
            ImageContentBlock(type="image", mime_type="image/png", data="iVBORw0KGgo="),
            ResourceContentBlock(type="resource_link", name="a.py", uri="file:///repo/a.py"),
            EmbeddedResourceContentBlock(
                type="resource",
                resource=TextResourceContents(uri="file:///repo/b.py", text="x = 1"),
            ),
        ]
    )
    assert parts[0] == TextPart(text="look at")
    assert isinstance(parts[1], ImageURLPart)
    assert parts[1].image_url.url == "data:image/png;base64,iVBORw0KGgo="
    assert parts[2] == TextPart(text="@/repo/a.py")
    assert parts[3] == TextPart(text='<resource path="/repo/b.py">\nx = 1\n</resource>')
