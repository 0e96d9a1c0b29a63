"""`--verbose` and `--debug` (as `kimi`'s): `--verbose` prints what the session is made of
(version, work dir, session, model, agent, skills) on stderr; `--debug` writes a debug log,
every logger of the process at DEBUG with times and thread names, to
`<share>/logs/soulwire.log` (private to the user). Neither touches stdout, so both are safe
with `--wire`, `acp` and `--print`. Without them the logging module is not even set up."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

LOG_NAME = "soulwire.log"


def setup_logging(*, verbose: bool, debug: bool, share: Path) -> Path | None:
    """Configure logging for the flags; returns the debug log's path (None without --debug)."""
    root = logging.getLogger()
    path = None
    if debug:
        directory = share / "logs"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = directory / LOG_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8"))
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
        )
        handler.setLevel(logging.DEBUG)
        root.addHandler(handler)
        root.setLevel(logging.DEBUG)
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("soulwire: %(message)s"))
        handler.setLevel(logging.INFO)
        handler.addFilter(lambda record: record.name.startswith("soulwire"))
        root.addHandler(handler)
        if not debug:
            root.setLevel(logging.INFO)
    if path is not None:
        logging.getLogger("soulwire").debug("debug log of pid %d: argv %s", os.getpid(), sys.argv[1:])
    return path
