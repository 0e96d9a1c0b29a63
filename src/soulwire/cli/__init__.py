"""Command line: argv → options → the chosen front end (imported lazily)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulwire import __version__

if TYPE_CHECKING:
    from soulwire.runtime.options import SessionOptions

SUBCOMMANDS = ("info", "schema", "demo", "sessions", "doctor", "serve", "fleet")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `soulwire` command; returns the exit code (130 after Ctrl-C, without
    a traceback: the front ends end their work cleanly first where they can)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "acp":  # `soulwire acp [flags]`, the form editors are configured with
        argv = ["--acp", *argv[1:]]
    if argv and argv[0] in SUBCOMMANDS:
        return _subcommand(argv[0], argv[1:])
    from soulwire.cli.args import UsageError, parse_main
    from soulwire.config.loader import ConfigError

    try:
        args = parse_main(argv)
        if args.version:
            print(f"soulwire, version {__version__}")
            return 0
        options = _session_options(args)
    except UsageError as exc:
        sys.stderr.write(f"soulwire: error: {exc}\nTry 'soulwire --help' for help.\n")
        return 2
    except ConfigError as exc:  # one line: what is wrong and where
        sys.stderr.write(f"soulwire: error: {exc}\n")
        return 2
    problem = _sandbox_problem(options)
    if problem is not None:
        sys.stderr.write(f"soulwire: {problem}\n")
        return 2
    from soulwire.config.process_env import tune_startup

    tune_startup()
    if args.wire:
        if args.prompt:
            sys.stderr.write("soulwire: --prompt is ignored in --wire mode\n")
        from soulwire.ui.wire.launch import serve_wire

        return serve_wire(options, extended=_extended_wire)
    if args.print_mode:
        from soulwire.config.process_env import import_pydantic_plugin_loader

        import_pydantic_plugin_loader()
        from soulwire.ui.print.app import run_print

        return run_print(
            options,
            prompt=args.prompt,
            input_format=args.input_format or "text",
            output_format=args.output_format or "text",
            final_message_only=args.final_message_only,
        )
    if args.acp:
        from soulwire.ui.acp.launch import serve_acp

        return serve_acp(options)
    from soulwire.ui.shell import run_shell

    return run_shell(options, prompt=args.prompt)


def _session_options(a: argparse.Namespace) -> SessionOptions:
    from soulwire.config.loader import ConfigError, load_raw_config, share_dir
    from soulwire.config.precheck import check_raw_config
    from soulwire.runtime.options import SessionOptions

    work_dir = Path(a.work_dir or os.getcwd()).expanduser()
    if not work_dir.is_dir():
        raise ConfigError(f"--work-dir does not exist or is not a directory: {work_dir}")
    work_dir = Path(os.path.abspath(work_dir))
    share = share_dir()
    raw, path = load_raw_config(config_file=a.config_file, config_text=a.config, share=share)
    check_raw_config(raw, origin=str(path) if path else "--config", model_alias=a.model)
    mcp_files = [Path(p) for p in a.mcp_config_file]
    if mcp_files or a.mcp_config or (share / "mcp.json").is_file():  # else no import at all
        from soulwire.tools.mcp_config import load_mcp_servers

        load_mcp_servers(mcp_files, list(a.mcp_config), share)  # refused here, before any reply
    return SessionOptions(
        work_dir=work_dir,
        share_dir=share,
        raw_config=raw,
        config_path=path,
        model_alias=a.model,
        thinking=a.thinking,
        yolo=a.yolo,
        afk=a.afk,
        plan=a.plan,
        session_id=a.session if a.session == "" else (a.session or None),  # "": the shell asks
        continue_last=a.continue_last,
        max_steps_per_turn=a.max_steps_per_turn,
        max_retries_per_step=a.max_retries_per_step,
        max_ralph_iterations=a.max_ralph_iterations,
        agent_file=Path(a.agent_file) if a.agent_file else None,
        skills_dirs=[Path(p) for p in a.skills_dir],
        add_dirs=[Path(p) for p in a.add_dir],
        mcp_config_files=mcp_files,
        mcp_configs=list(a.mcp_config),
        print_mode=a.print_mode,
        sandbox=a.sandbox,
        sandbox_network=None if a.sandbox_network is None else a.sandbox_network == "on",
        approval=a.approval,
    )


def _sandbox_problem(options: SessionOptions) -> str | None:
    """Why the sandbox the command line or config asks for cannot run here (one line), or
    None. Checked before anything starts: a sandboxed session never runs unconfined."""
    mode = options.sandbox or options.raw_config.get("sandbox")
    if mode not in ("read-only", "workspace-write"):
        return None  # off, or a bad config value that the config's validation reports
    from soulwire.tools.sandbox import bubblewrap_problem

    problem = bubblewrap_problem()
    return None if problem is None else f"cannot start with --sandbox {mode}: {problem}"


def _subcommand(name: str, argv: list[str]) -> int:
    if name == "info":
        from soulwire.cli.info import run_info

        return run_info(argv)
    if name == "schema":
        from soulwire.cli.schema import run_schema

        return run_schema(argv)
    if name == "doctor":
        from soulwire.cli.doctor import run_doctor

        return run_doctor(argv)
    if name == "fleet":
        from soulwire.cli.fleet import run_fleet_command

        return run_fleet_command(argv)
    if name == "demo":
        from soulwire.cli.demo import run_demo

        return run_demo(argv)
    if name == "serve":
        from soulwire.server.main import run_serve

        return run_serve(argv)
    from soulwire.cli.sessions import run_sessions

    return run_sessions(argv)


def _extended_wire(runtime: Any, reader: Any) -> int:
    """`--wire` for a client that negotiated the server's extensions (server/stdio.py)."""
    from soulwire.server.stdio import run_extended

    return run_extended(runtime, reader)
