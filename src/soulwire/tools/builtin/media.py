"""`ReadMediaFile`: an image or video file handed to the model as a data URL content part.

Offered only to models that take images or videos (spec §9); the same path rules as ReadFile
apply (secrets refused, reads outside the workspace need approval)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
from pydantic import Field

from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.tools.builtin.mediatypes import (
    SNIFF_BYTES,
    MediaType,
    by_name,
    image_size,
    looks_like_text,
    sniff,
)
from soulwire.tools.builtin.paths import Target, file_to_read
from soulwire.tools.names import MEDIA_CAPABILITIES
from soulwire.wire.types import (
    ImageURLPart,
    MediaURL,
    TextPart,
    ToolReturnValue,
    VideoURLPart,
    tool_error,
    tool_ok,
)

MAX_MEDIA_BYTES = 100 * 1024 * 1024
"""The reference's limit: larger files are refused before anything is read."""
_CAPABILITY = {"image": "image_in", "video": "video_in"}


class ReadMediaFileParams(ToolParams):
    path: str = Field(
        description="The image or video file: absolute, or relative to the working directory "
        "(absolute paths are needed outside it)."
    )


@dataclass(frozen=True)
class _Loaded:
    media: MediaType
    size: int
    dimensions: tuple[int, int] | None
    data: str
    """Base64 of the whole file."""


def _load(path: Path, media: MediaType, head: bytes) -> _Loaded:
    raw = path.read_bytes()
    return _Loaded(media, len(raw), image_size(head, media.mime), base64.b64encode(raw).decode("ascii"))


def _head(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(SNIFF_BYTES)


def _describe(capabilities: frozenset[str]) -> str:
    kinds = [kind for kind, need in _CAPABILITY.items() if need in capabilities]
    lacking = [kind for kind, need in _CAPABILITY.items() if need not in capabilities]
    text = (
        "Look at an image or video file: its content is returned so that you can see it. Only "
        "image and video files: read text with ReadFile, list directories with Glob. Read several "
        f"files in parallel when you need them. Files over {MAX_MEDIA_BYTES // (1024 * 1024)} MB "
        "are refused, and so are files that hold secrets. Reading outside the workspace needs the "
        f"user's approval. The current model takes {' and '.join(kinds)} files"
    )
    return text + (f"; {' and '.join(lacking)} files are not supported." if lacking else ".")


class ReadMediaFile(TypedTool[ReadMediaFileParams]):
    name = "ReadMediaFile"
    description = _describe(MEDIA_CAPABILITIES)
    params = ReadMediaFileParams

    def __init__(self, capabilities: frozenset[str]) -> None:
        self.capabilities = capabilities
        self.description = _describe(capabilities)  # pyright: ignore[reportAttributeAccessIssue]

    async def execute(self, params: ReadMediaFileParams, ctx: ToolContext) -> ToolReturnValue:
        target = await file_to_read(
            params.path,
            ctx,
            sender=self.name,
            not_a_file=(f"`{params.path}` is not a file (list directories with Glob).", "Invalid path"),
        )
        if not isinstance(target, Target):
            return target
        try:
            size = target.io.stat().st_size
            if size == 0:
                return tool_error(f"`{target.path}` is empty.", brief="Empty file")
            if size > MAX_MEDIA_BYTES:
                return tool_error(
                    f"`{target.path}` is {size} bytes, more than the {MAX_MEDIA_BYTES // (1024 * 1024)} MB "
                    "media files may have.",
                    brief="File too large",
                )
            head = await anyio.to_thread.run_sync(_head, target.io)
            media = _media_type(head, target.path.name)
            if media is None:
                return _not_media(params.path, head)
            if _CAPABILITY[media.kind] not in self.capabilities:
                return tool_error(
                    f"The current model does not support {media.kind} input. "
                    f"Tell the user to use a model with {media.kind} input capability.",
                    brief="Unsupported media type",
                )
            loaded = await anyio.to_thread.run_sync(_load, target.io, media, head, abandon_on_cancel=True)
        except OSError as exc:
            return tool_error(f"Could not read `{params.path}`: {exc.strerror or exc}", brief="Read failed")
        return _result(target.path, loaded)


def _media_type(head: bytes, name: str) -> MediaType | None:
    """The signature decides; the name only vouches for binary content no signature covers
    (a text file named `x.png` would make the provider reject the whole request)."""
    sniffed = sniff(head)
    if sniffed is not None:
        return sniffed
    return None if looks_like_text(head) else by_name(name)


def _not_media(raw: str, head: bytes) -> ToolReturnValue:
    if looks_like_text(head):
        return tool_error(
            f"`{raw}` is a text file. Use ReadFile to read text files.", brief="Unsupported file type"
        )
    return tool_error(
        f"`{raw}` is neither an image nor a video this tool recognises.", brief="Unsupported file type"
    )


def _result(path: Path, loaded: _Loaded) -> ToolReturnValue:
    url = MediaURL(url=f"data:{loaded.media.mime};base64,{loaded.data}")
    part = ImageURLPart(image_url=url) if loaded.media.kind == "image" else VideoURLPart(video_url=url)
    details = f"{loaded.media.mime}, {loaded.size} bytes"
    if loaded.dimensions:
        details += f", original size {loaded.dimensions[0]}x{loaded.dimensions[1]}px"
    message = f"Loaded {loaded.media.kind} file `{path}` ({details})."
    if loaded.media.kind == "image" and loaded.dimensions:
        message += " Give coordinates relative to this original size."
    kind = loaded.media.kind
    return tool_ok(
        output=[TextPart(text=f'<{kind} path="{path}">'), part, TextPart(text=f"</{kind}>")], message=message
    )
