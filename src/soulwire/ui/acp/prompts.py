"""ACP prompt content blocks → the engine's user input."""

from __future__ import annotations

from typing import Any

from acp.schema import (
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from soulwire.wire.types import AudioURLPart, ImageURLPart, MediaURL, TextPart

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)


def _file_path(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def user_input(blocks: list[PromptBlock]) -> list[Any]:
    """Text stays text; images and audio become data URLs; an embedded resource (a file the
    editor attached) becomes its text inside a tag naming it; a resource link is mentioned
    by path, for the model to read with its tools."""
    parts: list[Any] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, ImageContentBlock):
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append(ImageURLPart(image_url=MediaURL(url=url)))
        elif isinstance(block, AudioContentBlock):
            url = f"data:{block.mime_type};base64,{block.data}"
            parts.append(AudioURLPart(audio_url=MediaURL(url=url)))
        elif isinstance(block, ResourceContentBlock):
            parts.append(TextPart(text=f"@{_file_path(block.uri)}"))
        else:
            resource = block.resource
            path = _file_path(resource.uri)
            if isinstance(resource, TextResourceContents):
                parts.append(TextPart(text=f'<resource path="{path}">\n{resource.text}\n</resource>'))
            elif (resource.mime_type or "").startswith("image/"):
                url = f"data:{resource.mime_type};base64,{resource.blob}"
                parts.append(ImageURLPart(image_url=MediaURL(url=url)))
            else:
                parts.append(TextPart(text=f"@{path}"))
    return parts
