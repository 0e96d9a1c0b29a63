"""The interactive shell, driven like a person drives it: real `soulwire` in tmux, the
scripted offline model, keys in, screen out."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.budget_cases import (
    KINDS,
    PRICES,
    RAISED,
    SCOPES,
    TREE_TOKENS,
    budget_prompt,
    command_name,
    limit_text,
    limit_value,
    scripts,
    subagent_tree_scripts,
)
from tests.tui.conftest import Tmux, tool_call, user_inputs, wait_for_file, wire_records
from tests.wire_client import Sandbox, WireProcess, scripted_config

Shell = Callable[..., Tmux]


def test_a_prompt_is_answered_and_ctrl_d_leaves_with_status_0_and_the_terminal_restored(tmux_shell: Shell):
    shell = tmux_shell("think: pondering the question\ntext: Hello from the **model**.")
    shell.start()
    assert "context 0.0%" in shell.ready()  # the status line: model and context use
    shell.type("hi there")
    shell.keys("Enter")
    screen = shell.wait_for(r"Hello from the model\.")
    assert "❯ hi there" in screen
    assert "pondering the question" in screen and "Thinking" in screen
    shell.wait_until(lambda s: "Working" not in s, "the turn's end")
    shell.keys("C-d")
    shell.wait_for(r"^EXIT=0$")
    # main screen, cursor visible, no mouse reporting, no bracketed paste left on
    assert shell.flags("alternate_on", "cursor_flag", "mouse_any_flag") == ["0", "1", "0"]
    shell.type("echo-is-back")  # the terminal echoes again (cooked mode restored)
    shell.wait_for(r"^echo-is-back")


def test_the_line_editor_moves_edits_and_inserts_newlines_with_ctrl_j(tmux_shell: Shell):
    shell = tmux_shell("text: ok")
    shell.start()
    shell.ready()
    shell.type("brown fox")
    shell.keys("M-b")  # word back: before "fox"
    shell.type("quick ")
    shell.keys("Home")
    shell.type("the ")
    shell.keys("End", "BSpace", "BSpace", "BSpace")
    shell.type("dog")
    shell.keys("Left", "Left", "Left", "Right")
    shell.keys("C-j")  # a new line in the middle of the message, not a submission
    shell.wait_for(r"the brown quick d\n  og")
    shell.keys("End")
    shell.keys("C-j")
    shell.type("second line")
    shell.keys("Enter")
    shell.wait_for(r"^ok\s*$")
    assert user_inputs(shell.sandbox.share) == ["the brown quick d\nog\nsecond line"]


def test_a_multi_line_paste_is_one_message(tmux_shell: Shell):
    shell = tmux_shell("text: got it")
    shell.start()
    shell.ready()
    shell.paste("first line\nsecond line\nthird line")
    shell.wait_for("third line")
    shell.keys("Enter")
    shell.wait_for(r"^got it\s*$")
    assert user_inputs(shell.sandbox.share) == ["first line\nsecond line\nthird line"]


def test_history_is_kept_per_work_directory(tmux_shell: Shell, tmp_path: Path):
    shell = tmux_shell("text: one", "text: two")
    shell.start()
    shell.ready()
    shell.type("remember this prompt")
    shell.keys("Enter")
    shell.wait_for(r"^one\s*$")
    shell.keys("C-d")
    shell.wait_for("^EXIT=0$")
    shell.start()
    shell.ready()
    shell.keys("Up")
    shell.wait_for(r"❯ remember this prompt")
    shell.keys("C-u", "C-d")
    shell.wait_for("^EXIT=0$")
    other = tmp_path / "elsewhere"
    other.mkdir()
    shell.start(work=other)
    shell.ready()
    shell.keys("Up")
    shell.type("X")
    screen = shell.wait_for(r"❯ X")
    assert "remember this prompt" not in screen


def test_slash_commands_and_file_mentions_complete_with_tab(tmux_shell: Shell):
    shell = tmux_shell()
    (shell.sandbox.work / "src").mkdir(parents=True)
    (shell.sandbox.work / "src" / "engine_main.py").write_text("print(1)\n")
    shell.start()
    shell.ready()
    shell.type("/hel")
    shell.wait_for(r"❯ /hel")
    shell.keys("Tab")
    shell.wait_for(r"❯ /help")
    shell.keys("C-u")
    shell.type("look at @engine_ma")
    shell.wait_for(r"❯ look at @engine_ma")
    shell.keys("Tab")
    shell.wait_for(r"❯ look at @src/engine_main\.py")


def test_help_lists_every_command_and_an_unknown_one_never_reaches_the_model(tmux_shell: Shell):
    shell = tmux_shell()  # no script at all: a model call would fail loudly
    shell.start()
    shell.ready()
    shell.type("/help")
    shell.keys("Enter")
    # In the scrollback too: under load the terminal was once seen scrolled past the list.
    screen = shell.wait_for(r"/sessions", history=True)
    for name in ("/compact", "/clear", "/yolo", "/plan", "/init", "/exit", "/model", "/output"):
        assert name in screen
    shell.type("/xyz")
    shell.keys("Enter")
    shell.wait_for(r"Unknown command /xyz")
    shell.type("/yolo")
    shell.keys("Enter")
    shell.wait_for(r"Auto-approve is on")
    shell.wait_for(r"YOLO")
    assert "exhausted" not in shell.screen(history=True)
    assert [u for u in user_inputs(shell.sandbox.share)] == ["/yolo"]
    shell.type("/exit")
    shell.keys("Enter")
    shell.wait_for("^EXIT=0$")


def test_approval_shows_the_command_first_and_nothing_runs_before_the_answer(tmux_shell: Shell):
    marker = "created_by_the_tool"
    shell = tmux_shell(
        tool_call("c1", "Shell", command=f"touch {marker} && seq 1 40"),
        "text: first done",
        tool_call("c2", "Shell", command="touch never_made"),  # rejected: the turn ends there
        tool_call("c3", "Shell", command="touch never_either"),
    )
    shell.start()
    shell.ready()
    work = shell.sandbox.work
    shell.type("make the file")
    shell.keys("Enter")
    screen = shell.wait_for(r"Approve once")
    assert f"touch {marker}" in screen and "Reject" in screen
    assert not (work / marker).exists()
    shell.keys("Enter")  # approve once (preselected)
    screen = shell.wait_for(r"first done", history=True)
    assert (work / marker).exists()
    assert "approved once" in screen
    # a successful Shell call's output is shown, long output truncated with a way to see all
    assert "⎿ 1\n    2\n" in screen and "more lines (/output 1 shows all)" in screen
    shell.type("/output 1")
    shell.keys("Enter")
    shell.wait_for(r"^25\s*$")

    shell.type("again")
    shell.keys("Enter")
    shell.wait_for(r"touch never_made")
    shell.wait_for(r"Approve once")
    shell.keys("Escape")  # reject
    shell.wait_for(r"✗ rejected")
    shell.wait_for(r"^❯\s*$")
    assert not (work / "never_made").exists()

    shell.type("once more")
    shell.keys("Enter")
    shell.wait_for(r"touch never_either")
    shell.wait_for(r"Approve once")
    shell.keys("4")
    shell.wait_for(r"Why\?")
    shell.type("use python instead")
    shell.keys("Enter")
    shell.wait_for(r"rejected: use python instead")
    assert not (work / "never_either").exists()
    contexts = "".join(p.read_text() for p in shell.sandbox.share.glob("sessions/*/*/context.jsonl"))
    assert "use python instead" in contexts  # the model is told why


def test_approve_for_the_session_stops_asking_for_the_same_command(tmux_shell: Shell):
    shell = tmux_shell(
        tool_call("c1", "Shell", command="echo same-command"),
        "text: one",
        tool_call("c2", "Shell", command="echo same-command"),
        "text: two",
    )
    shell.start()
    shell.ready()
    shell.type("first")
    shell.keys("Enter")
    shell.wait_for(r"Approve once")
    shell.keys("Down", "Enter")
    shell.wait_for(r"approved for this session")
    shell.wait_for(r"^one\s*$")
    shell.type("second")
    shell.keys("Enter")
    screen = shell.wait_for(r"^two\s*$", history=True)
    assert screen.count("wants to run command") == 1
    assert screen.count("echo same-command") == 3  # the two calls and the approval's command


def _running(pattern: str) -> bool:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return out.returncode == 0


def test_ctrl_c_interrupts_the_turn_and_kills_the_running_command(tmux_shell: Shell):
    shell = tmux_shell(
        tool_call("c1", "Shell", command="sleep 4321 & sleep 4322; echo done"),
        "text: after the interruption",
    )
    shell.start("--yolo")
    shell.ready()
    shell.type("run the long thing")
    shell.keys("Enter")
    shell.wait_for(r"Shell  \$ sleep 4321 & sleep 4322; echo done  \d+s")  # spinner with elapsed time
    wait_for_file(lambda: _running("sleep 4322"), "the command running")
    shell.keys("C-c")
    screen = shell.wait_for(r"Turn interrupted")
    assert "⎿ ⏹ interrupted (Shell)" in screen
    wait_for_file(lambda: not _running("sleep 432[12]"), "the command and its children killed", timeout=5)
    shell.type("next")
    shell.keys("Enter")
    shell.wait_for(r"after the interruption")
    # Ctrl-C at an empty prompt hints, a second one leaves
    shell.keys("C-c")
    shell.wait_for(r"Ctrl-C again or Ctrl-D to exit")
    shell.keys("C-c")
    shell.wait_for("^EXIT=0$")


def test_a_question_is_answered_with_a_picker(tmux_shell: Shell):
    questions = [
        {
            "question": "Which colour?",
            "header": "Colour",
            "options": [{"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}],
        }
    ]
    shell = tmux_shell(tool_call("q1", "AskUserQuestion", questions=questions), "text: noted")
    shell.start()
    shell.ready()
    shell.type("ask me")
    shell.keys("Enter")
    shell.wait_for(r"Which colour\?")
    shell.wait_for(r"2\. Blue")
    shell.keys("2")
    shell.wait_for(r"^noted\s*$")
    results = [m["payload"] for m in wire_records(shell.sandbox.share) if m["type"] == "ToolResult"]
    assert "Blue" in json.dumps(results[0]["return_value"])


def test_continue_shows_the_earlier_conversation(tmux_shell: Shell):
    shell = tmux_shell("text: the first answer", "text: the second answer")
    shell.start()
    shell.ready()
    shell.type("the first question")
    shell.keys("Enter")
    shell.wait_for(r"the first answer")
    shell.keys("C-d")
    shell.wait_for("^EXIT=0$")
    shell.sandbox.scripts = ["text: the second answer"]  # a new process reads its scripts anew
    shell.start("--continue")
    screen = shell.wait_for(r"end of the earlier conversation")
    assert "❯ the first question" in screen and "the first answer" in screen
    shell.type("and now?")
    shell.keys("Enter")
    shell.wait_for(r"the second answer")
    assert user_inputs(shell.sandbox.share) == ["the first question", "and now?"]


def test_edits_show_the_file_and_a_diff(tmux_shell: Shell):
    shell = tmux_shell(
        tool_call("e1", "StrReplaceFile", path="notes.txt", edit={"old": "alpha", "new": "omega"}),
        "text: edited",
    )
    (shell.sandbox.work).mkdir(parents=True, exist_ok=True)
    (shell.sandbox.work / "notes.txt").write_text("alpha\nbeta\n")
    shell.start()
    shell.ready()
    shell.type("edit it")
    shell.keys("Enter")
    screen = shell.wait_for(r"Approve once")
    assert "notes.txt" in screen
    assert "- alpha" in screen and "+ omega" in screen
    shell.keys("Enter")
    shell.wait_for(r"^edited\s*$")
    assert (shell.sandbox.work / "notes.txt").read_text() == "omega\nbeta\n"


def test_plain_line_mode_without_a_terminal(tmp_path: Path):
    """stdin not a terminal (or TERM=dumb): one line is one prompt, plain text out."""
    sandbox = Sandbox(tmp_path)
    sandbox.scripts = ["text: plain answer"]
    sandbox.write()
    argv = [
        sys.executable,
        "-m",
        "soulwire",
        "--config-file",
        str(sandbox.config_path),
        "-w",
        str(sandbox.work),
    ]
    out = subprocess.run(
        argv,
        input="hello\n",
        capture_output=True,
        text=True,
        env={**sandbox.env(), "TERM": "dumb"},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "plain answer" in out.stdout
    assert "\x1b[" not in out.stdout


def test_text_typed_before_the_prompt_appears_is_kept(tmux_shell: Shell):
    shell = tmux_shell("text: early bird answered")
    shell.start()
    shell.type("typed right away")  # the process is still starting
    screen = shell.wait_for(r"❯ typed right away")
    assert screen.count("typed right away") == 1  # not echoed by the terminal as well
    shell.ready()
    shell.keys("Enter")
    shell.wait_for(r"early bird answered")
    assert user_inputs(shell.sandbox.share) == ["typed right away"]


def test_clear_and_export_and_sessions(tmux_shell: Shell):
    shell = tmux_shell("text: an answer to keep")
    shell.start()
    shell.ready()
    shell.type("a question")
    shell.keys("Enter")
    shell.wait_for(r"an answer to keep")
    shell.type("/export notes.md")
    shell.keys("Enter")
    # the path is as long as pytest's temporary dir: the terminal may wrap it anywhere
    # ("notes.md" alone is on the screen as soon as the command is typed: wait for the reply)
    shell.wait_until(
        lambda screen: "Exported to" in screen
        and "notes.md" in screen.split("Exported to")[-1].replace("\n", ""),
        "the export",
    )
    exported = (shell.sandbox.work / "notes.md").read_text()
    assert "a question" in exported and "an answer to keep" in exported
    shell.type("/sessions")
    shell.keys("Enter")
    shell.wait_for(r"\(this one\)")
    shell.keys("Escape")  # keep this session
    shell.wait_until(lambda screen: "Resume which session" not in screen, "the picker closed")
    shell.type("/clear")
    shell.keys("Enter")
    shell.wait_for(r"The context has been cleared\.")
    shell.type("/exit")
    shell.keys("Enter")
    shell.wait_for("^EXIT=0$")


def test_sessions_picks_an_earlier_session_and_resumes_it(tmux_shell: Shell):
    shell = tmux_shell("text: alpha answer")
    shell.start()
    shell.ready()
    shell.type("alpha question")
    shell.keys("Enter")
    shell.wait_for(r"alpha answer")
    shell.keys("C-d")
    shell.wait_for("^EXIT=0$")
    shell.sandbox.scripts = ["text: beta answer"]
    shell.start()
    shell.ready()
    shell.type("beta question")
    shell.keys("Enter")
    shell.wait_for(r"beta answer")
    shell.sandbox.scripts = ["text: back in alpha"]  # the resumed session's model reads them anew
    shell.sandbox.write()
    shell.type("/sessions")
    shell.keys("Enter")
    screen = shell.wait_for(r"Resume which session\?")
    assert "alpha question" in screen and "beta question (this one)" not in screen
    line = next(line for line in screen.splitlines() if "alpha question" in line)
    shell.keys(line.split(".")[0].strip(" ❯"))  # its number
    screen = shell.wait_for(r"end of the earlier conversation")
    assert "❯ alpha question" in screen
    shell.type("continue")
    shell.keys("Enter")
    shell.wait_for(r"back in alpha")


def test_resuming_a_session_a_killed_engine_left_mid_turn_shows_the_turn_interrupted(tmux_shell: Shell):
    shell = tmux_shell(tool_call("c1", "Shell", command="echo never-run"))
    shell.sandbox.write()
    wire = WireProcess(shell.sandbox.argv("--session", "s-crash"), shell.sandbox.env(), shell.sandbox.work)
    wire.initialize()
    wire.request("prompt", {"user_input": "do A"})
    while (message := wire.recv()) is not None and message.get("method") != "request":
        pass  # until the Shell call waits for its approval
    os.killpg(wire.proc.pid, signal.SIGKILL)
    wire.proc.wait(timeout=10)
    shell.sandbox.scripts = ["text: fresh start"]
    shell.start("--session", "s-crash")
    screen = shell.wait_for(r"end of the earlier conversation")
    assert "❯ do A" in screen
    assert "⏹ interrupted (Shell): the engine stopped before this call finished" in screen
    assert "Turn interrupted" in screen


def test_a_configuration_error_exits_2_with_the_terminal_restored(tmux_shell: Shell):
    shell = tmux_shell(default_model="missing")  # not a key of [models]
    shell.start()
    # refused by the start-up check before the shell takes the terminal, as in --wire/--print
    screen = shell.wait_for(r"^EXIT=2$")
    assert "missing" in screen
    assert shell.flags("alternate_on", "cursor_flag", "mouse_any_flag") == ["0", "1", "0"]


def test_term_dumb_gives_a_plain_line_mode_in_a_terminal(tmux_shell: Shell):
    shell = tmux_shell(tool_call("c1", "Shell", command="echo from-the-tool"), "text: plain done")
    shell.start(env={"TERM": "dumb"})
    shell.wait_for(r"^>")
    shell.type("go")
    shell.keys("Enter")
    shell.wait_for(r"Approve\? \[y\]es")
    shell.type("y")
    shell.keys("Enter")
    screen = shell.wait_for(r"plain done")
    assert "from-the-tool" in screen
    shell.keys("C-d")
    shell.wait_for("^EXIT=0$")


def test_model_lists_and_switches_keeping_the_conversation(tmux_shell: Shell):
    shell = tmux_shell("text: from the first model")
    models = scripted_config(shell.sandbox.root / "scripts.json")["models"]
    shell.sandbox.config_extra = {"models": {**models, "other": models["scripted"]}}
    shell.start()
    shell.ready()
    shell.type("hello")
    shell.keys("Enter")
    shell.wait_for(r"from the first model")
    shell.type("/model")
    shell.keys("Enter")
    screen = shell.wait_for(r"/model NAME switches")
    assert "❯ scripted" in screen and "  other" in screen
    shell.sandbox.scripts = ["text: from the other model"]
    shell.sandbox.write()
    shell.type("/model other")
    shell.keys("Enter")
    shell.wait_for(r"Model: other")
    shell.wait_for(r"other \(scripted_echo\)")
    shell.type("still there?")
    shell.keys("Enter")
    shell.wait_for(r"from the other model")
    assert user_inputs(shell.sandbox.share) == ["hello", "still there?"]  # one session throughout


def test_shift_tab_turns_plan_mode_on_and_ctrl_c_clears_a_typed_line(tmux_shell: Shell):
    shell = tmux_shell()
    shell.start()
    shell.ready()
    shell.keys("BTab")  # Shift-Tab
    shell.wait_for(r"Plan mode is on")
    shell.wait_for(r"PLAN")
    shell.type("something I changed my mind about")
    shell.wait_for(r"❯ something I changed my mind about")
    shell.keys("C-c")
    shell.wait_until(lambda screen: "changed my mind" not in screen, "the input cleared")
    assert "Ctrl-C again" not in shell.screen()  # clearing is not a step towards exiting
    shell.keys("C-d")
    shell.wait_for("^EXIT=0$")
    shell.start("--continue")
    shell.wait_for(r"PLAN")  # kept with the session


def test_ctrl_c_during_an_approval_rejects_and_interrupts(tmux_shell: Shell):
    shell = tmux_shell(tool_call("c1", "Shell", command="touch not_created"), "text: later")
    shell.start()
    shell.ready()
    shell.type("try")
    shell.keys("Enter")
    shell.wait_for(r"Approve once")
    shell.keys("C-c")
    shell.wait_for(r"Turn interrupted")
    assert not (shell.sandbox.work / "not_created").exists()
    shell.type("next")
    shell.keys("Enter")
    shell.wait_for(r"^later\s*$")


def test_a_multi_select_question_takes_several_answers_and_other_takes_text(tmux_shell: Shell):
    questions = [
        {
            "question": "Which parts?",
            "options": [{"label": "Parser"}, {"label": "Lexer"}, {"label": "Printer"}],
            "multi_select": True,
        },
        {"question": "Anything else?", "options": [{"label": "No"}, {"label": "Later"}]},
    ]
    shell = tmux_shell(tool_call("q1", "AskUserQuestion", questions=questions), "text: thanks")
    shell.start()
    shell.ready()
    shell.type("ask")
    shell.keys("Enter")
    shell.wait_for(r"Which parts\?")
    shell.keys("Space", "Down", "Down", "Space")
    shell.wait_for(r"\[x\] Printer")
    shell.keys("Enter")
    shell.wait_for(r"Anything else\?")
    shell.keys("3")  # Other
    shell.wait_for(r"Your answer:")
    shell.type("the docs too")
    shell.keys("Enter")
    shell.wait_for(r"^thanks\s*$")
    results = [m["payload"] for m in wire_records(shell.sandbox.share) if m["type"] == "ToolResult"]
    value = json.dumps(results[0]["return_value"])
    assert "Parser, Printer" in value and "the docs too" in value


def test_a_message_sent_before_the_engine_has_loaded_waits_for_it(tmux_shell: Shell):
    shell = tmux_shell("text: answered the early message")
    shell.start()
    shell.type("early message")
    shell.wait_for(r"❯ early message")  # the input line is there; the engine usually is not yet
    shell.keys("Enter")
    shell.wait_for(r"answered the early message")
    assert user_inputs(shell.sandbox.share) == ["early message"]


def test_plan_mode_shows_the_plan_and_approving_it_leaves_plan_mode(tmux_shell: Shell):
    shell = tmux_shell()
    plan_file = shell.sandbox.share / "plans" / "planned-1.md"
    shell.sandbox.scripts = [
        tool_call("w1", "WriteFile", path=str(plan_file), content="# The plan\n\nStep one: build it.\n"),
        tool_call("x1", "ExitPlanMode"),
        "text: carrying out the plan",
    ]
    shell.start("--plan", "--session", "planned-1")
    shell.wait_for(r"PLAN")
    shell.type("plan the work")
    shell.keys("Enter")
    screen = shell.wait_for(r"Approve")
    assert "Step one: build it." in screen and "The plan" in screen  # the plan, shown
    shell.keys("1")
    shell.wait_for(r"carrying out the plan")
    shell.wait_until(lambda screen: "PLAN" not in screen, "plan mode off in the status line")


def test_skills_are_in_the_command_list_and_complete_with_tab(tmux_shell: Shell):
    shell = tmux_shell()
    skill = shell.sandbox.work / ".agents" / "skills" / "tidy-imports" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: tidy-imports\ndescription: Tidy the imports\n---\nSort them.\n")
    shell.start()
    shell.ready()
    shell.type("/skill:tid")
    shell.wait_for(r"❯ /skill:tid")
    shell.keys("Tab")
    shell.wait_for(r"❯ /skill:tidy-imports")
    shell.keys("C-u")
    shell.type("/help")
    shell.keys("Enter")
    shell.wait_for(r"/skill:tidy-imports")


def test_leaving_names_the_background_tasks_it_stops_or_leaves_running(tmux_shell: Shell):
    """Ctrl-D with a background command still at work: the shell says which tasks end with
    the session (they are stopped), or, with `[background] keep_alive_on_exit`, which it leaves
    running and where their output goes (they go on)."""
    for keep_alive, marker in ((False, "sleep 4331"), (True, "sleep 4332")):
        shell = tmux_shell(
            tool_call("b1", "Shell", command=marker, run_in_background=True, description="dev server"),
            "text: it runs in the background",
            background={"keep_alive_on_exit": keep_alive},
        )
        shell.start("--yolo")
        shell.ready()
        shell.type("start the server")
        shell.keys("Enter")
        shell.wait_for(r"it runs in the background")
        wait_for_file(lambda m=marker: _running(m), "the background command running")
        shell.wait_until(lambda s: "Working" not in s, "the turn's end")
        shell.keys("C-d")
        screen = shell.wait_for(r"^EXIT=0$")
        if keep_alive:
            assert "Left 1 background task running ([background] keep_alive_on_exit):" in screen
            assert f"dev server  (output: {shell.sandbox.share}" in screen.replace("\n", "")
            try:
                assert _running(marker), "keep_alive_on_exit: the command must outlive the shell"
            finally:
                subprocess.run(["pkill", "-f", marker], check=False)
        else:
            assert "Stopping 1 background task as the session ends:" in screen
            assert "  dev server" in screen.split("as the session ends:")[1]
            wait_for_file(lambda m=marker: not _running(m), "the command stopped", timeout=5)


def _editor_script(path: Path, text: str) -> Path:
    """An 'editor' that appends `text` and the arguments it was given before the file to it."""
    path.write_text(f'#!/bin/sh\nfor last; do :; done\nprintf "%s" " {text} ($*)" >> "$last"\n')
    path.chmod(0o755)
    return path


def test_ctrl_x_ctrl_e_composes_in_the_external_editor_and_default_editor_wins(
    tmux_shell: Shell, tmp_path: Path
):
    """Ctrl-X Ctrl-E opens the message in `$EDITOR`; `default_editor` (a reference key, a
    command line) is used instead when it is set."""
    env_editor = _editor_script(tmp_path / "env-editor", "from EDITOR")
    configured = _editor_script(tmp_path / "configured-editor", "from default_editor")
    for config in ({}, {"default_editor": f"{configured} --wait"}):
        shell = tmux_shell("text: received", **config)
        shell.start(env={"EDITOR": str(env_editor)})
        shell.ready()
        shell.type("draft")
        shell.keys("C-x", "C-e")
        shell.wait_for(r"draft from default_editor \(--wait " if config else r"draft from EDITOR \(")
        shell.keys("Enter")
        shell.wait_for(r"^received\s*$")
        shell.wait_until(lambda s: "Working" not in s, "the turn's end")
        shell.keys("C-d")
        shell.wait_for(r"^EXIT=0$")
    sent = sorted(user_inputs(shell.sandbox.share))  # (both sessions: the one share dir of tmp_path)
    assert [text.split(" (")[0] for text in sent] == ["draft from EDITOR", "draft from default_editor"]
    assert sent[1].startswith("draft from default_editor (--wait /")  # its arguments, then the file


def test_show_thinking_stream_false_shows_one_line_instead_of_the_thinking(tmux_shell: Shell):
    """`show_thinking_stream = false` (a reference key): the thinking's text is not shown, one
    line says how long the model thought; the answer is shown as always."""
    shell = tmux_shell("think: a secret line of reasoning\ntext: The answer.", show_thinking_stream=False)
    shell.start()
    shell.ready()
    shell.type("hi")
    shell.keys("Enter")
    screen = shell.wait_for(r"The answer\.")
    assert re.search(r"∴ Thought for \d+\.\ds \(\d+ characters\)", screen), screen
    assert "secret line of reasoning" not in screen and "∴ Thinking" not in screen
    assert "secret line of reasoning" in json.dumps(wire_records(shell.sandbox.share))  # still recorded
    shell.wait_until(lambda s: "Working" not in s, "the turn's end")
    shell.keys("C-d")
    shell.wait_for("^EXIT=0$")
    shell.start("--continue")  # the earlier turn shown again: the same line, without a duration
    screen = shell.wait_for(r"end of the earlier conversation")
    assert re.search(r"∴ Thought \(\d+ characters\)", screen) and "secret line" not in screen


def test_the_status_line_shows_the_budget_and_budget_raises_it_to_continue(tmux_shell: Shell):
    usage = '\nusage: {"input_other": 600, "output": 0}'
    shell = tmux_shell(
        tool_call("c1", "Shell", command="echo one") + usage,
        tool_call("c2", "Shell", command="echo two") + usage,
        "text: all done" + usage,
        budgets={"tree": {"tokens": 1000}},
    )
    shell.start("--yolo")
    assert "tree tokens 0 of 1,000" in shell.ready()
    shell.type("go")
    shell.keys("Enter")
    shell.wait_for(r"Stopped: the tree tokens limit \(1,000\) is reached\. Raise it with /budget")
    shell.wait_for(r"tree tokens 600 of 1,000")
    shell.type("/budget tree tokens 5000")
    shell.keys("Enter")
    shell.wait_for(r"tree tokens: 600 of 5,000 \(4,400 left\)")
    shell.type("continue")
    shell.keys("Enter")
    shell.wait_for(r"^all done")
    shell.wait_for(r"tree tokens 1,800 of 5,000")


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("kind", KINDS)
def test_each_limit_at_each_scope_stops_and_budget_raises_it_to_continue(tmux_shell: Shell, kind, scope):
    """Each limit at each scope (tests/budget_cases.py), set by the config: the prompt stops
    after its first command with the note naming the limit, the status line shows it, `/budget`
    raises it and "continue" goes on; a session or tree total is still spent after a restart
    with --continue (the config's limit is back, the raise was for that run)."""
    shell = tmux_shell(*scripts(kind), budgets={scope: {kind: limit_value(kind)}}, prices=PRICES)
    shell.start("--yolo")
    label = f"{scope} {command_name(kind).replace('_', ' ')} "
    assert label in shell.ready()
    shell.type("go")
    shell.keys("Enter")
    shell.wait_for(
        re.escape("Stopped: " + limit_text(scope, kind)) + r".*\) is reached\. Raise it with /budget"
    )
    shell.type(budget_prompt(scope, kind, RAISED[kind]))
    shell.keys("Enter")
    shell.wait_for(rf"{scope} {kind}: .* of .* left\)")
    shell.type("continue")
    shell.keys("Enter")
    shell.wait_for(r"^continued")
    if scope == "turn":
        return
    shell.keys("C-d")
    shell.wait_for(r"^EXIT=0$")
    shell.start("--yolo", "--continue")
    screen = shell.ready()
    spent = re.search(re.escape(label) + r"\$?([\d,.]+)s? of", screen)
    assert spent is not None and float(spent.group(1).replace(",", "")) > 0, screen


def test_a_subagent_tree_that_reaches_the_trees_limit_is_stopped(tmux_shell: Shell):
    """Two sub-agents that together reach the tree's token limit: the turn stops with the note,
    the status line shows the tree's spend (theirs and the parent's)."""
    shell = tmux_shell(*subagent_tree_scripts(), budgets={"tree": {"tokens": TREE_TOKENS}})
    shell.start("--yolo")
    shell.ready()
    shell.type("go")
    shell.keys("Enter")
    shell.wait_for(r"Stopped: the tree tokens limit \(2,000\) is reached")
    shell.wait_for(r"tree tokens 2,100 of 2,000")
