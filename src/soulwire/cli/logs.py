"""The log file: `<share>/logs/soulwire.log`, rotated (1 MiB, 3 old files kept) safely when
several processes share it, secrets redacted.

Warnings and errors of every `soulwire.*` logger go there once start-up is over (the CLI sets
this up at `startup_finished`, or at once with `--debug`, which adds debug records and makes
the CLI print tracebacks, naming this file). The file and `logging.handlers` (17 ms to import)
are opened only when the first record arrives. Records still reach stderr as before while
nobody else has configured logging.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from functools import cache
from pathlib import Path

from soulwire.logtags import FILE_ONLY
from soulwire.sessions.jsonl import log_early_warnings

MAX_BYTES = 1 << 20
BACKUPS = 3
SECRET_ENV_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
REDACTED = "[redacted]"


def log_path(share: Path) -> Path:
    from soulwire.cli import log_file

    return log_file(share)


@cache
def _secret_patterns() -> tuple[re.Pattern[str], ...]:
    """Key-shaped strings: provider keys (sk-…, sk-ant-…), bearer tokens, `api_key=…`/`token: …`
    pairs. Compiled at the first record, not at every start (a record is rare)."""
    return (
        re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,})"),
        re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._\-]{8,})"),
        re.compile(r"(?i)\b((?:api[_-]?key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)([^\s\"',}]{4,})"),
    )


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with every known secret value and key-shaped string replaced."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    first, *others = _secret_patterns()
    text = first.sub(REDACTED, text)
    for pattern in others:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def secret_values(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """Values of environment variables that hold secrets (long enough to be worth hiding)."""
    env = os.environ if environ is None else environ
    return tuple(v for k, v in env.items() if k.upper().endswith(SECRET_ENV_SUFFIXES) and len(v) >= 6)


class RedactingFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
        self.secrets = secret_values()

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), self.secrets)


class LazyRotatingFile(logging.Handler):
    """A rotating file handler that creates the file (and imports logging.handlers) at its
    first record; a share dir that cannot be written only loses the log."""

    def __init__(self, path: Path, level: int) -> None:
        super().__init__(level)
        self.path = path
        self._target: logging.Handler | None = None
        self._broken = False
        self.setFormatter(RedactingFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        if self._broken:
            return
        if self._target is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))  # private
                self._target = _shared_rotating_file(self.path)
            except OSError:
                self._broken = True
                return
            self._target.setFormatter(self.formatter)
        self._target.emit(record)

    def close(self) -> None:
        if self._target is not None:
            self._target.close()
        super().close()


def _shared_rotating_file(path: Path) -> logging.Handler:
    """A rotating file handler for a file other processes write too: `serve`'s forked copies,
    a fleet's engines, two sessions at once. Each would otherwise rotate by its own view: one
    renames the file and starts a new one, the others go on writing to the renamed one, find
    it full and rotate again, renaming away the new file; the backups run out and records are
    deleted. Here a record is written under an exclusive `flock` on `<file>.lock`, after
    reopening the file if another process rotated it, and the size that decides a rotation is
    the whole file's, the other processes' records included."""
    import fcntl
    from logging.handlers import RotatingFileHandler

    lock_path = f"{path}.lock"

    class SharedRotatingFileHandler(RotatingFileHandler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                lock = os.open(lock_path, os.O_WRONLY | os.O_CREAT, 0o600)
            except OSError:
                self.handleError(record)
                return
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self._follow_rotation()
                super().emit(record)  # (rolls over first when the file is full)
            finally:
                os.close(lock)  # (releases the lock)

        def _follow_rotation(self) -> None:
            """Reopen the file when the one open here was renamed by another process, and go
            to its end: the size a rollover is decided by (`tell()` since Python 3.12) must
            count the other processes' records."""
            if self.stream is None:
                return
            try:
                moved = os.fstat(self.stream.fileno()).st_ino != os.stat(self.baseFilename).st_ino
            except OSError:  # renamed and not yet replaced
                moved = True
            if moved:
                self.stream.close()
                self.stream = self._open()
            self.stream.seek(0, os.SEEK_END)

    return SharedRotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")


class StderrFallback(logging.Handler):
    """What Python prints for an unconfigured logger (warnings, message only, on stderr),
    kept while no front end has configured the root logger itself."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, FILE_ONLY, False):
            return
        if not logging.getLogger().handlers and logging.lastResort is not None:
            logging.lastResort.handle(record)


def setup_logging(share: Path, *, debug: bool) -> Path:
    """Send the `soulwire` loggers to the log file; returns its path."""
    path = log_path(share)
    logger = logging.getLogger("soulwire")
    for old in [h for h in logger.handlers if isinstance(h, LazyRotatingFile | StderrFallback)]:
        logger.removeHandler(old)  # main() called again in one process (tests, embedding)
        old.close()
    logger.addHandler(LazyRotatingFile(path, logging.DEBUG if debug else logging.WARNING))
    logger.addHandler(StderrFallback())
    logger.setLevel(logging.DEBUG if debug else logging.NOTSET)
    log_early_warnings()
    return path


def enable_verbose() -> None:
    """`--verbose` (as kimi's): the `soulwire` loggers' INFO records — what the session is
    made of: version, work dir, session, model, agent, tools, skills — on stderr. Never stdout,
    so it is safe with `--wire`, `acp` and `--print`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("soulwire: %(message)s"))
    handler.setLevel(logging.INFO)
    handler.addFilter(lambda record: not getattr(record, FILE_ONLY, False))
    logger = logging.getLogger("soulwire")
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.INFO:
        logger.setLevel(logging.INFO)
