"""What kind of media a file holds: judged by its first bytes (magic numbers), with the file
name as a fallback for formats not sniffed here, plus the pixel size of common images."""

from __future__ import annotations

import mimetypes
import struct
from dataclasses import dataclass
from typing import Literal

SNIFF_BYTES = 4096
"""Enough of a file's head for every signature and image header read here."""

MediaKind = Literal["image", "video"]


@dataclass(frozen=True)
class MediaType:
    kind: MediaKind
    mime: str


_PREFIXES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),  # EBML: WebM and Matroska
    (b"FLV\x01", "video/x-flv"),
    (b"\x00\x00\x01\xba", "video/mpeg"),
    (b"\x00\x00\x01\xb3", "video/mpeg"),
)
# ISO base media files (`....ftyp<brand>`): the major brand says which kind.
_FTYP_BRANDS: dict[bytes, str] = {
    b"avif": "image/avif",
    b"avis": "image/avif",
    b"heic": "image/heic",
    b"heix": "image/heic",
    b"mif1": "image/heif",
    b"msf1": "image/heif",
    b"qt  ": "video/quicktime",
    b"3gp4": "video/3gpp",
    b"3gp5": "video/3gpp",
    b"3g2a": "video/3gpp2",
}
# Names mimetypes may not know on every system.
_EXTRA_EXTENSIONS = {
    ".webp": "image/webp",
    ".heic": "image/heic",
    ".avif": "image/avif",
    ".mkv": "video/x-matroska",
}


def _as_media(mime: str) -> MediaType | None:
    kind = mime.split("/", 1)[0]
    if kind == "image" and mime != "image/svg+xml":  # SVG is XML text, not pixels
        return MediaType("image", mime)
    if kind == "video":
        return MediaType("video", mime)
    return None


def sniff(head: bytes) -> MediaType | None:
    """The media type the bytes announce, or None when no known signature matches."""
    for prefix, mime in _PREFIXES:
        if head.startswith(prefix):
            if mime == "video/webm" and b"matroska" in head[:64]:
                return MediaType("video", "video/x-matroska")
            return _as_media(mime)
    if head[:4] == b"RIFF" and len(head) >= 12:
        form = head[8:12]
        if form == b"WEBP":
            return MediaType("image", "image/webp")
        if form == b"AVI ":
            return MediaType("video", "video/x-msvideo")
    if head[4:8] == b"ftyp" and len(head) >= 12:
        return _as_media(_FTYP_BRANDS.get(head[8:12], "video/mp4"))
    return None


# Types `sniff` knows the signature of: a file named like one of them must carry it.
_SNIFFED = frozenset(
    {mime for _, mime in _PREFIXES}
    | set(_FTYP_BRANDS.values())
    | {"video/mp4", "video/x-matroska", "image/webp", "video/x-msvideo"}
)


def by_name(name: str) -> MediaType | None:
    """The media type the file name suggests for a format `sniff` does not recognise, or None
    (a `.png` without the PNG signature is broken, not a PNG)."""
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    mime = _EXTRA_EXTENSIONS.get(suffix) or mimetypes.guess_type(name, strict=False)[0]
    if not mime or mime in _SNIFFED:
        return None
    return _as_media(mime)


def looks_like_text(head: bytes) -> bool:
    """No NUL byte and valid UTF-8 (a cut multi-byte character at the end is allowed)."""
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


def image_size(head: bytes, mime: str) -> tuple[int, int] | None:
    """(width, height) in pixels read from the header of a PNG, GIF, JPEG or WebP, if there."""
    try:
        if mime == "image/png" and head[12:16] == b"IHDR":
            return struct.unpack(">II", head[16:24])
        if mime == "image/gif":
            return struct.unpack("<HH", head[6:10])
        if mime == "image/webp":
            return _webp_size(head)
        if mime == "image/jpeg":
            return _jpeg_size(head)
    except struct.error:
        return None
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8X":
        width = int.from_bytes(head[24:27], "little") + 1
        height = int.from_bytes(head[27:30], "little") + 1
        return width, height
    if chunk == b"VP8L" and head[20:21] == b"\x2f":
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


_JPEG_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(head: bytes) -> tuple[int, int] | None:
    """Walk the segments up to the first start-of-frame (often within the first few KiB)."""
    at = 2
    while at + 9 < len(head):
        if head[at] != 0xFF:
            return None
        marker = head[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _JPEG_FRAME_MARKERS:
            height, width = struct.unpack(">HH", head[at + 5 : at + 9])
            return (width, height) if width and height else None
        if marker == 0xD9 or marker == 0xDA:  # end of image, start of scan: no frame header seen
            return None
        (length,) = struct.unpack(">H", head[at + 2 : at + 4])
        at += 2 + length
    return None
