"""The sandbox: one policy for what Shell commands and the file tools may touch.

A `SandboxPolicy` is built once per session from `--sandbox` / `sandbox = …` and used by both
sides, so they cannot disagree:

* Shell commands (foreground and background) run under bubblewrap: `command_argv` turns the
  command's argv into a `bwrap` argv. The file system is read-only, except the workspace
  (`workspace-write`) and the session's private temp dir (`$TMPDIR`); the user's secrets are not
  visible at all (empty dirs, empty files, no credential-like environment variables); no
  network unless allowed; an own PID namespace, so everything the command started dies with
  it.
* The file tools ask `hides` and `write_boundary` about the resolved path (symlinks followed):
  what the shell cannot see they cannot read, what it cannot write they cannot write.

Every path means the same inside the sandbox and out (the private temp dir too: it is a fresh
directory under the system's temp dir, mounted writable where it is), so the file tools and
the commands judge a path alike. Mounts are applied from the shallowest path to the deepest:
the deeper rule wins (a secret dir inside the workspace is still hidden, a workspace inside a
hidden dir still visible).

Where bubblewrap cannot run, `bubblewrap_problem` says why; a session that asks for a sandbox
then refuses to start rather than run unconfined."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, get_args

from soulwire.wire.session_settings import SandboxMode

if TYPE_CHECKING:
    from soulwire.tools.overlay import Overlay

Escape = Literal["network", "write", "full"]
"""How a command may leave the sandbox, with a person's approval: `network` keeps the sandbox
but shares the network; `write` keeps the secrets hidden and the network off but makes the
whole file system writable; `full` runs the command unconfined."""
ESCAPES: tuple[str, ...] = get_args(Escape)

BOUNDARY_NETWORK = "network access"
BOUNDARY_WRITE_OUTSIDE = "writes outside the workspace"
BOUNDARY_READ_ONLY = "writes in a read-only sandbox"
BOUNDARY_FULL = "the whole sandbox (network, writes anywhere, secrets visible)"
ESCAPE_BOUNDARIES: dict[str, str] = {
    "network": BOUNDARY_NETWORK,
    "write": BOUNDARY_WRITE_OUTSIDE,
    "full": BOUNDARY_FULL,
}

# Credentials under $HOME: directories become empty, files read as empty.
SECRET_HOME_DIRS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".docker",
    ".password-store",
    ".soulwire",
    ".kimi",
)
SECRET_HOME_FILES = (".netrc", ".git-credentials", ".pgpass", ".pypirc", ".npmrc")
# Sockets that hand out keys or root: agents and container daemons.
SECRET_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock")
SECRET_ENV = ("SSH_AUTH_SOCK", "GPG_AGENT_INFO")
# Environment variables that look like credentials (API keys of the providers included) are
# removed from the sandbox's environment.
SECRET_ENV_NAME = (
    r"(^|_)(API_?KEY|TOKEN|SECRET|SECRET_KEY|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY|PRIVATE_KEY)(_|$)"
)
"""Matched case-insensitively (compiled when a sandbox first starts, not at every start)."""
_PROBE_TIMEOUT_S = 10.0


def leaving_action(action: str, escape: Escape) -> str:
    """The approval action of `action` leaving the sandbox, e.g. `run command (leaves the
    sandbox: network)`: a distinct action, so session rules for it stay apart."""
    return f"{action} (leaves the sandbox: {escape})"


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the agent sockets and the variables that look like credentials."""
    secret_name = re.compile(SECRET_ENV_NAME, re.IGNORECASE)
    return {k: v for k, v in env.items() if k not in SECRET_ENV and not secret_name.search(k)}


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


class _Mount(NamedTuple):
    """One bwrap mount, ordered by the depth of its target."""

    target: Path
    args: tuple[str, ...]
    hides: bool = False


@dataclass(eq=False)  # compared by identity (and cheaper to define)
class SandboxPolicy:
    """What a session's commands and file tools may see and change."""

    mode: SandboxMode
    network: bool = False
    workspace: tuple[Path, ...] = ()
    """The work dir and the added dirs, symlinks resolved."""
    secrets: tuple[Path, ...] = ()
    """Paths hidden from the sandbox when they exist (resolved at each use: they may appear
    during the session)."""
    private_tmp: Path | None = None
    """The session's own temp dir, writable in the sandbox and its `$TMPDIR`."""
    bwrap: str = "bwrap"
    overlay: Overlay | None = None
    """The turn's overlay while one is mounted: commands run in it, the file tools read and
    write through it (`view`)."""
    _owns_tmp: bool = field(default=False, repr=False)

    @classmethod
    def create(
        cls,
        mode: SandboxMode,
        *,
        network: bool = False,
        work_dir: Path,
        add_dirs: Sequence[Path] = (),
        home: Path | None = None,
        share_dir: Path | None = None,
    ) -> SandboxPolicy:
        """The policy for a session; for an active sandbox, with a fresh private temp dir
        (removed by `close`)."""
        workspace = tuple(dict.fromkeys(_real(d) for d in (work_dir, *add_dirs)))
        if mode == "off":
            return cls(mode, network=True, workspace=workspace)
        home = home if home is not None else Path.home()
        secrets = [home / d for d in SECRET_HOME_DIRS] + [home / f for f in SECRET_HOME_FILES]
        if share_dir is not None:
            secrets.append(share_dir)
        secrets += [Path(s) for s in SECRET_SOCKETS]
        uid = os.getuid() if hasattr(os, "getuid") else None
        if uid is not None:
            secrets.append(Path(f"/run/user/{uid}"))  # ssh-agent, gpg-agent, D-Bus sockets
        for name in SECRET_ENV:
            value = os.environ.get(name, "").split(":", 1)[0]
            if value.startswith("/"):
                secrets.append(Path(value))
        private_tmp = _real(tempfile.mkdtemp(prefix="soulwire-sandbox-"))
        return cls(
            mode,
            network=network,
            workspace=workspace,
            secrets=tuple(dict.fromkeys(secrets)),
            private_tmp=private_tmp,
            bwrap=shutil.which("bwrap") or "bwrap",
            _owns_tmp=True,
        )

    @property
    def active(self) -> bool:
        return self.mode != "off"

    @property
    def writable(self) -> tuple[Path, ...]:
        """Where commands may write: the workspace (`workspace-write`) and the private tmp."""
        tmp = (self.private_tmp,) if self.private_tmp is not None else ()
        return (*self.workspace, *tmp) if self.mode == "workspace-write" else tmp

    def close(self) -> None:
        """Remove the private temp dir (the session ended)."""
        if self._owns_tmp and self.private_tmp is not None:
            shutil.rmtree(self.private_tmp, ignore_errors=True)

    # -- the in-process side (file tools) ---------------------------------------
    def hidden_roots(self) -> list[Path]:
        """The secret paths that exist now, symlinks resolved."""
        found: list[Path] = []
        for path in self.secrets:
            if os.path.lexists(path):
                real = _real(path)
                if real not in found:
                    found.append(real)
        return found

    def hides(self, real: Path) -> bool:
        """Whether the sandbox hides `real` (a resolved path): the deepest rule covering it
        is a secret, not a workspace dir."""
        return self.hidden_check()(real)

    def hidden_check(self) -> Callable[[Path], bool]:
        """`hides` for many paths: the secrets are looked up once."""
        if not self.active:
            return lambda real: False
        mounts = list(self._path_mounts(escape=None))
        if not any(m.hides for m in mounts):
            return lambda real: False

        def hides(real: Path) -> bool:
            deepest: _Mount | None = None
            for mount in mounts:
                deeper = deepest is None or len(mount.target.parts) >= len(deepest.target.parts)
                if deeper and _inside(real, mount.target):
                    deepest = mount
            return deepest is not None and deepest.hides

        return hides

    def view(self, real: Path) -> Path:
        """The path through which the file tools read and write `real` (a resolved path):
        inside the turn's overlay when one is mounted, else `real` itself."""
        return real if self.overlay is None else self.overlay.view(real)

    def write_boundary(self, real: Path) -> str | None:
        """None when the sandbox lets a command write `real`; else the boundary a write
        would cross."""
        if not self.active:
            return None
        if any(_inside(real, root) for root in self.writable) and not self.hides(real):
            return None
        return BOUNDARY_READ_ONLY if self.mode == "read-only" else BOUNDARY_WRITE_OUTSIDE

    # -- the process side (Shell) ---------------------------------------------------
    def command_argv(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        escape: Escape | None = None,
        outlive_engine: bool = False,
        readable: Sequence[Path] = (),
    ) -> list[str]:
        """`argv` as it runs in this sandbox (unchanged when the sandbox is off or the
        command was approved to leave it entirely). `outlive_engine`: a background command
        `keep_alive_on_exit` leaves running, still confined, when the engine exits.
        `readable`: dirs the command must see even inside a hidden one (a plugin's own
        directory in the share dir), read-only."""
        overlay = self.overlay
        enter = overlay.enter_argv(cwd) if overlay is not None and overlay.mounted else []
        if not self.active or escape == "full":
            return [*enter, *argv]
        # Namespaces that confine: user (when unprivileged), PID (everything dies with the
        # call), IPC, and network unless allowed. UTS and cgroup ones would only cost time.
        out = [*enter, self.bwrap, "--unshare-user-try", "--unshare-pid", "--unshare-ipc"]
        if not outlive_engine:
            out.append("--die-with-parent")
        if not (self.network or escape == "network"):
            out.append("--unshare-net")
        out += ["--ro-bind", "/", "/"] if escape != "write" else ["--bind", "/", "/"]
        out += ["--dev", "/dev", "--proc", "/proc"]
        shown = [_Mount(r, ("--ro-bind", str(r), str(r))) for r in map(_real, readable) if r.is_dir()]
        for mount in sorted([*self._path_mounts(escape), *shown], key=lambda m: len(m.target.parts)):
            out += mount.args
        out += ["--chdir", str(cwd), "--", *argv]
        return out

    def command_env(
        self, env: Mapping[str, str] | None, *, escape: Escape | None = None
    ) -> dict[str, str] | None:
        """The environment to start the sandboxed command with (`env`, or this process's
        when None): without credential-like variables, with `TMPDIR` at the private temp
        dir. Filtered here rather than by bwrap's `--unsetenv`, which would leave the values
        readable in `/proc/1/environ` (bwrap's own process inside the sandbox)."""
        if not self.active or escape == "full":
            return None if env is None else dict(env)
        clean = without_secrets(os.environ if env is None else env)
        if self.private_tmp is not None:
            clean["TMPDIR"] = str(self.private_tmp)
        return clean

    def _path_mounts(self, escape: Escape | None) -> Iterable[_Mount]:
        for real in self.hidden_roots():
            if real.is_dir():
                yield _Mount(real, ("--tmpfs", str(real)), hides=True)
            else:
                yield _Mount(real, ("--ro-bind", "/dev/null", str(real)), hides=True)
        if escape == "write":  # everything is writable already
            return
        if self.private_tmp is not None:  # a temp cleaner may have removed it
            self.private_tmp.mkdir(mode=0o700, parents=True, exist_ok=True)
        # A dir that does not exist (an added dir deleted since) cannot be mounted: skipped,
        # rather than failing every command.
        for root in self.writable:
            if root.is_dir():
                yield _Mount(root, ("--bind", str(root), str(root)))
        if self.mode == "read-only":  # the workspace itself is never hidden
            for root in self.workspace:
                if root.is_dir():
                    yield _Mount(root, ("--ro-bind", str(root), str(root)))

    def describe(self) -> str:
        """One line for people: what the sandbox allows."""
        if not self.active:
            return "no sandbox"
        writes = "the private $TMPDIR only"
        if self.mode == "workspace-write":
            writes = "the workspace and the private $TMPDIR"
        network = "network on" if self.network else "no network"
        return f"sandbox {self.mode}: writes to {writes}, {network}, secrets hidden"


@cache
def bubblewrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox commands here, or None when it can. Probed once per
    process by running a minimal sandbox."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux with bubblewrap; this system is {sys.platform}"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (`bwrap`) is not installed; install the `bubblewrap` package"
    try:
        probe = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot run: {exc}"
    if probe.returncode != 0:
        reason = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = reason[-1] if reason else f"exit status {probe.returncode}"
        return f"bubblewrap cannot create a sandbox here (are user namespaces disabled?): {detail}"
    return None
