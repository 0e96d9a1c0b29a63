"""Command-line flags, compatible with `kimi` (spec §8.1). Usage errors exit with code 2."""

from __future__ import annotations

import argparse
from pathlib import Path

from soulwire.cli.budget_flags import add_budget_flags
from soulwire.session_flags import (
    add_config_flags,
    add_max_steps_flag,
    add_sandbox_flags,
    add_thinking_flags,
    add_work_dir_flag,
    add_yolo_flag,
    int_at_least,
)
from soulwire.usage import CommandParser, UsageError
from soulwire.wire.session_settings import APPROVAL_MODES

__all__ = ["UsageError", "build_parser", "parse_main"]

EXAMPLES = (
    "soulwire                                  # the interactive terminal UI in this directory",
    "soulwire --continue                       # pick up the last session of this directory",
    "soulwire --print -p 'explain this repo'   # one prompt, the answer on stdout",
    "soulwire --wire --work-dir ~/src/app      # the Wire protocol on stdin/stdout (for clients)",
    "soulwire acp                              # an Agent Client Protocol agent (for editors)",
    "soulwire doctor                           # what works here, and how to fix what does not",
)
COMMANDS_HELP = """commands (each has --help):
  acp          Agent Client Protocol agent for editors
  sessions     list, show, delete or export the sessions of a work dir
  serve        host many sessions: Wire over WebSocket and an HTTP API
  fleet        run many sessions as tasks from a JSON-lines file
  doctor       check the configuration, keys, sandbox, session store and tools
  login        sign in to Kimi Code, or set up another provider's key and model
  logout       forget the Kimi Code login
  mcp          add, remove, list, test and authorize MCP servers (mcp.json)
  plugin       install, list, inspect or remove plugins
  export       write a session as a ZIP file
  import       unpack a session ZIP into a work dir
  completion   shell completion for bash, zsh or fish
  info         versions, for clients that check compatibility
  schema       the JSON Schema of every Wire message
  demo         the offline end-to-end demo

slash commands in a prompt: /init, /compact, /clear, /yolo, /plan, /skill:<name> [request],
/flow:<name> (skills: SKILL.md folders in .agents/skills, .kimi/skills, … and ~/.soulwire/skills)

docs: docs/ in the source tree, or `mkdocs serve` there"""


def _commands() -> list[str]:
    from soulwire.cli import SUBCOMMANDS

    return ["acp", *(name for name in SUBCOMMANDS if not name.startswith("_"))]


def build_parser() -> CommandParser:
    parser = CommandParser(
        prog="soulwire",
        description=(
            "A coding-agent engine. Modes: the interactive shell (no mode flag),\n"
            "--wire (JSON-RPC over stdio), acp (Agent Client Protocol), --print (one-shot)."
        ),
        examples=EXAMPLES,
        epilog=COMMANDS_HELP,
        commands=_commands(),
    )
    add = parser.add_argument
    add("--version", "-V", action="store_true", help="print the version and exit")
    add("--verbose", action="store_true", help="print what the session is made of on stderr")
    add("--debug", action="store_true", help="debug logging to the log file; tracebacks on errors")
    add_work_dir_flag(parser)
    add(
        "--add-dir",
        action="append",
        default=[],
        metavar="PATH",
        help="extra workspace directory (repeatable)",
    )
    session = parser.add_mutually_exclusive_group()
    session.add_argument(
        "--session",
        "--resume",
        "-S",
        "-r",
        nargs="?",
        const="",
        metavar="ID",
        help="resume or create session ID",
    )
    session.add_argument(
        "--continue", "-C", dest="continue_last", action="store_true", help="continue the last session"
    )
    add_config_flags(parser)
    add_thinking_flags(parser)
    add_yolo_flag(parser)
    add_sandbox_flags(parser)
    add(
        "--approval",
        choices=APPROVAL_MODES,
        help="on-escape: with a sandbox, ask only for actions that leave it",
    )
    add("--afk", action="store_true", help="nobody is watching: auto-approve and dismiss questions")
    add("--plan", action="store_true", help="start in plan mode")
    checkpoints = parser.add_mutually_exclusive_group()
    checkpoints.add_argument(
        "--checkpoints", dest="checkpoints", action="store_const", const=True, default=None,
        help="checkpoint the work dir at every turn and writing step (default: config [checkpoints])",
    )  # fmt: skip
    checkpoints.add_argument(
        "--no-checkpoints", dest="checkpoints", action="store_const", const=False, help="no checkpoints"
    )
    add("--prompt", "-p", "--command", "-c", dest="prompt", metavar="TEXT", help="prompt (print mode)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--print", dest="print_mode", action="store_true", help="run one prompt and print the answer"
    )
    mode.add_argument("--wire", action="store_true", help="serve the Wire protocol on stdin/stdout")
    mode.add_argument(
        "--acp", action="store_true", help="serve the Agent Client Protocol (also: soulwire acp)"
    )
    add("--quiet", action="store_true", help="--print --output-format text --final-message-only")
    add(
        "--input-format",
        choices=["text", "stream-json"],
        help='print mode input: text (-p or all of stdin), or stream-json ({"role": "user", "content": …} '
        "a line, one turn each)",
    )
    add(
        "--output-format",
        choices=["text", "stream-json", "json"],
        help="print mode output: text, stream-json (a JSON message a line), or json (one document at "
        "the end: final message, usage, cost, session id, exit reason)",
    )
    add("--final-message-only", action="store_true", help="print mode: only the last assistant message")
    agent = parser.add_mutually_exclusive_group()
    agent.add_argument(
        "--agent",
        choices=["default", "okabe"],
        help="built-in agent: default, or okabe (adds SendDMail, which rewinds the context to a checkpoint)",
    )
    agent.add_argument(
        "--agent-file",
        metavar="PATH",
        help="agent file (kimi's YAML: system_prompt_path/args, tools, exclude_tools, subagents, extend)",
    )
    add(
        "--mcp-config-file", action="append", default=[], metavar="PATH", help="MCP servers file (repeatable)"
    )
    add("--mcp-config", action="append", default=[], metavar="JSON", help="MCP servers as JSON (repeatable)")
    add(
        "--skills-dir",
        action="append",
        default=[],
        metavar="PATH",
        help="skills directory (repeatable); replaces the project and user skill directories",
    )
    add_max_steps_flag(parser)
    add("--max-retries-per-step", type=int_at_least(1), metavar="N", help="attempts of one model call")
    add(
        "--max-ralph-iterations",
        type=int_at_least(-1),
        metavar="N",
        help="Ralph mode: feed each prompt again up to N more times until the model says STOP (-1: no limit)",
    )
    add_budget_flags(add)
    return parser


def parse_main(argv: list[str]) -> argparse.Namespace:
    """Parse the main command's flags; a mistake raises UsageError (one line, exit 2)."""
    args = build_parser().parse_or_raise(argv)
    if args.quiet:
        if args.wire or args.acp:
            raise UsageError("--quiet cannot be combined with --wire/--acp")
        args.print_mode = True
        args.output_format = args.output_format or "text"
        args.final_message_only = True
    if not args.print_mode and (args.input_format or args.output_format or args.final_message_only):
        raise UsageError("--input-format, --output-format and --final-message-only need --print")
    if args.session == "" and (args.print_mode or args.wire or args.acp):
        raise UsageError("--session needs an ID outside the interactive shell")
    _check_paths(args)
    return args


def _check_paths(args: argparse.Namespace) -> None:
    """Paths named on the command line must exist: a typo is caught here, not ignored."""
    if args.agent_file and not Path(args.agent_file).expanduser().is_file():
        raise UsageError(f"--agent-file {args.agent_file}: no such file", point_to_help=False)
    for flag, dirs in (("--add-dir", args.add_dir), ("--skills-dir", args.skills_dir)):
        for name in dirs:
            if not Path(name).expanduser().is_dir():
                raise UsageError(f"{flag} {name}: no such directory", point_to_help=False)
