"""The log file (share dir, rotated, secrets redacted) and what a person sees when Soulwire
itself fails: one line naming the log file, or the traceback with --debug."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import soulwire.cli as cli
from soulwire.cli.logs import MAX_BYTES, LazyRotatingFile, log_path, redact, secret_values


def test_secrets_are_redacted():
    secrets = secret_values({"OPENAI_API_KEY": "abc123secret", "HOME": "/root", "X_TOKEN": "short"})
    assert secrets == ("abc123secret",)  # names that hold secrets; "short" is too short to matter
    text = redact(
        "calling with abc123secret, Authorization: Bearer eyJhbGciOi.J9, key sk-ant-api03-xyzxyzxyz, "
        'api_key="plain-text-key"',
        secrets,
    )
    assert text == (
        'calling with [redacted], Authorization: Bearer [redacted], key [redacted], api_key="[redacted]"'
    )


def test_the_log_file_is_created_at_the_first_record_and_rotated(tmp_path: Path):
    path = log_path(tmp_path)
    handler = LazyRotatingFile(path, logging.WARNING)
    logger = logging.getLogger("soulwire.test-rotation")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        assert not path.exists()  # nothing logged, nothing written
        line = "x" * 1000
        for _ in range(MAX_BYTES // 1000 * 2):
            logger.warning("%s sk-abcdefghijklmnop", line)
        assert path.exists() and path.with_name("soulwire.log.1").exists()
        assert path.stat().st_size <= MAX_BYTES
        assert "sk-abcdefghijklmnop" not in path.read_text() and "[redacted]" in path.read_text()
    finally:
        logger.removeHandler(handler)
        handler.close()


def _crash(argv: list[str]) -> int:
    raise RuntimeError("the engine fell over")


def test_an_unexpected_error_is_one_line_naming_the_log(monkeypatch, tmp_path: Path, capsys):
    monkeypatch.setenv("SOULWIRE_SHARE_DIR", str(tmp_path))
    monkeypatch.delenv("SOULWIRE_DEBUG", raising=False)
    monkeypatch.setattr(cli, "_main", _crash)
    assert cli.main(["--print", "-p", "hi"]) == 1
    err = capsys.readouterr().err
    log = tmp_path / "logs" / "soulwire.log"
    assert err == (
        "soulwire: internal error (a bug): the details are in the log; "
        f"run again with --debug for the traceback (log: {log})\n"
    )
    assert "Traceback" in log.read_text() and "the engine fell over" in log.read_text()


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback_and_where_the_log_is(monkeypatch, tmp_path: Path, capsys, how: str):
    monkeypatch.setenv("SOULWIRE_SHARE_DIR", str(tmp_path))
    monkeypatch.setattr(cli, "_main", _crash)
    argv = ["--print", "-p", "hi"]
    if how == "flag":
        argv.append("--debug")
    else:
        monkeypatch.setenv("SOULWIRE_DEBUG", "1")
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    log = tmp_path / "logs" / "soulwire.log"
    assert err.startswith(f"soulwire: debug log: {log}\nTraceback (most recent call last):")
    assert "RuntimeError: the engine fell over" in err
    assert err.endswith(f"soulwire: the traceback above is also in the log file (log: {log})\n")


_WRITER = """
import logging, sys
from pathlib import Path
import soulwire.cli.logs as logs

logs.MAX_BYTES, logs.BACKUPS = 20_000, 14
logs.setup_logging(Path(sys.argv[1]), debug=False)
name = sys.argv[2]
sys.stdin.readline()  # all start together
for n in range(250):
    logging.getLogger("soulwire.shared").warning("%s record %04d %s", name, n, "x" * 120)
"""


def test_processes_sharing_the_log_file_rotate_it_without_losing_a_record(tmp_path: Path):
    """Four processes log at once into one file that rotates a dozen times: every record is
    kept once, and no file grows past the limit (each process rotating by its own view of
    the file renamed the others' files away, and its backups ran out)."""
    import subprocess
    import sys

    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), f"w{i}"], stdin=subprocess.PIPE, text=True
        )
        for i in range(4)
    ]
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.close()
    assert [writer.wait(60) for writer in writers] == [0, 0, 0, 0]
    files = sorted(log_path(tmp_path).parent.glob("soulwire.log*"))
    logs = [f for f in files if not f.name.endswith(".lock")]
    assert 8 <= len(logs) <= 15  # ~190 KB in files of 20 KB: rotated, and none dropped
    records = [line.split(": ", 1)[1] for f in logs for line in f.read_text().splitlines()]
    wanted = [f"w{i} record {n:04d} {'x' * 120}" for i in range(4) for n in range(250)]
    assert sorted(records) == sorted(wanted)
    assert all(f.stat().st_size <= 20_000 for f in logs)


def test_a_warning_for_the_person_also_reaches_the_log_file(tmp_path: Path):
    """Data warnings (a skipped record, a state file not saved) are on stderr, which a served
    or fleet engine's person seldom sees: they are in the log file too, those given during
    start-up (before the file is set up) included."""
    import subprocess
    import sys

    script = (
        "import sys; from pathlib import Path; from soulwire.sessions.jsonl import warn_stderr\n"
        "warn_stderr('before the log is set up')\n"
        "from soulwire.cli.logs import setup_logging\n"
        "setup_logging(Path(sys.argv[1]), debug=False)\n"
        "warn_stderr('skipped 1 unreadable context record(s)')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [  # each once: no second copy from Python's last resort
        "soulwire: before the log is set up",
        "soulwire: skipped 1 unreadable context record(s)",
    ]
    logged = log_path(tmp_path).read_text().splitlines()
    assert [line.split(" WARNING ", 1)[1] for line in logged] == [  # the early one too, once set up
        "soulwire.diagnostics: before the log is set up",
        "soulwire.diagnostics: skipped 1 unreadable context record(s)",
    ]
