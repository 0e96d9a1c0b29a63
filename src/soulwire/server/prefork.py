"""`soulwire serve --processes N`: one process loads the server, the session machinery and the
configured provider's SDK, then forks N-1 copies of itself before any thread or event loop
exists. Each copy serves its own socket (its own port on the same host) and prints its own
`listening on` line; a session lives in the process that created it.

This is how fleets start their warm engines: the ~2 CPU-seconds of imports (the web stack,
the engine, the provider SDK) are paid once instead of once per engine, on one core instead of
racing the first tasks for both, the copies share that memory until they write to it, and all
are ready at the same moment. The first process supervises the others: one that dies is
reported on stderr (`process PID (URL) exited (code C)`), and they are stopped with it."""

from __future__ import annotations

import contextlib
import ctypes  # here, not in each copy after the fork (`_die_with`): ~8 ms of imports
import importlib
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

EXITED = "exited (code "
"""What the supervisor's line about a dead copy says (fleets read it)."""
_PR_SET_PDEATHSIG = 1


def preload(raw_config: dict[str, Any], model_alias: str | None) -> None:
    """Import what every session needs, before the fork: the engine and its tools, the SDK
    (with its HTTP stack and the shared TLS context) of the model sessions use by default, and
    what each copy would otherwise import on its way to serving."""
    # (wire.methods: the models of `initialize` and the other methods, which a session's
    # WireServer imports at its first `initialize`)
    modules = ("soulwire.runtime.builder", "soulwire.ui.wire.server", "soulwire.engine.state_check")
    for module in (*modules, "soulwire.wire.methods"):
        importlib.import_module(module)
    from soulwire.tools.builtin import default_tools

    default_tools()  # (imports the built-in tools' modules)
    kind = _provider_type(raw_config, model_alias)
    if kind is not None:
        from soulwire.llm.registry import preload_sdk

        preload_sdk(kind)
    import anyio

    # anyio imports its asyncio backend at its first `run` (~20 ms): an empty one here (it
    # leaves no thread behind) instead of one in every copy, each on its way to serving.
    anyio.run(_nothing)


async def _nothing() -> None:
    pass


def _provider_type(raw_config: dict[str, Any], model_alias: str | None) -> str | None:
    """The provider `type` of the model sessions use unless they name another."""
    alias = model_alias or raw_config.get("default_model")
    models = raw_config.get("models")
    providers = raw_config.get("providers")
    if not isinstance(alias, str) or not isinstance(models, dict) or not isinstance(providers, dict):
        return None
    model: Any = models.get(alias)
    provider: Any = providers.get(model.get("provider")) if isinstance(model, dict) else None
    kind = provider.get("type") if isinstance(provider, dict) else None
    return kind if isinstance(kind, str) else None


class Copies:
    """The forked copies, as the first process sees them: pid → URL."""

    def __init__(self) -> None:
        self.urls: dict[int, str] = {}
        self.stopping = False

    def reap(self, report: Callable[[str], None]) -> None:
        """Collect the copies that ended (only them: the sessions' own tool processes are
        this process's children too, and their exit belongs to whoever waits for them);
        report those that ended while nobody stopped them."""
        for pid, url in list(self.urls.items()):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done == 0:
                continue
            del self.urls[pid]
            if not self.stopping:
                code = os.waitstatus_to_exitcode(status)
                report(f"soulwire serve: process {pid} ({url}) {EXITED}{code})\n")

    def terminate(self) -> None:
        """SIGTERM the copies (each winds its sessions down); once."""
        if self.stopping:
            return
        self.stopping = True
        for pid in self.urls:
            _signal(pid, signal.SIGTERM)

    def stop(self, timeout: float) -> None:
        """`terminate` the copies, SIGKILL what is left after `timeout`; returns when all have
        ended."""
        self.terminate()
        deadline = time.monotonic() + timeout
        while self.urls:
            self.reap(lambda _line: None)
            left = deadline - time.monotonic()
            if not self.urls or left <= 0:
                break
            _wait_for_an_exit(list(self.urls), min(left, 0.1))
        for pid in list(self.urls):
            _signal(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.urls.clear()


def _wait_for_an_exit(pids: list[int], timeout: float) -> None:
    """Return once one of the child processes `pids` has ended, or after `timeout`: on Linux at
    that very moment (a pidfd turns readable when its process ends), elsewhere within 5 ms."""
    fds: list[int] = []
    try:
        poller = select.poll()  # (not select(): a busy server's descriptors may pass 1024)
        for pid in pids:
            fds.append(os.pidfd_open(pid))
            poller.register(fds[-1], select.POLLIN)
        poller.poll(timeout * 1000)
    except (AttributeError, OSError):  # no pidfds here (not Linux, or a kernel before 5.3)
        time.sleep(min(timeout, 0.005))
    finally:
        for fd in fds:
            os.close(fd)


def fork_copies(socks: list[socket.socket], urls: list[str]) -> tuple[int, Copies | None, int | None]:
    """Fork one copy per socket after the first. Returns (the index of the socket this
    process serves, the copies: None in a copy, the parent a copy must watch itself: None
    where the system stops it). Each process closes the others' sockets."""
    if threading.active_count() != 1:  # a thread's locks would be copied held
        raise RuntimeError("soulwire serve --processes: a thread is running before the fork")
    sys.stderr.flush()
    copies = Copies()
    parent = os.getpid()
    for index in range(1, len(socks)):
        pid = os.fork()
        if pid == 0:
            stopped_with_parent = _die_with(parent)
            _keep_only(socks, index)
            return index, None, None if stopped_with_parent else parent
        copies.urls[pid] = urls[index]
    _keep_only(socks, 0)
    return 0, copies, None


def _keep_only(socks: list[socket.socket], index: int) -> None:
    for i, sock in enumerate(socks):
        if i != index:
            sock.close()


def _die_with(parent: int) -> bool:
    """Ask for SIGTERM when the first process ends, however it ends. False where the system
    has no such request (not Linux): the copy then watches its parent (`watch_parent`)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # it ended before the request took hold
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def watch_parent(parent: int, on_gone: Callable[[], None]) -> None:
    """Call `on_gone` (from a daemon thread) once `parent` has gone away: for systems that
    cannot signal a copy when its parent ends."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        on_gone()

    threading.Thread(target=watch, name="serve-parent", daemon=True).start()


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


__all__ = ["EXITED", "Copies", "fork_copies", "preload", "watch_parent"]
