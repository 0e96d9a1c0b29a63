"""The flags that set up a session, shared by `soulwire` (`--wire`, `--print`, the shell, `acp`)
and `soulwire serve` (its sessions' defaults): one declaration, so the two commands cannot
drift apart in spelling, choices or checks. Outside the layers, like `soulwire.usage`: both
the CLI and the server import it; it imports nothing of Soulwire but the Wire's literals."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from soulwire.wire.session_settings import OVERLAY_MODES, SANDBOX_MODES


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number no smaller than `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be ≥ {minimum}, got {value}")
        return value

    return parse


def add_work_dir_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--work-dir", "-w", metavar="PATH", help="working directory (default: current directory)"
    )


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """`--config TEXT` or `--config-file PATH` (one of them), and `--model`."""
    config = parser.add_mutually_exclusive_group()
    config.add_argument("--config", metavar="TEXT", help="whole configuration as JSON or TOML text")
    config.add_argument("--config-file", metavar="PATH", help="configuration file (.json or TOML)")
    parser.add_argument("--model", "-m", metavar="NAME", help="model alias from [models]")


def add_thinking_flags(parser: argparse.ArgumentParser) -> None:
    thinking = parser.add_mutually_exclusive_group()
    thinking.add_argument(
        "--thinking", dest="thinking", action="store_const", const=True, default=None,
        help="let the model think before it answers (default: config default_thinking)",
    )  # fmt: skip
    thinking.add_argument(
        "--no-thinking", dest="thinking", action="store_const", const=False, help="no thinking"
    )


def add_yolo_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--yolo", "--yes", "-y", "--auto-approve", dest="yolo", action="store_true",
        help="auto-approve tool actions",
    )  # fmt: skip


def add_sandbox_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        help="run Shell commands and file tools in a sandbox (bubblewrap; default: config, else off)",
    )
    parser.add_argument(
        "--sandbox-network", choices=["on", "off"], help="network inside the sandbox (default off)"
    )
    parser.add_argument(
        "--overlay",
        choices=OVERLAY_MODES,
        help="with --sandbox: each turn's writes go to an overlay, then commit, discard, or ask",
    )


def add_max_steps_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-steps-per-turn", type=int_at_least(1), metavar="N", help="steps one turn may take"
    )


__all__ = [
    "add_config_flags",
    "add_max_steps_flag",
    "add_sandbox_flags",
    "add_thinking_flags",
    "add_work_dir_flag",
    "add_yolo_flag",
    "int_at_least",
]
