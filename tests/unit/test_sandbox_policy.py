"""SandboxPolicy without running bubblewrap: the argv it builds and the in-process answers
agree (the deeper rule wins on both sides)."""

from __future__ import annotations

from pathlib import Path

import pytest

from soulwire.tools.sandbox import (
    BOUNDARY_READ_ONLY,
    BOUNDARY_WRITE_OUTSIDE,
    SandboxPolicy,
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text("machine x password y\n")
    (home / "project").mkdir()
    return home


def policy(home: Path, mode: str = "workspace-write", **kwargs: object) -> SandboxPolicy:
    created = SandboxPolicy.create(
        mode,  # type: ignore[arg-type]
        work_dir=kwargs.pop("work_dir", home / "project"),  # type: ignore[arg-type]
        home=home,
        share_dir=home / ".soulwire",
        **kwargs,  # type: ignore[arg-type]
    )
    return created


def mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(option, target) of the path mounts, in order."""
    found: list[tuple[str, str]] = []
    for index, arg in enumerate(argv):
        if arg == "--tmpfs":
            found.append((arg, argv[index + 1]))
        elif arg in ("--bind", "--ro-bind") and argv[index + 1] != "/":
            found.append((arg, argv[index + 2]))
    return found


def test_off_changes_nothing(home: Path):
    off = policy(home, "off")
    assert off.command_argv(["bash", "-c", "x"], cwd=home) == ["bash", "-c", "x"]
    assert not off.hides(home / ".ssh") and off.write_boundary(Path("/etc/passwd")) is None
    off.close()


def test_workspace_write_argv(home: Path):
    sandbox = policy(home)
    argv = sandbox.command_argv(["bash", "-c", "x"], cwd=home / "project")
    assert argv[0] == sandbox.bwrap and {"--unshare-pid", "--die-with-parent", "--unshare-net"} <= set(argv)
    assert argv[-4:] == ["--", "bash", "-c", "x"]
    assert ("--tmpfs", str(home / ".ssh")) in mounts(argv)
    assert ("--ro-bind", str(home / ".netrc")) in mounts(argv)  # a file reads as empty
    assert ("--bind", str(home / "project")) in mounts(argv)
    assert sandbox.private_tmp is not None and ("--bind", str(sandbox.private_tmp)) in mounts(argv)
    env = sandbox.command_env(
        {"PATH": "/bin", "OPENAI_API_KEY": "k", "SSH_AUTH_SOCK": "/s", "DB_PASSWORD": "p"}
    )
    assert env == {"PATH": "/bin", "TMPDIR": str(sandbox.private_tmp)}
    assert sandbox.command_env({"A_TOKEN": "t"}, escape="full") == {"A_TOKEN": "t"}
    assert "--unshare-net" not in sandbox.command_argv(["true"], cwd=home, escape="network")
    assert sandbox.command_argv(["true"], cwd=home, escape="full") == ["true"]
    sandbox.close()
    assert not sandbox.private_tmp.exists()


def test_the_deeper_rule_wins_on_both_sides(home: Path):
    sandbox = policy(home, work_dir=home)  # the work dir holds ~/.ssh
    order = [target for _, target in mounts(sandbox.command_argv(["true"], cwd=home))]
    assert order.index(str(home)) < order.index(str(home / ".ssh"))
    assert sandbox.hides(home / ".ssh" / "id_rsa") and not sandbox.hides(home / "project" / "a.py")
    assert sandbox.write_boundary(home / ".ssh" / "authorized_keys") == BOUNDARY_WRITE_OUTSIDE
    assert sandbox.write_boundary(home / "notes.txt") is None
    sandbox.close()
    nested = policy(home, work_dir=home / ".ssh")  # a workspace inside a hidden dir stays visible
    ssh = [
        option
        for option, target in mounts(nested.command_argv(["true"], cwd=home))
        if target == str(home / ".ssh")
    ]
    assert ssh == ["--tmpfs", "--bind"]
    assert not nested.hides(home / ".ssh" / "known_hosts")
    nested.close()


def test_read_only_writes_nothing_but_its_tmp(home: Path):
    sandbox = policy(home, "read-only")
    assert sandbox.write_boundary(home / "project" / "a.py") == BOUNDARY_READ_ONLY
    assert sandbox.private_tmp is not None and sandbox.write_boundary(sandbox.private_tmp / "x") is None
    assert ("--ro-bind", str(home / "project")) in mounts(sandbox.command_argv(["true"], cwd=home))
    escaped = sandbox.command_argv(["true"], cwd=home, escape="write")  # writes anywhere …
    assert escaped[escaped.index("--bind") + 1 : escaped.index("--bind") + 3] == ["/", "/"]
    assert ("--ro-bind", str(home / "project")) not in mounts(escaped)
    assert ("--tmpfs", str(home / ".ssh")) in mounts(escaped)  # … but secrets stay hidden
    sandbox.close()


def test_secrets_that_appear_later_are_hidden_too(home: Path):
    sandbox = policy(home)
    assert not sandbox.hides(home / ".aws" / "credentials")
    (home / ".aws").mkdir()
    assert sandbox.hides(home / ".aws" / "credentials")
    linked = home / "elsewhere"
    linked.mkdir()
    (home / ".kube").symlink_to(linked)  # a secret dir behind a link: its target is hidden
    assert sandbox.hides(linked / "config")
    sandbox.close()


def test_missing_dirs_are_skipped_and_the_private_tmp_comes_back(home: Path):
    sandbox = policy(home, add_dirs=[home / "gone"])
    assert sandbox.private_tmp is not None
    sandbox.private_tmp.rmdir()
    argv = sandbox.command_argv(["true"], cwd=home / "project")
    assert str(home / "gone") not in argv and sandbox.private_tmp.is_dir()
    sandbox.close()
