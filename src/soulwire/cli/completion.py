"""`soulwire completion bash|zsh|fish`: a completion script for the shell, generated from the
argument parser (so it never drifts from the flags), and the hidden `soulwire __complete KIND`
that the scripts call for what changes: session ids of the current work dir, model aliases,
each subcommand's flags. `__complete` reads directories and the config file only (no engine)."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
from pathlib import Path

SHELLS = ("bash", "zsh", "fish")
SESSION_FLAGS = ("--session", "--resume", "-S", "-r")
MODEL_FLAGS = ("--model", "-m")
DIR_FLAGS = ("--work-dir", "-w", "--add-dir", "--skills-dir", "--run-dir")
FILE_FLAGS = ("--config-file", "--agent-file", "--mcp-config-file", "--token-file", "--out", "-o", "--output")
SESSION_COMMANDS = ("show", "delete", "export")  # `soulwire sessions show ID`


def subcommands() -> list[str]:
    from soulwire.cli import SUBCOMMANDS

    return ["acp", *(name for name in SUBCOMMANDS if not name.startswith("_"))]


def _main_parser() -> argparse.ArgumentParser:
    from soulwire.cli.args import build_parser

    return build_parser()


def _choices(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Each option that takes one of a fixed set of values → those values."""
    found: dict[str, list[str]] = {}
    for action in parser._actions:
        if action.choices and action.option_strings:
            for flag in action.option_strings:
                found[flag] = [str(c) for c in action.choices]
    return found


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return [flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")]


def _bash(parser: argparse.ArgumentParser) -> str:
    choices = "\n".join(
        f"        {flag}) COMPREPLY=($(IFS=' '; compgen -W '{' '.join(values)}' -- \"$cur\")); return ;;"
        for flag, values in _choices(parser).items()
    )
    return f"""# soulwire completion for bash: eval "$(soulwire completion bash)" in ~/.bashrc
_soulwire_list() {{  # the words `soulwire __complete ARGS` prints that start with $cur
    compgen -W "$(soulwire __complete "$@" 2>/dev/null)" -- "$cur"
}}
_soulwire() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" sub="${{COMP_WORDS[1]}}"
    local IFS=$'\\n'
    case "$prev" in
        {"|".join(SESSION_FLAGS)}) COMPREPLY=($(_soulwire_list sessions)); return ;;
        {"|".join(MODEL_FLAGS)}) COMPREPLY=($(_soulwire_list models)); return ;;
        {"|".join(DIR_FLAGS)}) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        {"|".join(FILE_FLAGS)}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
{choices}
    esac
    if [[ "$COMP_CWORD" -eq 1 && "$cur" != -* ]]; then
        COMPREPLY=($(_soulwire_list commands)); return
    fi
    if [[ "$sub" == sessions && " {" ".join(SESSION_COMMANDS)} " == *" $prev "* ]]; then
        COMPREPLY=($(_soulwire_list sessions)); return
    fi
    if [[ "$sub" == sessions && "$COMP_CWORD" -eq 2 && "$cur" != -* ]]; then
        COMPREPLY=($(compgen -W "list show delete export" -- "$cur")); return
    fi
    if [[ "$cur" == -* ]]; then
        [[ "$sub" == -* || "$COMP_CWORD" -eq 1 ]] && sub=""
        COMPREPLY=($(_soulwire_list flags $sub)); return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}}
complete -o filenames -F _soulwire soulwire
"""


def _zsh(parser: argparse.ArgumentParser) -> str:
    choices = "\n".join(
        f"        {flag}) compadd -- {' '.join(values)}; return ;;"
        for flag, values in _choices(parser).items()
    )
    return f"""#compdef soulwire
# soulwire completion for zsh: eval "$(soulwire completion zsh)" in ~/.zshrc (after compinit)
_soulwire_add() {{  # offer the words `soulwire __complete ARGS` prints
    local -a items
    items=(${{(f)"$(soulwire __complete "$@" 2>/dev/null)"}})
    compadd -a items
}}
_soulwire() {{
    local cur="${{words[CURRENT]}}" prev="${{words[CURRENT-1]}}" sub="${{words[2]}}"
    case "$prev" in
        {"|".join(SESSION_FLAGS)}) _soulwire_add sessions; return ;;
        {"|".join(MODEL_FLAGS)}) _soulwire_add models; return ;;
        {"|".join(DIR_FLAGS)}) _files -/; return ;;
        {"|".join(FILE_FLAGS)}) _files; return ;;
{choices}
    esac
    if (( CURRENT == 2 )) && [[ "$cur" != -* ]]; then
        _soulwire_add commands; return
    fi
    if [[ "$sub" == sessions && "$prev" == ({"|".join(SESSION_COMMANDS)}) ]]; then
        _soulwire_add sessions; return
    fi
    if [[ "$sub" == sessions ]] && (( CURRENT == 3 )) && [[ "$cur" != -* ]]; then
        compadd -- list show delete export; return
    fi
    if [[ "$cur" == -* ]]; then
        [[ "$sub" == -* ]] && sub=""
        _soulwire_add flags $sub; return
    fi
    _files
}}
compdef _soulwire soulwire
"""


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish(parser: argparse.ArgumentParser) -> str:
    lines = [
        "# soulwire completion for fish: soulwire completion fish > ~/.config/fish/completions/soulwire.fish",
        "complete -c soulwire -f",
        "complete -c soulwire -n __fish_use_subcommand -a '(soulwire __complete commands 2>/dev/null)'",
        "complete -c soulwire -n '__fish_seen_subcommand_from sessions; and not __fish_seen_subcommand_from "
        "list show delete export' -a 'list show delete export'",
        "complete -c soulwire -n '__fish_seen_subcommand_from show delete export' "
        "-a '(soulwire __complete sessions 2>/dev/null)'",
    ]
    choices = _choices(parser)
    for action in parser._actions:
        longs = [f.removeprefix("--") for f in action.option_strings if f.startswith("--")]
        shorts = [f.removeprefix("-") for f in action.option_strings if len(f) == 2]
        if not longs:
            continue
        parts = ["complete -c soulwire -n __fish_use_subcommand"]
        parts += [f"-l {name}" for name in longs] + [f"-s {name}" for name in shorts]
        flag = action.option_strings[0]
        if set(action.option_strings) & set(SESSION_FLAGS):
            parts.append("-x -a '(soulwire __complete sessions 2>/dev/null)'")
        elif set(action.option_strings) & set(MODEL_FLAGS):
            parts.append("-x -a '(soulwire __complete models 2>/dev/null)'")
        elif set(action.option_strings) & set(DIR_FLAGS):
            parts.append("-x -a '(__fish_complete_directories)'")
        elif set(action.option_strings) & set(FILE_FLAGS):
            parts.append("-r -F")
        elif flag in choices:
            parts.append(f"-x -a {_fish_quote(' '.join(choices[flag]))}")
        elif action.nargs != 0:
            parts.append("-r")
        if action.help and action.help != argparse.SUPPRESS:
            parts.append(f"-d {_fish_quote(action.help)}")
        lines.append(" ".join(parts))
    lines.append(
        "complete -c soulwire "
        "-n 'not __fish_use_subcommand; and string match -q -- \"-*\" (commandline -ct)' "
        "-a '(soulwire __complete flags (commandline -opc)[2] 2>/dev/null)'"
    )
    return "\n".join(lines) + "\n"


def script(shell: str) -> str:
    """The completion script of `shell` (bash, zsh or fish)."""
    parser = _main_parser()
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](parser)


def run_completion(argv: list[str]) -> int:
    from soulwire.usage import CommandParser

    parser = CommandParser(
        prog="soulwire completion",
        description="Print a completion script (flags, subcommands, session ids, model names).",
        examples=(
            'eval "$(soulwire completion bash)"                      # in ~/.bashrc',
            'eval "$(soulwire completion zsh)"                       # in ~/.zshrc, after compinit',
            "soulwire completion fish > ~/.config/fish/completions/soulwire.fish",
        ),
    )
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    args = parser.parse_args(argv)
    sys.stdout.write(script(args.shell))
    return 0


# --- the hidden, fast `soulwire __complete KIND` ---------------------------------------------


def session_ids(share: Path, work_dir: Path) -> list[str]:
    """Session ids of `work_dir`, most recently used first (directory listing only)."""
    from soulwire.sessions.paths import sessions_root

    root = sessions_root(share, work_dir)
    try:
        entries = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return [p.name for p in entries]


def model_names(share: Path, config_file: str | None = None) -> list[str]:
    """Model aliases of the configuration, then the model an API key alone would use."""
    from soulwire.config.loader import ConfigError, load_raw_config

    names: list[str] = []
    try:
        raw, _ = load_raw_config(config_file=config_file, config_text=None, share=share)
    except ConfigError:
        raw = {}
    models = raw.get("models")
    if isinstance(models, dict):
        names.extend(str(alias) for alias in models)
    from soulwire.llm.env import ENV_DEFAULTS, env_provider_type

    kind = env_provider_type(os.environ)
    if kind is not None and kind in ENV_DEFAULTS and ENV_DEFAULTS[kind].model not in names:
        names.append(ENV_DEFAULTS[kind].model)
    return names


def command_flags(command: str | None) -> list[str]:
    """The long flags of `soulwire COMMAND` (or of `soulwire`), read from its own --help."""
    if not command or command.startswith("-"):
        return _flags(_main_parser())
    if command not in subcommands():
        return []
    from soulwire.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main([command, "--help"] if command != "acp" else ["--help"])
        except SystemExit:
            pass
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", out.getvalue())))


def run_complete(argv: list[str]) -> int:
    from soulwire.config.loader import share_dir

    kind, rest = (argv[0], argv[1:]) if argv else ("", [])
    share = share_dir()
    if kind == "sessions":
        work_dir = Path(rest[0]) if rest else Path.cwd()
        words = session_ids(share, work_dir)
    elif kind == "models":
        words = model_names(share)
    elif kind == "commands":
        words = subcommands()
    elif kind == "flags":
        words = command_flags(rest[0] if rest else None)
    else:
        sys.stderr.write("soulwire __complete: error: KIND is sessions, models, commands or flags\n")
        return 2
    sys.stdout.write("".join(f"{word}\n" for word in words))
    return 0
