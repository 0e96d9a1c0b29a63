"""The pure helpers behind ReadMediaFile and FetchURL: media signatures and pixel sizes, and
the HTML → text reduction on the shapes real pages have (articles with their own headers,
nested and numbered lists, tables, quotes, unclosed tags, no `<main>` at all)."""

from __future__ import annotations

import struct

from soulwire.tools.builtin.htmltext import html_to_text
from soulwire.tools.builtin.mediatypes import MediaType, by_name, image_size, looks_like_text, sniff


def test_signatures_decide_the_media_type():
    assert sniff(b"\x1a\x45\xdf\xa3\x01\x00\x00\x00\x00\x00\x00\x1f\x42\x86\x81\x01webm") == MediaType(
        "video", "video/webm"
    )
    assert sniff(b"\x1a\x45\xdf\xa3\x01\x00\x00\x00\x42\x82\x88matroska") == MediaType(
        "video", "video/x-matroska"
    )
    assert sniff(b"RIFF\x00\x00\x00\x00AVI LIST") == MediaType("video", "video/x-msvideo")
    assert sniff(b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00") == MediaType("image", "image/avif")
    assert sniff(b"\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00") == MediaType("video", "video/quicktime")
    assert sniff(b"<svg xmlns='http://www.w3.org/2000/svg'/>") is None
    assert sniff(b"hello") is None


def test_names_vouch_only_for_formats_without_a_known_signature():
    assert by_name("photo.PNG") is None  # a PNG must carry the PNG signature
    assert by_name("clip.mp4") is None
    assert by_name("scan.jp2") == MediaType("image", "image/jp2")
    assert by_name("logo.svg") is None and by_name("notes.txt") is None and by_name("Makefile") is None


def test_text_detection_tolerates_a_character_cut_at_the_end():
    assert looks_like_text("café".encode()[:-1])
    assert not looks_like_text(b"\x89PNG\r\n") and not looks_like_text(b"a\x00b")


def test_pixel_sizes_from_image_headers():
    vp8x = b"RIFF\x00\x00\x00\x00WEBPVP8X" + b"\x0a\x00\x00\x00" + b"\x00" * 4 + (799).to_bytes(3, "little")
    assert image_size(vp8x + (599).to_bytes(3, "little"), "image/webp") == (800, 600)
    assert image_size(b"GIF89a" + struct.pack("<HH", 32, 16), "image/gif") == (32, 16)
    exif_then_frame = (
        b"\xff\xd8"
        + b"\xff\xe1"
        + struct.pack(">H", 8)
        + b"Exif\x00\x00"
        + b"\xff\xc2"
        + struct.pack(">HBHH", 11, 8, 300, 400)
        + b"\x01"
    )
    assert image_size(exif_then_frame, "image/jpeg") == (400, 300)
    assert image_size(b"\xff\xd8\xff\xd9", "image/jpeg") is None
    assert image_size(b"\x89PNG\r\n\x1a\n", "image/png") is None  # cut before IHDR


def test_an_article_keeps_its_own_header_and_drops_the_page_chrome():
    page = html_to_text(
        "<body><header>SITE</header><aside>ADS</aside><article><header><h1>Post</h1></header>"
        "<p>Body<br>second line</p><footer>by me</footer></article><footer>COPYRIGHT</footer></body>"
    )
    assert page.text == "# Post\n\nBody\nsecond line\n\nby me"


def test_lists_tables_quotes_and_unclosed_tags():
    page = html_to_text(
        "<title> A  page </title><div><ol><li>one<li>two<ul><li>inner</ul><li>three</ol>"
        "<table><tr><th>k<th>v<tr><td>a<td>1</table>"
        "<blockquote><p>quoted<p>twice</blockquote><p>unclosed para<p>next &lt;tag&gt;"
    )
    assert page.title == "A page"
    assert page.text == (
        "1. one\n2. two\n  - inner\n3. three\n\nk | v\na | 1\n\n> quoted\n\n> twice\n\nunclosed para\n\nnext <tag>"
    )


def test_a_page_without_text_gives_nothing():
    assert (
        html_to_text("<html><head><script>x()</script></head><body><nav>menu</nav></body></html>").text == ""
    )
