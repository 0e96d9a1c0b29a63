"""Command line: argv → options → the chosen front end (imported lazily)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulwire import __version__
from soulwire.usage import EXIT_USAGE, UsageError

if TYPE_CHECKING:
    from soulwire.runtime.options import SessionOptions

SUBCOMMANDS = (
    "info", "schema", "demo", "sessions", "doctor", "serve", "fleet", "web", "vis",
    "login", "logout", "mcp", "export", "import", "plugin", "completion", "__complete",
)  # fmt: skip
"""Dispatched by `_subcommand` (each imported there, at first use, where import-linter sees it)."""
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a C program killed by it reports
NOT_PROVIDED = {
    "term": "kimi's Toad front end has no counterpart; use the terminal UI (`soulwire`) or `soulwire acp`",
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `soulwire` command; returns the exit code. A person never sees a
    traceback: Ctrl-C is 130, a reader that went away (`| head`) 141, a bug one line naming
    the log file; `--debug` (or SOULWIRE_DEBUG=1) shows the traceback."""
    from soulwire.config.process_env import clean_signals_for_children

    clean_signals_for_children()  # first: before any thread or child process inherits the state
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("SOULWIRE_DEBUG", "") not in ("", "0")
    log = None
    try:
        log = _start_logging(debug)
        try:
            code = _main(argv)
        except SystemExit:  # argparse's --help and usage errors
            sys.stdout.flush()
            raise
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except KeyboardInterrupt:
        return 130
    except UsageError as exc:  # a check after parsing (`serve --processes 0`): one line, exit 2
        sys.stderr.write(exc.line() + "\n")
        return EXIT_USAGE
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        return _internal_error(exc, debug=debug, log=log)


def log_file(share: Path) -> Path:
    """The log file: `<share>/logs/soulwire.log` (rotated; see cli/logs.py)."""
    return share / "logs" / "soulwire.log"


def _start_logging(debug: bool) -> Path:
    """With --debug, log to the file from now on; else from the end of start-up (the front
    ends call `startup_finished`), so the first answer never waits for `logging`."""
    from soulwire.config.loader import share_dir

    share = share_dir()
    if debug:
        import logging
        import platform

        from soulwire.cli.logs import setup_logging

        sys.stderr.write(f"soulwire: debug log: {log_file(share)}\n")
        path = setup_logging(share, debug=True)
        logging.getLogger("soulwire.cli").debug(
            "soulwire %s on Python %s, pid %d, share dir %s, argv %s",
            __version__, platform.python_version(), os.getpid(), share, sys.argv[1:],
        )  # fmt: skip
        return path
    from soulwire.config.process_env import after_startup

    def start() -> None:
        from soulwire.cli.logs import setup_logging

        setup_logging(share, debug=False)

    after_startup(start)
    return log_file(share)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot complain either."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _internal_error(exc: Exception, *, debug: bool, log: Path | None) -> int:
    import logging

    from soulwire.cli.logs import setup_logging
    from soulwire.logtags import FILE_ONLY

    if log is not None:
        setup_logging(log.parent.parent, debug=debug)  # before start-up ended, or a subcommand
    logging.getLogger("soulwire.cli").error("unexpected error", exc_info=exc, extra={FILE_ONLY: True})
    where = f" (log: {log})" if log is not None else ""
    if debug:
        import traceback

        traceback.print_exception(exc)
        sys.stderr.write(f"soulwire: the traceback above is also in the log file{where}\n")
    else:
        # Not the exception's text (paths, internals, secrets): that is in the log.
        sys.stderr.write(
            "soulwire: internal error (a bug): the details are in the log; "
            f"run again with --debug for the traceback{where}\n"
        )
    return 1


def _main(argv: list[str]) -> int:
    if argv[:1] == ["acp"] and "login" in argv[1:]:  # an editor's terminal authentication: its
        from soulwire.cli.login import run_login  # `soulwire acp [flags]` with `login` appended

        return run_login(argv[argv.index("login") + 1 :])
    if argv[:1] == ["acp"] and any(a == "--connect" or a.startswith("--connect=") for a in argv):
        from soulwire.ui.acp.connect import run_connect  # stdio bridged to a remote serve's /acp

        return run_connect(argv[1:])
    if argv and argv[0] == "acp":  # `soulwire acp [flags]`, the form editors are configured with
        argv = ["--acp", *argv[1:]]
    command = [a for a in argv if a != "--debug"]  # `soulwire --debug doctor`, `soulwire doctor --debug`
    if command and command[0] in SUBCOMMANDS:
        return _subcommand(command[0], command[1:])
    if command and command[0] in NOT_PROVIDED:  # kimi's, refused with the reason, not a usage error
        sys.stderr.write(f"soulwire: `{command[0]}` is not provided: {NOT_PROVIDED[command[0]]}\n")
        return 2
    from soulwire.cli.args import parse_main
    from soulwire.config.loader import ConfigError

    try:
        args = parse_main(argv)
        if args.version:
            print(f"soulwire, version {__version__}")
            return 0
        options = _session_options(args)
    except UsageError as exc:
        sys.stderr.write(exc.line() + "\n")
        return 2
    except ConfigError as exc:  # one line: what is wrong and where
        sys.stderr.write(f"soulwire: error: {exc}\n")
        return 2
    problem = _sandbox_problem(options)
    if problem is not None:
        sys.stderr.write(f"soulwire: {problem}\n")
        return 2
    if args.verbose:  # --debug's log file is set up in main()
        from soulwire.cli.logs import enable_verbose

        enable_verbose()
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
    from soulwire.cli.budget_flags import apply_budget_flags

    apply_budget_flags(a, raw)
    mcp_files = [Path(p) for p in a.mcp_config_file]
    if mcp_files or a.mcp_config or (share / "mcp.json").is_file():  # else no import at all
        from soulwire.tools.mcp_config import load_mcp_servers

        load_mcp_servers(mcp_files, list(a.mcp_config), share)  # refused here, before any reply
    agent_file = Path(a.agent_file) if a.agent_file else None
    model_alias = a.model
    if a.agent or agent_file:  # checked now: a broken agent file is one line and exit 2
        from soulwire.runtime.agentspec import (
            agent_file_for,
            builtin_args,
            load_agent_spec,
            render_system_prompt,
        )

        agent_path = agent_file_for(a.agent, agent_file)
        assert agent_path is not None
        spec = load_agent_spec(agent_path)
        render_system_prompt(spec, builtin_args(work_dir, [], ""))
        for ref in spec.subagents.values():
            render_system_prompt(load_agent_spec(ref.path), builtin_args(work_dir, [], ""))
        model_alias = model_alias or spec.model
    return SessionOptions(
        work_dir=work_dir,
        share_dir=share,
        raw_config=raw,
        config_path=path,
        model=model_alias,
        thinking=a.thinking,
        yolo=a.yolo,
        afk=a.afk,
        plan_mode=a.plan,
        session_id=a.session if a.session == "" else (a.session or None),  # "": the shell asks
        continue_last=a.continue_last,
        max_steps_per_turn=a.max_steps_per_turn,
        max_retries_per_step=a.max_retries_per_step,
        max_ralph_iterations=a.max_ralph_iterations,
        agent=a.agent,
        agent_file=agent_file,
        skills_dirs=[Path(p) for p in a.skills_dir],
        add_dirs=[Path(p) for p in a.add_dir],
        mcp_config_files=mcp_files,
        mcp_configs=list(a.mcp_config),
        print_mode=a.print_mode,
        sandbox=a.sandbox,
        sandbox_network=None if a.sandbox_network is None else a.sandbox_network == "on",
        approval=a.approval,
        checkpoints=a.checkpoints,
        overlay=a.overlay,
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
    if name in ("completion", "__complete"):
        from soulwire.cli.completion import run_complete, run_completion

        return run_completion(argv) if name == "completion" else run_complete(argv)
    if name == "serve":
        from soulwire.server.main import run_serve

        return run_serve(argv)
    if name in ("web", "vis"):
        from soulwire.cli.web import run_web

        return run_web(name, argv)
    if name in ("login", "logout"):
        from soulwire.cli.login import run_login, run_logout

        return run_login(argv) if name == "login" else run_logout(argv)
    if name == "mcp":
        from soulwire.cli.mcp import run_mcp

        return run_mcp(argv)
    if name in ("export", "import"):
        from soulwire.cli.export import run_export, run_import

        return run_export(argv) if name == "export" else run_import(argv)
    if name == "plugin":
        from soulwire.cli.plugin import run_plugin

        return run_plugin(argv)
    from soulwire.cli.sessions import run_sessions

    return run_sessions(argv)


def _extended_wire(runtime: Any, reader: Any) -> int:
    """`--wire` for a client that negotiated the server's extensions (server/stdio.py)."""
    from soulwire.server.stdio import run_extended

    return run_extended(runtime, reader)
