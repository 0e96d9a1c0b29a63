"""Pieces of the shell's rendering that need no terminal: cutting streamed Markdown into
finished blocks, one-line summaries of tool calls, truncated outputs, the view's output."""

from __future__ import annotations

import io
import json

from soulwire.ui.shell.blocks import call_summary, truncated_output
from soulwire.ui.shell.screen import Screen
from soulwire.ui.shell.view import BlockSplitter, ConversationView
from soulwire.wire.messages import ToolResult, TurnBegin, TurnEnd
from soulwire.wire.types import FunctionCall, TextPart, ThinkPart, ToolCall, tool_ok


def test_blocks_end_at_blank_lines_outside_code_fences():
    splitter = BlockSplitter()
    done: list[str] = []
    for piece in ["Intro para", "graph.\n\n```py\nx = 1\n\ny = 2\n", "```\n\nTail"]:
        done += splitter.feed(piece)
    assert done == ["Intro paragraph.", "```py\nx = 1\n\ny = 2\n```"]
    assert splitter.rest() == "Tail"


def test_call_summaries_say_what_the_tool_does():
    assert call_summary("Shell", json.dumps({"command": "make test"})) == "$ make test"
    assert call_summary("StrReplaceFile", json.dumps({"path": "a.py", "edit": {}})) == "a.py"
    assert call_summary("Grep", json.dumps({"pattern": "TODO", "path": "src"})) == "TODO in src"
    assert call_summary("Unknown", json.dumps({"k": 1})) == "k=1"
    assert call_summary("Shell", "{not json") == "{not json"
    assert call_summary("ExitPlanMode", "{}") == ""
    assert call_summary("Shell", json.dumps({"command": "echo 'a  b'\nls"})) == "$ echo 'a  b' …"


def test_long_outputs_keep_head_and_tail_and_say_how_to_see_all():
    text = "\n".join(str(n) for n in range(1, 101))
    shown = truncated_output(text, "/output 7").plain
    assert shown.startswith("1\n2\n") and shown.endswith("99\n100")
    assert "88 more lines (/output 7 shows all)" in shown
    assert truncated_output("a\nb", "x").plain == "a\nb"


def test_the_view_prints_thinking_answer_and_tool_outcome_in_order():
    out = io.StringIO()
    screen = Screen(out)
    screen.colors = None
    view = ConversationView(screen)
    view.on_merged(TurnBegin(user_input="hi"))
    view.on_raw(ThinkPart(think="considering"))
    for chunk in ["First para", "graph.\n\nSecond ", "one."]:
        view.on_raw(TextPart(text=chunk))
    assert "Second" not in out.getvalue()  # still being written: in the live area only
    assert "Second one." in view.live(80)
    call = ToolCall(id="c1", function=FunctionCall(name="Shell", arguments='{"command": "ls"}'))
    view.on_merged(call)
    view.on_merged(ToolResult(tool_call_id="c1", return_value=tool_ok(output="file.txt\n")))
    view.on_merged(TurnEnd())
    text = out.getvalue()
    order = ["Thinking", "considering", "First paragraph.", "Second one.", "● Shell  $ ls", "⎿ file.txt"]
    positions = [text.index(piece) for piece in order]
    assert positions == sorted(positions)
    assert view.outputs == [("Shell  $ ls", "file.txt\n")]


def test_text_written_above_a_running_prompt_keeps_the_terminal_raw():
    """Lines written above the prompt while it reads keys (a turn's output) must not put the
    terminal in cooked mode, even for a moment: a Ctrl-D pressed then is taken by the tty as
    end-of-file and reaches the prompt as a NUL, and the shell does not exit. Here the
    prompt's input records every switch to cooked mode; the Ctrl-D after the writes must end
    the prompt, and the text must be written in order."""
    import asyncio
    import contextlib

    from prompt_toolkit import PromptSession
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    out = io.StringIO()
    screen = Screen(out)
    cooked: list[bool] = []

    async def main() -> None:
        with create_pipe_input() as keys:

            @contextlib.contextmanager
            def recorded_cooked_mode():
                cooked.append(True)
                yield

            keys.cooked_mode = recorded_cooked_mode  # type: ignore[method-assign]
            session: PromptSession[str] = PromptSession(input=keys, output=DummyOutput())
            prompt = asyncio.ensure_future(session.prompt_async())
            async with asyncio.timeout(30):
                while not session.app.is_running:
                    await asyncio.sleep(0.01)
            for n in range(3):
                screen.write(f"line {n}\n")
                await asyncio.sleep(0.02)  # the scenario: output arriving bit by bit, as a turn's does
            keys.send_text("\x04")  # Ctrl-D on an empty line
            try:
                await asyncio.wait_for(prompt, 5)
            except EOFError:
                pass
            else:
                raise AssertionError("Ctrl-D did not end the prompt")

    asyncio.run(main())
    assert out.getvalue() == "line 0\nline 1\nline 2\n"
    assert not cooked
