"""Cost of rendering a streamed answer in the shell: a 400-word Markdown answer (with a code
block) fed to the conversation view in small chunks, as a provider streams it.

Reports the CPU time per chunk (what every streamed part costs the event loop), the cost of
one repaint of the live area (the open paragraph, done at most once per frame), and the
total for the whole answer.

    python bench/tui_render.py
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from soulwire.ui.shell.screen import Screen
from soulwire.ui.shell.view import ConversationView
from soulwire.wire.messages import TurnBegin, TurnEnd
from soulwire.wire.types import TextPart

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "while",
    "the",
    "engine",
    "streams",
]


def answer(words: int = 400) -> str:
    body: list[str] = ["## Summary\n\n"]
    for n in range(words):
        body.append(WORDS[n % len(WORDS)] + (".\n\n" if n % 60 == 59 else " "))
        if n == 200:
            body.append("\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n")
    return "".join(body)


def main() -> None:
    text = answer()
    chunks = [text[i : i + 12] for i in range(0, len(text), 12)]
    runs: list[tuple[float, float, float, float]] = []
    for _ in range(5):
        screen = Screen(io.StringIO())
        screen.colors = "truecolor"
        view = ConversationView(screen)
        view.on_merged(TurnBegin(user_input="x"))
        per_chunk: list[float] = []
        repaints: list[float] = []
        start = time.perf_counter()
        for i, chunk in enumerate(chunks):
            t0 = time.perf_counter()
            view.on_raw(TextPart(text=chunk))
            per_chunk.append(time.perf_counter() - t0)
            if i % 4 == 0:  # about one repaint per frame at this chunk rate
                t1 = time.perf_counter()
                view.live(100)
                repaints.append(time.perf_counter() - t1)
        view.on_merged(TurnEnd())
        total = time.perf_counter() - start
        runs.append(
            (
                statistics.median(per_chunk) * 1000,
                max(per_chunk) * 1000,
                statistics.median(repaints) * 1000,
                total * 1000,
            )
        )
    chunk_ms, worst_ms, repaint_ms, total_ms = (statistics.median(r[i] for r in runs) for i in range(4))
    print(f"400 words, {len(chunks)} chunks of 12 characters, median of 5 runs")
    print(f"per chunk (view.on_raw):      {chunk_ms:.3f} ms (worst: {worst_ms:.1f} ms, a block printed)")
    print(f"one live-area repaint:        {repaint_ms:.2f} ms")
    print(f"whole answer incl. repaints:  {total_ms:.0f} ms")


if __name__ == "__main__":
    main()
