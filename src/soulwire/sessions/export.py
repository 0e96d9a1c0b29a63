"""A session's model-visible history (context records) as Markdown, for reading or sharing.
Works on raw records, so any readable context exports, whoever wrote it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

_ROLE_TITLES = {"user": "User", "assistant": "Assistant", "tool": "Tool result", "system": "System"}
MAX_MEDIA_URL = 200


def _fence(text: str, info: str = "") -> str:
    """A code fence longer than any backtick run inside the text."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text.rstrip()}\n{ticks}"


def _media(kind: str, value: Any) -> str:
    url = str(value.get("url", "")) if isinstance(value, dict) else ""
    if url.startswith("data:"):
        return f"*[{kind}: embedded data, {len(url)} characters]*"
    return f"*[{kind}: {url[:MAX_MEDIA_URL]}]*"


def _parts(content: Any, *, as_code: bool) -> list[str]:
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    blocks: list[str] = []
    texts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("text", "")))
            continue
        if texts:
            joined = "".join(texts)
            blocks.append(_fence(joined) if as_code else joined)
            texts = []
        if kind == "think":
            thought = str(part.get("think", "")).strip()
            if thought:
                blocks.append("<details><summary>Thinking</summary>\n\n" + thought + "\n\n</details>")
        elif kind in ("image_url", "audio_url", "video_url"):
            blocks.append(_media(str(kind).removesuffix("_url"), part.get(kind)))
    if texts:
        joined = "".join(texts)
        blocks.append(_fence(joined) if as_code else joined)
    return [b for b in blocks if b.strip()]


def _tool_calls(calls: Any) -> list[str]:
    blocks: list[str] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        function: Any = call.get("function") or {}
        name = function.get("name", "?") if isinstance(function, dict) else "?"
        arguments = function.get("arguments") if isinstance(function, dict) else None
        try:
            pretty = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False) if arguments else "{}"
        except (TypeError, ValueError):
            pretty = str(arguments)
        blocks.append(f"**Tool call** `{name}` (`{call.get('id', '')}`)\n\n" + _fence(pretty, "json"))
    return blocks


def context_to_markdown(
    records: Iterable[dict[str, Any]],
    *,
    session_id: str,
    title: str | None = None,
    work_dir: str | None = None,
    exported_at: datetime | None = None,
) -> str:
    """Render context records (special `_` records are skipped) as one Markdown document."""
    when = (exported_at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"# {title or 'Session ' + session_id}", "", f"- Session: `{session_id}`"]
    if work_dir:
        lines.append(f"- Work dir: `{work_dir}`")
    lines += [f"- Exported: {when}", ""]
    for record in records:
        role = record.get("role")
        if not isinstance(role, str) or role.startswith("_"):
            continue
        heading = _ROLE_TITLES.get(role, role.capitalize())
        if role == "tool" and record.get("tool_call_id"):
            heading += f" (`{record['tool_call_id']}`)"
        blocks = _parts(record.get("content"), as_code=role == "tool") + _tool_calls(record.get("tool_calls"))
        lines += [f"## {heading}", "", *("\n\n".join(blocks).splitlines() or ["*(empty)*"]), ""]
    return "\n".join(lines).rstrip() + "\n"
