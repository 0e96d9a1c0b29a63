"""The readable text of an HTML page, as light Markdown: headings, paragraphs, lists, quotes,
table rows and code blocks are kept; scripts, styles, navigation, page headers and footers,
forms and other chrome are dropped. When the page marks its content (`<main>`, `<article>`),
only that part is kept."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

# Never text for a reader.
_INVISIBLE = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "select"}
)
# Page chrome; a header or footer inside an article belongs to the article, though.
_CHROME = frozenset({"nav", "aside", "form", "button", "dialog"})
_PAGE_FRAME = frozenset({"header", "footer"})
_CONTENT = frozenset({"main", "article"})
_BLOCKS = frozenset(
    {
        "p", "div", "section", "article", "main", "ul", "ol", "dl", "dt", "dd", "table", "tr",
        "blockquote", "figure", "figcaption", "details", "summary", "address", "hr", "body",
    }
)  # fmt: skip
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_VOID = frozenset(
    {"br", "img", "hr", "meta", "link", "input", "source", "wbr", "col", "area", "base", "embed"}
)
_SPACES = re.compile(r"[ \t\r\n\f\v]+")


@dataclass
class _Block:
    text: str
    in_content: bool
    group: str
    """`list` (items) or `table` (rows): such blocks join their neighbours of the same group
    with one line break; other blocks are paragraphs."""


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[_Block] = []
        self.title = ""
        self._buffer: list[str] = []
        self._prefix = ""
        self._skip: list[str] = []
        """Open elements whose content is dropped (by name, to match their end tags)."""
        self._content_depth = 0
        self._lists: list[list[int]] = []
        """Open lists: [next number] for ordered lists, [] for bulleted ones."""
        self._pre: list[str] | None = None
        self._in_title = False
        self._quote_depth = 0
        self._cells = False
        """The text being gathered is a table row."""

    # ------------------------------------------------------------ tags
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self._skip:
            self._in_title = True
            return
        if (
            self._skip
            or tag in _INVISIBLE
            or tag in _CHROME
            or (tag in _PAGE_FRAME and not self._content_depth)
        ):
            if tag not in _VOID:
                self._skip.append(tag)
            return
        if self._pre is not None:
            return
        if tag in _CONTENT:
            self._flush()
            self._content_depth += 1
        elif tag in _HEADINGS:
            self._flush()
            self._prefix = "#" * _HEADINGS[tag] + " "
        elif tag in ("ul", "ol"):
            self._flush()
            self._lists.append([1] if tag == "ol" else [])
        elif tag == "li":
            self._flush()
            self._prefix = self._bullet()
        elif tag == "pre":
            self._flush()
            self._pre = []
        elif tag == "blockquote":
            self._flush()
            self._quote_depth += 1
        elif tag == "br":
            self._buffer.append("\n")
        elif tag in ("td", "th"):
            self._cells = True
            if "".join(self._buffer).strip():
                self._buffer.append(" | ")
        elif tag == "code":
            self._buffer.append("`")
        elif tag in _BLOCKS:
            self._flush()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br" and not self._skip:
            self._buffer.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if self._skip:
            if tag in self._skip:  # also closes elements left open inside it
                del self._skip[len(self._skip) - 1 - self._skip[::-1].index(tag) :]
            return
        if self._pre is not None:
            if tag == "pre":
                code = "".join(self._pre).strip("\n")
                self._pre = None
                if code.strip():
                    self._emit(f"```\n{code}\n```")
            return
        if tag in _CONTENT:
            self._flush()
            self._content_depth = max(0, self._content_depth - 1)
        elif tag in _HEADINGS or tag == "li":
            self._flush()
        elif tag in ("ul", "ol"):
            self._flush()
            if self._lists:
                self._lists.pop()
        elif tag == "blockquote":
            self._flush()
            self._quote_depth = max(0, self._quote_depth - 1)
        elif tag == "code":
            if self._buffer and self._buffer[-1] == "`":
                self._buffer.pop()  # an empty code element leaves nothing
            else:
                self._buffer.append("`")
        elif tag in _BLOCKS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skip:
            return
        elif self._pre is not None:
            self._pre.append(data)
        else:
            self._buffer.append(data)

    # ------------------------------------------------------------ blocks
    def _bullet(self) -> str:
        indent = "  " * max(0, len(self._lists) - 1)
        if self._lists and self._lists[-1]:
            number = self._lists[-1][0]
            self._lists[-1][0] += 1
            return f"{indent}{number}. "
        return f"{indent}- "

    def _flush(self) -> None:
        lines = ("".join(self._buffer)).split("\n")
        text = "\n".join(line for line in (_SPACES.sub(" ", ln).strip() for ln in lines) if line)
        self._buffer.clear()
        prefix, self._prefix = self._prefix, ""
        if text:
            group = "list" if self._lists else "table" if self._cells else ""
            self._emit(prefix + text, group=group)
        self._cells = False

    def _emit(self, text: str, *, group: str = "") -> None:
        if self._quote_depth:
            text = "\n".join("> " * self._quote_depth + line for line in text.split("\n"))
        self.blocks.append(_Block(text, self._content_depth > 0, group))

    def finish(self) -> None:
        self.close()
        if self._pre is not None:
            self._pre, pending = None, "".join(self._pre)
            if pending.strip():
                self._emit(f"```\n{pending.strip(chr(10))}\n```")
        self._flush()


@dataclass(frozen=True)
class PageText:
    title: str
    text: str


def html_to_text(html: str) -> PageText:
    """The title and the main text of `html` (empty text when nothing readable is there)."""
    parser = _Extractor()
    parser.feed(html)
    parser.finish()
    chosen = [b for b in parser.blocks if b.in_content] or parser.blocks
    pieces: list[str] = []
    for index, block in enumerate(chosen):
        if index:
            same = block.group and block.group == chosen[index - 1].group
            pieces.append("\n" if same else "\n\n")
        pieces.append(block.text)
    return PageText(_SPACES.sub(" ", parser.title).strip(), "".join(pieces))
