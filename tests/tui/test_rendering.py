"""What the shell shows: streamed Markdown with highlighted code, long answers readable in
the scrollback, colours off with NO_COLOR, narrow and resized terminals, steering."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator

import pytest

from tests.fake_llm_server import FakeLLMServer, Gate
from tests.provider_streams import Answer, stream_reply
from tests.tui.conftest import Tmux, tool_call, user_inputs

Shell = Callable[..., Tmux]
COLOUR = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-8]|9[0-7]|4[0-8]|10[0-7])(?:;[0-9]+)*m")


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def provider_config(server: FakeLLMServer) -> dict[str, object]:
    """A real provider (Chat Completions) on the fake server: text with newlines streams as
    the model writes it, which the scripted DSL cannot express."""
    return {
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "test-model", "max_context_size": 100_000}},
        "providers": {"p": {"type": "openai_legacy", "base_url": server.url + "/v1", "api_key": "sk-test"}},
    }


def chunks(text: str, size: int = 17) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


LONG_ANSWER = (
    "# Release notes\n\nThe intro paragraph.\n\n"
    "```python\ndef add(left, right):\n    return left + right\n```\n\n"
    + "".join(f"Paragraph {n}: the quick brown fox jumps over the lazy dog.\n\n" for n in range(1, 61))
    + "- first point\n- second point\n\nTHE END OF THE ANSWER."
)


def test_a_long_markdown_answer_streams_into_the_scrollback_with_the_end_on_screen(
    tmux_shell: Shell, llm: FakeLLMServer
):
    llm.queue(stream_reply("openai_legacy", Answer("m1", text=chunks(LONG_ANSWER))))
    shell = tmux_shell(width=80, height=24, **provider_config(llm))
    shell.start()
    shell.ready("test-model")
    shell.type("write the notes")
    shell.keys("Enter")
    screen = shell.wait_for(r"THE END OF THE ANSWER\.")
    assert "second point" in screen  # the end is on the screen
    history = shell.screen(history=True)
    numbers = [int(n) for n in re.findall(r"Paragraph (\d+):", history)]
    assert numbers == list(range(1, 61))  # every paragraph, once, in order
    assert "Release notes" in history and "# Release notes" not in history  # rendered, not raw
    assert "```" not in history
    coloured = shell.screen(history=True, escapes=True)
    code_line = next(line for line in coloured.splitlines() if "def" in line and "add" in line)
    assert COLOUR.search(code_line)  # the code block is highlighted


def test_no_color_means_no_colour(tmux_shell: Shell):
    shell = tmux_shell(
        "think: some thinking\ntext: A plain answer with `code`.",
        tool_call("c1", "Shell", command="echo hello"),
        "text: done",
    )
    shell.start("--yolo", env={"NO_COLOR": "1"})
    shell.ready()
    shell.type("go")
    shell.keys("Enter")
    shell.wait_for(r"A plain answer with code\.")
    shell.type("again")
    shell.keys("Enter")
    shell.wait_for(r"^done\s*$")
    screen = shell.screen(history=True, escapes=True)
    assert "some thinking" in screen and "⎿ hello" in re.sub(r"\x1b\[[0-9;]*m", "", screen)
    assert not COLOUR.search(screen), repr(screen)


def test_a_narrow_terminal_and_a_resize(tmux_shell: Shell):
    long_command = "echo " + "abcdefghij" * 12
    shell = tmux_shell(
        "text: " + "narrow words " * 20 + "END-ONE",
        tool_call("c1", "Shell", command=long_command),
        "text: END-TWO",
        width=40,
        height=20,
    )
    shell.start("--yolo")
    shell.wait_for("scripted")
    shell.type("hello")
    shell.keys("Enter")
    screen = shell.wait_for(r"END-ONE")
    assert all(len(line) <= 40 for line in screen.splitlines())
    shell.tmux("resize-window", "-t", "t", "-x", "90", "-y", "30")
    shell.type("and the tool")
    shell.keys("Enter")
    screen = shell.wait_for(r"END-TWO")
    assert "abcdefghij" * 5 in screen  # the wider terminal shows more of the command


def test_enter_while_a_turn_runs_steers_it(tmux_shell: Shell):
    shell = tmux_shell(
        tool_call("c1", "Shell", command="sleep 2; echo slept"),
        "text: saw the steer",
    )
    shell.start("--yolo")
    shell.ready()
    shell.type("start")
    shell.keys("Enter")
    shell.wait_for(r"Shell  \$ sleep 2; echo slept")
    shell.type("also check the tests")
    shell.keys("Enter")
    shell.wait_for(r"sent to the running turn")
    shell.wait_for(r"» also check the tests")
    shell.wait_for(r"saw the steer")
    assert user_inputs(shell.sandbox.share) == ["start"]  # one turn: the steer joined it


def test_the_answer_shows_while_it_is_being_written(tmux_shell: Shell, llm: FakeLLMServer):
    release = threading.Event()
    pieces = ["A finished **paragraph**.\n\n", "An unfinished sen", "tence that ends later."]
    reply = stream_reply("openai_legacy", Answer("m1", text=pieces))
    cut = next(i for i, c in enumerate(reply.chunks) if isinstance(c, bytes) and b"tence that ends" in c)
    reply.chunks.insert(cut, Gate(release))
    llm.queue(reply)
    shell = tmux_shell(**provider_config(llm))
    shell.start()
    shell.ready("test-model")
    shell.type("stream please")
    shell.keys("Enter")
    try:
        screen = shell.wait_for(r"An unfinished sen")  # the open paragraph, live
        assert "A finished paragraph." in screen and "tence that ends" not in screen
    finally:
        release.set()
    screen = shell.wait_for(r"An unfinished sentence that ends later\.")
    assert screen.count("An unfinished sen") == 1  # the live copy was replaced, not left behind


def test_a_16_colour_terminal_gets_only_the_16_colours(tmux_shell: Shell):
    shell = tmux_shell(
        "think: hmm\ntext: Some `code` and **bold**.", tool_call("c1", "Shell", command="ls"), "text: ok"
    )
    shell.start(env={"TERM": "xterm", "COLORTERM": ""})
    shell.ready()
    shell.type("/he")  # the completion menu has colours of its own
    menu = shell.wait_for("List the commands", escapes=True)
    assert not re.search(r"\x1b\[[0-9;]*[34]8;[25];", menu), repr(menu)
    shell.keys("C-u")
    shell.type("go")
    shell.keys("Enter")
    shell.wait_for(r"Some code and bold\.")
    shell.type("tool")
    shell.keys("Enter")
    shell.wait_for(r"Approve once")
    screen = shell.screen(history=True, escapes=True)
    assert COLOUR.search(screen)  # there is colour …
    assert not re.search(r"\x1b\[[0-9;]*[34]8;[25];", screen), repr(screen)  # … of the 16 only


def test_a_steer_not_yet_taken_returns_to_the_input_line_when_the_turn_is_interrupted(tmux_shell: Shell):
    shell = tmux_shell(tool_call("c1", "Shell", command="sleep 5731"))
    shell.start("--yolo")
    shell.ready()
    shell.type("start")
    shell.keys("Enter")
    shell.wait_for(r"Shell  \$ sleep 5731  \d+s")
    shell.type("my second thought")
    shell.keys("Enter")
    shell.wait_for(r"sent to the running turn")
    shell.keys("C-c")
    shell.wait_for(r"Turn interrupted")
    shell.wait_for(r"❯ my second thought")
    assert user_inputs(shell.sandbox.share) == ["start"]


def _background_of_code(shell: Tmux) -> str:
    """The background colour the code line `total = sum(items)` is drawn on (tmux's capture
    sets an attribute once, where it changes: the last background set before the line)."""
    coloured = shell.screen(history=True, escapes=True)
    before = coloured[: coloured.index("total")]
    background = "default"
    for params in re.findall(r"\x1b\[([0-9;]*)m", before):
        codes, k = params.split(";"), 0
        while k < len(codes):
            code = codes[k]
            if code in ("38", "48"):  # an extended colour: 5;N or 2;R;G;B follow
                size = 2 if codes[k + 1] == "5" else 4
                if code == "48":
                    background = ";".join(codes[k + 1 : k + 1 + size])
                k += 1 + size
                continue
            if code in ("", "0", "49"):
                background = "default"
            k += 1
    return background


def test_theme_light_gives_code_blocks_a_light_background(tmux_shell: Shell, llm: FakeLLMServer):
    """`theme = "light"` (a reference key): code blocks get a light background instead of a
    dark slab; `dark` (the default) keeps the dark one."""
    answer = "Here:\n\n```python\ntotal = sum(items)\n```\n\nDONE."
    backgrounds: dict[str, str] = {}
    for theme in ("dark", "light"):
        llm.queue(stream_reply("openai_legacy", Answer("m1", text=chunks(answer))))
        shell = tmux_shell(theme=theme, **provider_config(llm))
        shell.start()
        shell.ready("test-model")
        shell.type("show me")
        shell.keys("Enter")
        shell.wait_for(r"^DONE\.")
        backgrounds[theme] = _background_of_code(shell)
    # xterm-256color: monokai's #272822 is colour 235, friendly's #f0f0f0 colour 255
    assert backgrounds == {"dark": "5;235", "light": "5;255"}


def test_ctrl_d_pressed_while_a_long_answer_is_written_leaves_the_shell(
    tmux_shell: Shell, llm: FakeLLMServer
):
    """Ctrl-D as the lines of a long answer go to the scrollback: the shell exits. Writing
    above the prompt once put the terminal in cooked mode for the write, and a Ctrl-D then
    was taken by the tty as end-of-file and reached the prompt as a NUL: nothing happened."""
    big = "```\n" + "".join(f"line {n:05d} " + "x" * 60 + "\n" for n in range(4000)) + "```\n\nTHE END."
    llm.queue(stream_reply("openai_legacy", Answer("m1", text=[big])))
    shell = tmux_shell(width=100, height=30, **provider_config(llm))
    shell.start()
    shell.ready("test-model")
    shell.type("print a long file")
    shell.keys("Enter")
    shell.wait_until(lambda screen: "line 0" in screen, "the answer's first lines", interval=0)
    shell.keys("C-d")  # (the 4,000 lines take a while to write: this comes in the middle)
    shell.wait_for(r"^EXIT=0$")
