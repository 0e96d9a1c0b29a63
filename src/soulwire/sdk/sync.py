"""A thin blocking wrapper for scripts that do not use asyncio: the async SDK runs in an
anyio blocking portal (an event loop in a background thread).

    from soulwire.sdk.sync import SyncSession, ask

    print(ask("what does this repo do?", work_dir="."))
    with SyncSession(work_dir=".") as session:
        for event in session.prompt("hello"):
            print(event)
"""

from __future__ import annotations

import contextlib
import functools
import queue
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from soulwire.sdk.ask import ask_result
from soulwire.sdk.messages import Message
from soulwire.sdk.options import Options
from soulwire.sdk.query import make_options
from soulwire.sdk.query import query as async_query
from soulwire.sdk.session import EngineInfo, Session
from soulwire.sdk.sessions import HistoryTurn, LocalSessions, ServerSessions, StoredSession
from soulwire.sdk.turn import Replay, Step, Turn, TurnResult
from soulwire.wire.types import UserInput

T = TypeVar("T")


class _Portal:
    """Runs the SDK's coroutines in a blocking portal. An interrupted wait (Ctrl-C)
    cancels the task it was waiting for."""

    def __init__(self) -> None:
        self._cm = start_blocking_portal()
        self.portal: BlockingPortal = self._cm.__enter__()

    def run(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        future: Future[T] = self.portal.start_task_soon(func, *args)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: the waiting coroutine is cancelled too
            raise

    def call(self, func: Callable[..., T], *args: Any) -> T:
        """Call a plain function on the loop; its result is returned as it is, even when it
        is awaitable (a Turn is: the portal would otherwise await it)."""
        return self.portal.call(lambda: (func(*args),))[0]

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._cm.__exit__(None, None, None)


class SyncTurn:
    """A Turn for blocking code: iterate it for events, or call `wait()`."""

    def __init__(self, turn: Turn, runner: _Portal) -> None:
        self.turn = turn
        self._runner = runner

    def __iter__(self) -> Iterator[Any]:
        while True:
            try:
                batch = self._runner.run(self.turn._batch)
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
                step = self._runner.run(steps.__anext__)
            except StopAsyncIteration:
                return
            yield SyncStep(step, self._runner)

    def wait(self) -> TurnResult:
        return self._runner.run(self.turn.wait)

    def cancel(self, *, wait: bool = True) -> None:
        self._runner.run(functools.partial(self.turn.cancel, wait=wait))

    def steer(self, user_input: UserInput | Sequence[Any]) -> None:
        self._runner.run(self.turn.steer, user_input)

    @property
    def result(self) -> TurnResult:
        return self.turn.result


class SyncStep:
    def __init__(self, step: Step, runner: _Portal) -> None:
        self.step = step
        self._runner = runner

    @property
    def n(self) -> int:
        return self.step.n

    def __iter__(self) -> Iterator[Any]:
        events = self.step.__aiter__()
        while True:
            try:
                yield self._runner.run(events.__anext__)
            except StopAsyncIteration:
                return


class SyncSession:
    """`Session` for blocking code; the same options (an `Options` and/or keywords)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        self._session_obj = Session(*args, **options)  # options are checked here, at once
        self._runner: _Portal | None = None
        self._session: Session | None = None
        self._context: Any = None

    def __enter__(self) -> SyncSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> SyncSession:
        runner = _Portal()
        # The portal enters and leaves the session in one task, as its task group requires.
        context = runner.portal.wrap_async_context_manager(self._session_obj)
        try:
            self._session = context.__enter__()
        except BaseException:
            runner.stop()
            raise
        self._context = context
        self._runner = runner
        return self

    @property
    def session(self) -> Session:
        """The underlying async Session (for its properties: id, server, slash_commands, …)."""
        if self._session is None:
            raise RuntimeError("the session is not started")
        return self._session

    def _run(self) -> _Portal:
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

        return runner.run(collect)

    def steer(self, user_input: UserInput | Sequence[Any]) -> None:
        self._run().run(self.session.steer, user_input)

    def set_plan_mode(self, enabled: bool) -> bool:
        return self._run().run(self.session.set_plan_mode, enabled)

    def checkpoints(self) -> list[dict[str, Any]]:
        return self._run().run(self.session.checkpoints)

    def changes(self, turn: int, *, diffs: bool = True) -> Any:
        return self._run().run(functools.partial(self.session.changes, turn, diffs=diffs))

    def rewind(self, turn: int | None = None, **flags: bool) -> Any:
        return self._run().run(functools.partial(self.session.rewind, turn, **flags))

    def fork(self, turn: int | None = None, **options: Any) -> Any:
        return self._run().run(functools.partial(self.session.fork, turn, **options))

    def cancel(self) -> None:
        self._run().run(self.session.cancel)

    def query(self, user_input: UserInput | Sequence[Any]) -> Iterator[Message]:
        """One turn as typed messages (`Session.query`), for a plain `for` loop."""
        runner = self._run()
        messages = runner.call(self.session.query, user_input)
        try:
            while True:
                try:
                    yield runner.run(messages.__anext__)
                except StopAsyncIteration:
                    return
        finally:
            runner.run(messages.aclose)

    def interrupt(self) -> None:
        self._run().run(self.session.interrupt)

    def set_model(self, model: str | None = None, *, thinking: bool | None = None) -> None:
        """Switch the model and/or thinking between turns (`Session.set_model`)."""
        self._run().run(functools.partial(self.session.set_model, model, thinking=thinking))

    def get_server_info(self) -> EngineInfo:
        return self.session.get_server_info()

    def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            if self._context is not None:
                self._context.__exit__(None, None, None)
        finally:
            runner.stop()


def query(
    prompt: UserInput | Sequence[Any], options: Options | None = None, /, **settings: Any
) -> Iterator[Message]:
    """Blocking `soulwire.sdk.query`: the same messages, for a plain `for` loop. The query runs
    in a background event loop; leaving the loop early (or Ctrl-C) cancels it and closes the
    engine."""
    opts = make_options(options, settings)  # checked here, in the caller's thread
    inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()

    async def produce() -> None:
        try:
            async with contextlib.aclosing(async_query(prompt, opts)) as messages:
                async for message in messages:
                    inbox.put(("message", message))
        except BaseException as exc:
            inbox.put(("error", exc))
            raise
        inbox.put(("end", None))

    runner = _Portal()
    future = runner.portal.start_task_soon(produce)
    try:
        while True:
            kind, value = inbox.get()
            if kind == "message":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        future.cancel()
        runner.stop()


prompt = query
"""The Kimi Agent SDK's name for `query`."""


class SyncSessions:
    """Blocking stored sessions: `SyncSessions(LocalSessions(...))` or
    `SyncSessions(ServerSessions(url, token))`, the same methods without `await`."""

    def __init__(self, catalog: LocalSessions | ServerSessions) -> None:
        self.catalog = catalog

    def _run(self, func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        runner = _Portal()
        try:
            return runner.run(functools.partial(func, *args, **kwargs))
        finally:
            runner.stop()

    def list(self) -> list[StoredSession]:
        return self._run(self.catalog.list)

    def history(self, session_id: str) -> list[HistoryTurn]:
        return self._run(self.catalog.history, session_id)

    def fork(self, session_id: str, *, turn: int | None = None, title: str | None = None) -> StoredSession:
        return self._run(self.catalog.fork, session_id, turn=turn, title=title)

    def delete(self, session_id: str) -> None:
        self._run(self.catalog.delete, session_id)

    def resume(self, session_id: str, **overrides: Any) -> SyncSession:
        """A SyncSession (not started: `with` it) on the stored session (local catalogs)."""
        if not isinstance(self.catalog, LocalSessions):
            raise TypeError("resume needs a LocalSessions catalogue (attach to a server's session over Wire)")
        return SyncSession(
            replace(self.catalog.options, session_id=session_id, continue_session=False), **overrides
        )


def ask(prompt: UserInput | Sequence[Any], **options: Any) -> str:
    """Blocking `soulwire.sdk.ask`: one prompt in a fresh session, the answer's final text.
    Works with or without an event loop already running in this thread."""
    runner = _Portal()
    try:
        return runner.run(functools.partial(ask_result, prompt, **options)).final_text
    finally:
        runner.stop()


__all__ = ["SyncSession", "SyncSessions", "SyncStep", "SyncTurn", "ask", "prompt", "query"]
