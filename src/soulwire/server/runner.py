"""uvicorn's server as `soulwire serve` runs it, stopping as soon as it is asked to.

uvicorn notices a stop request only at its next tick (its main loop sleeps 0.1 s at a time),
then sleeps 0.1 s more after asking the connections to close, and polls them every 0.1 s:
0.15 to 0.3 s of an idle server's stop were those waits. Here a request (a signal, stdin's end,
the first process gone) wakes the main loop at once, and the shutdown polls the connections
every few milliseconds; its steps and their order are uvicorn's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Callable, Generator
from types import FrameType

import uvicorn

log = logging.getLogger("uvicorn.error")

TICK = 0.1
"""uvicorn's main-loop period (it refreshes the Date header every tenth tick)."""
POLL = 0.005
"""How often the shutdown looks whether the connections have closed."""


class Server(uvicorn.Server):
    """`stop()` (and SIGINT/SIGTERM) ask for a graceful stop and wake the main loop at once;
    `on_stop` is called when the shutdown begins (the first of several processes stops its
    copies then, so they wind down alongside it)."""

    def __init__(self, config: uvicorn.Config, *, on_stop: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.on_stop = on_stop
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def stop(self) -> None:
        """Ask for a graceful stop: from the loop, another thread, or a signal handler."""
        self.should_exit = True
        wake, loop = self._wake, self._loop
        if wake is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: it is over already
                loop.call_soon_threadsafe(wake.set)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)  # (a second SIGINT still forces the exit)
        self.stop()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None]:
        """SIGINT/SIGTERM start a graceful shutdown and the process then exits 0 (uvicorn's
        own handling re-raises the signal once it is done)."""
        signals = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    async def main_loop(self) -> None:
        """uvicorn's ticks, each cut short by `stop`."""
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()  # after the event: `stop` needs both
        counter = 0
        while not await self.on_tick(counter):  # (it sees a stop asked before the loop ran)
            counter = (counter + 1) % 864_000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK):
                    await self._wake.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's graceful shutdown (stop accepting, ask the connections to close, wait for
        them and their tasks up to `timeout_graceful_shutdown`, then the lifespan's shutdown),
        waiting in steps of `POLL` instead of 0.1 s."""
        if self.on_stop is not None:
            self.on_stop()
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                await self._connections_closed()
        except TimeoutError:
            tasks = self.server_state.tasks
            log.error("Cancel %s running task(s), timeout graceful shutdown exceeded", len(tasks))
            for task in tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _connections_closed(self) -> None:
        state = self.server_state
        while (state.connections or state.tasks) and not self.force_exit:
            await asyncio.sleep(POLL)
        for server in self.servers:
            await server.wait_closed()


__all__ = ["Server"]
