"""A thin blocking wrapper for scripts that do not use asyncio: the async SDK runs on an
event loop in a background thread.

    from soulwire.sdk.sync import SyncSession, ask

    print(ask("what does this repo do?", work_dir="."))
    with SyncSession(work_dir=".") as session:
        for event in session.prompt("hello"):
            print(event)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

from soulwire.sdk.ask import ask_result
from soulwire.sdk.session import Session
from soulwire.sdk.turn import Replay, Step, Turn, TurnResult
from soulwire.wire.types import UserInput

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread; `run` blocks on a coroutine there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="soulwire-sdk-loop", daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[T]) -> T:
        async def wrapper() -> T:
            return await awaitable

        future = asyncio.run_coroutine_threadsafe(wrapper(), self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: the waiting coroutine is cancelled too
            raise

    def call(self, func: Callable[..., T], *args: Any) -> T:
        async def call() -> T:
            return func(*args)

        return self.run(call())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        finishing = asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop)
        with contextlib.suppress(Exception):
            finishing.result(5)  # async generators left open (an unfinished iter_steps)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


class SyncTurn:
    """A Turn for blocking code: iterate it for events, or call `wait()`."""

    def __init__(self, turn: Turn, runner: _LoopThread) -> None:
        self.turn = turn
        self._runner = runner

    def __iter__(self) -> Iterator[Any]:
        while True:
            try:
                batch = self._runner.run(self.turn._batch())
            except KeyboardInterrupt:
                self.cancel(wait=False)
                raise
            if not batch:
                return
            yield from batch

    def iter_steps(self) -> Iterator[SyncStep]:
        steps: AsyncIterator[Step] = self.turn.iter_steps()
        while True:
            try:
                step = self._runner.run(steps.__anext__())
            except StopAsyncIteration:
                return
            yield SyncStep(step, self._runner)

    def wait(self) -> TurnResult:
        return self._runner.run(self.turn.wait())

    def cancel(self, *, wait: bool = True) -> None:
        self._runner.run(self.turn.cancel(wait=wait))

    def steer(self, user_input: UserInput | Sequence[Any]) -> None:
        self._runner.run(self.turn.steer(user_input))

    @property
    def result(self) -> TurnResult:
        return self.turn.result


class SyncStep:
    def __init__(self, step: Step, runner: _LoopThread) -> None:
        self.step = step
        self._runner = runner

    @property
    def n(self) -> int:
        return self.step.n

    def __iter__(self) -> Iterator[Any]:
        events = self.step.__aiter__()
        while True:
            try:
                yield self._runner.run(events.__anext__())
            except StopAsyncIteration:
                return


class SyncSession:
    """`Session` for blocking code; the same keyword options."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._runner: _LoopThread | None = None
        self._session: Session | None = None

    def __enter__(self) -> SyncSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> SyncSession:
        runner = _LoopThread()

        async def start() -> Session:
            return await Session(**self._options).start()

        try:
            self._session = runner.run(start())
        except BaseException:
            runner.stop()
            raise
        self._runner = runner
        return self

    @property
    def session(self) -> Session:
        """The underlying async Session (for its properties: id, server, slash_commands, …)."""
        if self._session is None:
            raise RuntimeError("the session is not started")
        return self._session

    def _run(self) -> _LoopThread:
        if self._runner is None:
            raise RuntimeError("the session is not started")
        return self._runner

    @property
    def id(self) -> str | None:
        return self.session.id

    def prompt(self, user_input: UserInput | Sequence[Any]) -> SyncTurn:
        runner = self._run()
        return SyncTurn(runner.call(self.session.prompt, user_input), runner)

    def replay(self) -> list[Any]:
        """The recorded history as a list of events."""
        runner = self._run()
        replay: Replay = runner.call(self.session.replay)

        async def collect() -> list[Any]:
            return [event async for event in replay]

        return runner.run(collect())

    def steer(self, user_input: UserInput | Sequence[Any]) -> None:
        self._run().run(self.session.steer(user_input))

    def set_plan_mode(self, enabled: bool) -> bool:
        return self._run().run(self.session.set_plan_mode(enabled))

    def cancel(self) -> None:
        self._run().run(self.session.cancel())

    def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            if self._session is not None:
                runner.run(self._session.close())
        finally:
            runner.stop()


def ask(prompt: UserInput | Sequence[Any], **options: Any) -> str:
    """Blocking `soulwire.sdk.ask`: one prompt in a fresh session, the answer's final text.
    Works with or without an event loop already running in this thread."""
    runner = _LoopThread()
    try:
        return runner.run(ask_result(prompt, **options)).final_text
    finally:
        runner.stop()


__all__ = ["SyncSession", "SyncStep", "SyncTurn", "ask"]
