"""The Wire server: JSON-RPC 2.0 around one session's engine, over any message stream
(stdin/stdout for `--wire`; a WebSocket for the server).

The method table (`methods`) answers the client: `prompt` and `replay` run as tasks and
answer when they end; everything else is answered at once, so waiting for a client's
answer never blocks the event stream. A `cancel` that arrives before the turn's task has
started (even in the same write as its `prompt`) is honoured: the turn's cancel scope
exists from the moment the prompt is accepted."""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from soulwire.engine.client import ClientRequestError
from soulwire.llm.provider import Preloadable
from soulwire.runtime.builder import Runtime
from soulwire.runtime.warm import warm_turn_path
from soulwire.ui.wire.errors import rpc_error_for
from soulwire.ui.wire.handshake import (
    BASELINE_VERSION,
    ClientHello,
    hello_from_params,
    initialize_result,
)
from soulwire.ui.wire.replay import ReplayCounts, replay_records
from soulwire.wire import jsonrpc
from soulwire.wire.jsonrpc import CONTINUED_TURN, RPCError, busy_error, idle_error
from soulwire.wire.lines import LineReader
from soulwire.wire.messages import (
    EVENT_TYPES,
    INTRODUCED_IN,
    REQUEST_TYPES,
    SUBAGENT_FIELDS_SINCE,
    SubagentEvent,
    legacy_subagent_envelope,
    type_name,
)
from soulwire.wire.params import PromptParams
from soulwire.wire.peer import Method, Peer, PeerClosedError
from soulwire.wire.serde import event_line
from soulwire.wire.streams import FdStream, MessageStream
from soulwire.wire.types import WireModel

if TYPE_CHECKING:
    from types import ModuleType

    from soulwire.engine.soul import TurnOutcome
    from soulwire.wire.methods import (
        InitializeParams,
        SetBudgetParams,
        SetModelParams,
        SetPlanModeParams,
        SteerParams,
    )

SHUTDOWN_GRACE_S = 2.0
# Between a turn's last event and the prompt's answer (see _run_prompt).
ANSWER_GAP_S = 0.003


BUDGET_EVENT_NAMES = ("BudgetUpdate", "BudgetWarning", "BudgetExceeded")
"""Sent only to a client that declared `supports_budget` (wire/budget.py)."""


def _methods() -> ModuleType:
    """The models of the methods besides `prompt`, imported at their first use: a client
    whose `initialize` the lean start-up answered may never call them."""
    return importlib.import_module("soulwire.wire.methods")


def session_info(runtime: Runtime) -> dict[str, Any]:
    return {
        "id": runtime.session.id,
        "resumed": runtime.session.resumed,
        "work_dir": str(runtime.options.work_dir),
    }


class WireServer:
    """Serves one client of one session's runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.peer: Peer | None = None
        self._busy = False
        self._prompting = False
        self._scope: anyio.CancelScope | None = None
        self._idle: anyio.Event | None = None
        """Set when the running job ends (a new one per job): a cancel receipt waits for it."""
        self._closing = False
        self._blocked: frozenset[type] = frozenset()
        self._blocked_names: frozenset[str] = frozenset()
        self._steered = False
        """The client has sent `steer`: it knows steering, so it gets SteerInput events."""
        self.hello = ClientHello()
        self._write: Callable[[bytes], None] = _drop  # the peer's `send` once serving: the event hot path
        self._apply_version(None)
        runtime.attach_client(self)
        self._unsubscribe_events = runtime.bus.subscribe(self._send_event)

    @property
    def busy(self) -> bool:
        """A job (turn, replay, rewind, fork) is running: another is refused."""
        return self._busy

    @busy.setter
    def busy(self, value: bool) -> None:
        self._busy = value

    def methods(self) -> dict[str, Method]:
        """The client → server method table (params validated strictly by their models)."""
        from soulwire.ui.wire.checkpoints import CheckpointMethods

        return {
            **CheckpointMethods(self).table(),
            "initialize": Method(self._on_initialize, lambda: _methods().InitializeParams),
            "prompt": Method(self._on_prompt, PromptParams),
            "steer": Method(self._on_steer, lambda: _methods().SteerParams),
            "set_plan_mode": Method(self._on_set_plan_mode, lambda: _methods().SetPlanModeParams),
            "set_budget": Method(self._on_set_budget, lambda: _methods().SetBudgetParams),
            "set_model": Method(self._on_set_model, lambda: _methods().SetModelParams),
            "cancel": Method(self._on_cancel),
            "replay": Method(self._on_replay),
        }

    # -- outbound -----------------------------------------------------------
    def _apply_version(self, hello: ClientHello | None) -> None:
        """Types newer than what the client declared (and the 1.3 baseline) are not sent.
        Capabilities count too: QuestionRequest goes only to a client that declared
        `supports_question`, and a client that subscribed hooks knows HookRequest.
        SteerInput only ever answers a `steer`: it goes to a client that declared 1.5 or
        newer (even one that merely echoes our version) and to any client that steers."""
        ceiling: tuple[int, int] = hello.event_ceiling() if hello else BASELINE_VERSION
        self._legacy_subagent_events = ceiling < SUBAGENT_FIELDS_SINCE
        names = {n for n, v in INTRODUCED_IN.items() if v > ceiling}
        declared = hello.protocol_version if hello else BASELINE_VERSION
        if self._steered or declared >= INTRODUCED_IN["SteerInput"]:
            names.discard("SteerInput")
        if hello is not None:
            if hello.supports_question:
                names.discard("QuestionRequest")
            else:
                names.add("QuestionRequest")
            if hello.hooks:
                names.discard("HookRequest")
        if hello is None or not hello.supports_checkpoints:
            names.update(("CheckpointTaken", "OverlayPending", "OverlayApplied"))
        if hello is None or not hello.supports_budget:
            names.update(BUDGET_EVENT_NAMES)
        if hello is None or not hello.supports_model_switch:
            names.add("ModelChanged")
        self._blocked_names = frozenset(names)
        self._blocked = frozenset(c for n, c in {**EVENT_TYPES, **REQUEST_TYPES}.items() if n in names)

    def take_events(self) -> Callable[[WireModel], None]:
        """Stop taking the bus's events and return the sink that sends one as this server
        would: for a host that frames the hot-path events itself (the server's hub numbers
        streamed parts in one step) and hands this sink the rest."""
        self._unsubscribe_events()
        return self._send_event

    def _send_event(self, message: WireModel) -> None:
        if type(message) in self._blocked:
            return
        if type(message) is SubagentEvent:
            self._send_subagent_event(message)
            return
        self._write(event_line(message))

    def _send_subagent_event(self, message: SubagentEvent) -> None:
        """A sub-agent's event, in the shape the client's version knows; an inner event the
        client does not know is not sent at all."""
        if message.event.get("type") in self._blocked_names:
            return
        if not self._legacy_subagent_events:
            self._write(event_line(message))
            return
        legacy = legacy_subagent_envelope(message.parent_tool_call_id, message.event)
        body = {"jsonrpc": "2.0", "method": "event", "params": legacy}
        self._write((jsonrpc.encode(body) + "\n").encode())

    async def request(self, message: WireModel) -> Any:
        """Send a request (JSON-RPC id = payload id) and wait for the client's answer."""
        name = type_name(message)
        peer = self.peer
        if self._closing or peer is None or peer.closed or peer.stream.broken:
            raise ClientRequestError("client disconnected", closed=True)
        if name in self._blocked_names:
            raise ClientRequestError(f"the client does not support {name}", unsupported=True)
        params = {"type": name, "payload": message.model_dump(mode="json")}
        try:
            return await peer.request("request", params, request_id=str(getattr(message, "id", "")))
        except PeerClosedError:
            raise ClientRequestError("client disconnected", closed=True) from None
        except RPCError as error:
            raise ClientRequestError(error.message or "client error") from None

    # -- methods ------------------------------------------------------------
    def apply_hello(self, hello: ClientHello) -> None:
        """Adopt what the client declared in `initialize` (also the one the start-up path
        answered before the engine was loaded)."""
        self.hello = hello
        self._apply_version(hello)
        self.runtime.apply_client(
            supports_question=hello.supports_question,
            supports_plan_mode=hello.supports_plan_mode,
            hook_subscriptions=hello.hooks,
        )

    def _on_initialize(self, params: InitializeParams, _id: str) -> dict[str, Any]:
        """Negotiate the protocol version, register the client's external tools and hook
        subscriptions; answers with the engine's info, slash commands and rejected tools."""
        hello = hello_from_params(params)
        if self._busy:
            raise busy_error()
        if params.prices is not None or params.budget is not None:  # refused before anything is adopted
            self._update_budget(params.budget, params.prices)
        self.apply_hello(hello)
        external = (
            self.runtime.register_external_tools(hello.external_tools) if hello.external_tools else None
        )
        return initialize_result(
            slash_commands=self.runtime.soul.slash_commands.describe(),
            session=session_info(self.runtime),
            external=external,
            hooks=self.runtime.hooks.describe(),
            extensions=self._extensions(hello),
            budget=self._budget_report() if hello.supports_budget else None,
        )

    def _extensions(self, hello: ClientHello) -> dict[str, bool]:
        """The negotiated capabilities the engine answers (only those the client declared)."""
        extensions: dict[str, bool] = {}
        if hello.supports_checkpoints:
            extensions["supports_checkpoints"] = self.runtime.soul.workspace is not None
            extensions["supports_overlay"] = self.runtime.soul.overlay is not None
        if hello.supports_model_switch:
            extensions["supports_model_switch"] = True
        return extensions

    def _on_prompt(self, params: PromptParams, _id: str) -> Any:
        """Run one turn with the user's input (text or content parts); events stream while it
        runs, the result says how it ended."""
        if self._busy:
            raise busy_error()
        # The scope exists before the task starts: a cancel in the same write lands.
        scope = anyio.CancelScope()
        self._scope = scope
        self._idle = anyio.Event()
        self._busy = True
        self._prompting = True  # from now on a steer belongs to this turn
        return self._run_prompt(scope, params.user_input)

    def _on_steer(self, params: SteerParams, _id: str) -> dict[str, str]:
        """Add input to the running turn: the model sees it at its next step."""
        if not self._prompting:
            raise idle_error()
        self.runtime.soul.steer(params.user_input)
        if not self._steered:
            self._steered = True
            self._apply_version(self.hello)
        return {"status": "steered"}

    def _on_set_plan_mode(self, params: SetPlanModeParams, _id: str) -> dict[str, Any]:
        """Turn plan mode on or off (the model may only read and plan while it is on)."""
        return {"status": "ok", "plan_mode": self.runtime.set_plan_mode(params.enabled)}

    def _on_set_model(self, params: SetModelParams, _id: str) -> dict[str, Any]:
        """Switch the model and/or thinking between turns (negotiated: see
        `capabilities.supports_model_switch` of `initialize`); without either, the current
        state. Every client that negotiated it gets `ModelChanged`."""
        from soulwire.runtime.model_switch import ModelSwitchError, switch_model

        if not self.hello.supports_model_switch:
            raise RPCError(jsonrpc.METHOD_NOT_FOUND, "Unexpected method received: set_model")
        if self._busy and (params.model is not None or params.thinking is not None):
            raise busy_error()
        try:
            info = switch_model(self.runtime, params.model, params.thinking)
        except ModelSwitchError as exc:
            raise RPCError(jsonrpc.INVALID_PARAMS, f"set_model: {exc}") from None
        return {"status": "ok", **info.model_dump(mode="json")}

    def _on_set_budget(self, params: SetBudgetParams, _id: str) -> dict[str, Any]:
        """Set or raise the session's limits (only the fields given change); answers with the
        budget and what each scope has spent. A stopped turn continues with the next prompt."""
        self._update_budget(params)
        return {"status": "ok", **self._budget_report()}

    def _update_budget(self, update: Any, prices: dict[str, Any] | None = None) -> None:
        from soulwire.engine.budget import BudgetError

        try:
            self.runtime.update_budget(update, prices)
        except (BudgetError, ValueError) as exc:
            raise RPCError(jsonrpc.INVALID_PARAMS, f"Invalid budget: {exc}") from None

    def _budget_report(self) -> dict[str, Any]:
        ledger = self.runtime.ledger
        return ledger.report().model_dump(mode="json") if ledger is not None else {}

    def _on_cancel(self, params: Any, _id: str) -> Any:
        """Cancel the running turn; its prompt request answers with status `cancelled`. With
        `{"receipt": true}` the answer waits for the wind-down and says what was stopped."""
        if self._scope is None:
            raise idle_error()
        if not (isinstance(params, dict) and params.get("receipt") is True):
            self._scope.cancel()
            return {}  # today's Wire: answered at once
        from soulwire.ui.wire import receipt

        before = receipt.snapshot(self.runtime)
        self._scope.cancel()
        return self._receipt_after(before)

    async def _receipt_after(self, before: Any) -> dict[str, Any]:
        """The cancel's answer once the job has wound down (ui/wire/receipt.py)."""
        from soulwire.ui.wire import receipt

        if self._idle is not None:
            await self._idle.wait()
        return await receipt.receipt(before, self.runtime)

    def _on_replay(self, _params: Any, _id: str) -> Any:
        """Stream the session's recorded events again (for a client that re-attaches), then answer."""
        if self._busy:
            raise busy_error()
        scope = anyio.CancelScope()
        self._scope = scope
        self._idle = anyio.Event()
        self._busy = True
        return self._run_replay(scope)

    def _start_continuation(self, peer: Peer) -> None:
        """Continue the turn a dead process left waiting for approvals (the runtime's
        `continuation`, engine/recovery.py) as a job, as a prompt runs: a prompt is refused
        meanwhile, `cancel` and `steer` act on it. Its answer is written as the answer to
        the request `CONTINUED_TURN` nobody here sent (the server's hub gives it to the client
        whose prompt that turn was: server/takeover.py)."""
        plan, self.runtime.continuation = self.runtime.continuation, None
        if plan is None:
            return
        scope = anyio.CancelScope()
        self._scope = scope
        self._idle = anyio.Event()
        self._busy = True
        self._prompting = True

        async def run() -> None:
            try:
                result = await self._run_turn(scope, lambda: self.runtime.soul.continue_turn(plan))
                line = jsonrpc.response_line(CONTINUED_TURN, result)
            except Exception as exc:  # what a prompt's answer would have said
                line = jsonrpc.error_line(CONTINUED_TURN, rpc_error_for(exc))
            peer.send(line)

        peer.start_soon(run)

    # -- jobs ---------------------------------------------------------------
    async def _run_prompt(self, scope: anyio.CancelScope, user_input: Any) -> dict[str, Any]:
        return await self._run_turn(scope, lambda: self.runtime.soul.run(user_input))

    async def _run_turn(
        self, scope: anyio.CancelScope, turn: Callable[[], Awaitable[TurnOutcome]]
    ) -> dict[str, Any]:
        idle = self._idle  # (a prompt taken during the gap below makes its own)
        try:
            result = await self._turn_result(scope, turn)
            # The published Go SDK reads events and answers on two paths; when the answer
            # arrives while the turn's last event is still being handled, it sleeps a whole
            # second before it ends the turn (its waitForDataExchange). A few milliseconds
            # between the last event and the answer spare its users that second on most turns
            # (bench/go_sdk_cancel.py, RESULTS §23). The session is not busy meanwhile (a
            # prompt sent on TurnEnd is taken); a `cancel` is answered after this answer, and
            # a shutdown does not cut the gap short (the answer would be lost).
            with anyio.CancelScope(shield=True):
                await anyio.sleep(ANSWER_GAP_S)
            return result
        finally:
            if idle is not None:
                idle.set()

    async def _turn_result(
        self, scope: anyio.CancelScope, turn: Callable[[], Awaitable[TurnOutcome]]
    ) -> dict[str, Any]:
        try:
            outcome = None
            with scope:
                outcome = await turn()
            if outcome is None:
                return {"status": "cancelled"}
            status = outcome.status
            if status == "budget_exceeded" and not self.hello.supports_budget:
                status = "cancelled"  # what a client that knows no budgets already handles
            result: dict[str, Any] = {"status": status}
            if outcome.steps is not None:
                result["steps"] = outcome.steps
            return result
        finally:
            self._scope = None
            self._busy = False
            self._prompting = False

    async def _run_replay(self, scope: anyio.CancelScope) -> dict[str, Any]:
        counts = ReplayCounts()
        try:
            with scope:
                records = self.runtime.session.store.wire_records_verbatim()
                await replay_records(
                    records,
                    self._write,
                    hidden=self._blocked_names,
                    counts=counts,
                    legacy_subagents=self._legacy_subagent_events,
                )
            status = "cancelled" if scope.cancelled_caught else "finished"
            return {"status": status, "events": counts.events, "requests": counts.requests}
        except Exception:
            raise RPCError(jsonrpc.INTERNAL_ERROR, "Replay failed") from None
        finally:
            self._scope = None
            self._busy = False
            if self._idle is not None:
                self._idle.set()

    # -- lifecycle ----------------------------------------------------------
    async def serve(self, stream: MessageStream, *, signals: bool = True) -> None:
        """Serve until the input ends (or SIGTERM/SIGINT, unless `signals` is off because the
        process hosts many sessions), then wind down the running turn."""
        async with (
            self.runtime.running(),
            Peer(stream, methods=self.methods(), error_for=rpc_error_for) as peer,
        ):
            self.peer = peer
            self._write = peer.send
            self._start_continuation(peer)
            if signals:
                peer.start_soon(self._watch_signals, peer)
            peer.start_soon(self._preload_provider)
            await peer.input_closed.wait()
            self._shutdown(peer)
            with anyio.move_on_after(SHUTDOWN_GRACE_S):
                while self._busy:
                    await anyio.sleep(0.005)
        await stream.drain()

    async def _preload_provider(self) -> None:
        """Set up a real provider's SDK (its import and its client) in a worker thread while
        the client composes its first prompt, instead of during that prompt. A prompt that
        comes first waits for the same work (the import lock, the client's lock)."""
        await anyio.to_thread.run_sync(preload_provider, self.runtime, abandon_on_cancel=True)

    async def _watch_signals(self, peer: Peer) -> None:
        """SIGTERM and SIGINT end the input, as EOF does."""
        try:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    peer.input_closed.set()
                    return
        except (NotImplementedError, RuntimeError, ValueError):
            return  # no signal handling here (not the main thread, or not supported)

    def _shutdown(self, peer: Peer) -> None:
        """Input closed: cancel the running job and void every request still waiting."""
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()
        peer.close(PeerClosedError("client disconnected"))


def _drop(line: bytes) -> None:
    """Where events go before a client is connected: nowhere."""


def preload_provider(runtime: Runtime) -> None:
    """Import the session's real provider SDK and build its client (once per adapter: a
    second call returns at once). A provider that cannot be set up is left to its first
    request, which reports why."""
    model = runtime.soul.model
    provider = model.provider if model is not None else None
    if isinstance(provider, Preloadable):
        try:
            provider.preload()
        except Exception:
            pass  # the first request tries again and reports the error to the client


def prewarm(runtime: Runtime) -> None:
    """Do now what the first prompt would otherwise pay for: pydantic builds validators and
    serializers on first use and anyio loads its event-loop backend on first run."""
    importlib.import_module("anyio._backends._asyncio")
    # The method table validates strictly with this model: build its validator now. (Not
    # SteerParams: a steer comes mid-turn, where building it costs ~1 ms once, off start-up.)
    PromptParams.model_validate({"user_input": [{"type": "text", "text": "x"}]}, strict=True)
    warm_turn_path(event_line)


def run_server(runtime: Runtime, reader: LineReader, hello: ClientHello | None) -> int:
    """Serve stdin/stdout to completion on the asyncio backend; returns the exit code."""

    async def main() -> None:
        server = WireServer(runtime)
        if hello is not None:
            server.apply_hello(hello)
        await server.serve(FdStream(reader, 1))

    try:
        anyio.run(main)
    finally:
        runtime.close()
        sys.stderr.flush()
    return 0
