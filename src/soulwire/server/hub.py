"""One live session shared by many connections.

`LiveSession` is the message stream one session's `WireServer` serves, multiplexed over every
attached client: what the engine sends is numbered (`seq`) into a bounded ring that clients
of the extensions read at their pace (server/ring.py); clients of today's Wire get copies.
What clients send is routed back — the controller's requests and answers go to the engine
(ids rewritten so two clients never collide), observers only watch. Requests to the client
carry a deadline and are answered with the declared default when it passes, so a turn never
hangs on a client that went away; they wait for a controller meanwhile, and one that
attaches gets them again."""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

import anyio
import anyio.abc
from pydantic import BaseModel

from soulwire.runtime.builder import NOT_RECORDED, Runtime
from soulwire.server.answers import (
    describe,
    expired_answer,
    read_blob,
    request_line,
    resolved_notice,
    rules_answer,
)
from soulwire.server.audit import Action, prompt_detail
from soulwire.server.audit import entry as audit_entry
from soulwire.server.client import Client
from soulwire.server.messages import (
    AttachParams,
    BlobReadParams,
    Forwarded,
    HubSettings,
    Mode,
    OnTimeout,
    Pending,
    line_of,
    validated,
)
from soulwire.server.negotiate import initialize_reply, negotiate, serve_info
from soulwire.server.protocol import (
    AttachResult,
    Loaded,
    RequestMembers,
    RequestsPendingResult,
    ResolvedBy,
    RoleChanged,
    members_of,
    params_of,
)
from soulwire.server.record_stream import STORE_EPOCH, backlog, new_ring, recorded_line, renumbered
from soulwire.server.ring import EVENT_HEAD, insert_members
from soulwire.server.takeover import TakenTurn
from soulwire.sessions.pg_gate import CommitGate, Outcome
from soulwire.sessions.store import StoreUnavailable
from soulwire.ui.wire.errors import store_unavailable
from soulwire.wire import jsonrpc
from soulwire.wire.jsonrpc import CONTINUED_TURN, INVALID_STATE, RPCError, error_line, response_line
from soulwire.wire.serde import event_line, numbered_part_line
from soulwire.wire.types import WireModel

log = logging.getLogger("soulwire.server")
MAX_ORPHAN_KEYS = 1024
SLOW_CHECK_EVENTS = 256
"""A reader this many messages behind at a flush has its unread bytes weighed."""


class LiveSession:
    """The message stream of one session's WireServer, shared by its attached clients.

    On a shared store (`serve --store`) the numbered messages are the session's record: each
    one as it is committed, under the store's `seq`, so that a client may re-attach to any
    replica from its last `seq` (server/follow.py serves the same numbering to observers on
    the replicas that do not run the session). Streamed parts are recorded at least every
    `SHARED_RECORD_WINDOW_S` while they grow. What is not recorded — the raw stream, approval
    requests, notices — reaches the connected clients unnumbered."""

    def __init__(
        self, runtime: Runtime, settings: HubSettings, on_empty: Callable[[LiveSession], None]
    ) -> None:
        from soulwire.ui.wire.server import WireServer  # the one place the server uses ui.wire

        self.runtime = runtime
        self.id = runtime.session.id
        self.settings = settings
        self.deadline_ms = settings.deadline_ms
        self.on_timeout: OnTimeout = settings.on_timeout
        stores = runtime.options.stores
        self.by_store = stores is not None and stores.shared
        """Numbered by the shared store's `seq` (see the class docstring)."""
        self.epoch = STORE_EPOCH if self.by_store else secrets.token_hex(8)
        self.ring = new_ring(settings)
        self.clients: dict[int, Client] = {}
        self._plain: tuple[Client, ...] = ()
        """The clients of today's Wire (they get copies of events and requests; the others
        read the ring), rebuilt when one comes, goes or negotiates (not once per event)."""
        self.controller: Client | None = None
        self.pending: dict[str, Pending] = {}
        self._forwarded: dict[str, Forwarded] = {}
        self._orphans: dict[str, list[bytes]] = {}
        """Answers that reached a dropped connection, by its client key, until it re-attaches."""
        self._counter = 0
        self._inbox: deque[bytes] = deque()
        self._inbox_ready = anyio.Event()
        self._replaying_for: Client | None = None
        self.initialize_result: dict[str, Any] | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._on_empty = on_empty
        self.closed = False
        self.signals = False
        """SIGTERM/SIGINT end the session (a process with one session: stdio)."""
        self.finished = anyio.Event()
        self.loaded: dict[str, Any] = {"session_id": self.id}
        """What opening the session loaded (id, records, content hash): a resume proves it."""
        self.taken = TakenTurn(runtime)
        """The turn a dead process left open, as this run answers it (server/takeover.py)."""
        if self.taken.continuing:
            self._forwarded[CONTINUED_TURN] = Forwarded(None, None, "prompt")
        self.server = WireServer(runtime)
        self._send_event = self.server.take_events()
        runtime.bus.subscribe(self._event)
        self._call_soon: Callable[[Callable[[], None]], object] | None = None  # asyncio's
        self._direct = False
        """Streamed parts go straight into the ring (no replay under way, loop known)."""
        self._flush_due = False
        self.refusal: RPCError | None = None
        """Why the session takes no more requests for its engine (its store became
        unreachable): each is answered with this error; it is closed once the store is back."""
        self.close_code: tuple[int, str] = (1001, "the session was closed")
        """How its clients' connections are closed when it ends (a handover says re-attach)."""
        self.opened_at = 0
        """The store's last seq when the session was opened here (see `backlog`)."""
        self._loop_thread = 0
        """The event loop's thread, and its threadsafe `call_soon` (records written elsewhere)."""
        self._call_soon_threadsafe: Callable[[Callable[[], None]], object] = _unset
        self._committed: deque[tuple[int, str]] = deque()
        """Messages the store committed, not yet numbered into the ring (`_recorded`)."""
        self._held: deque[tuple[int, bytes]] = deque()
        """What the engine sent after appends the store had not committed yet, with how many
        it waits for (`send`): sent on in order as the commits come in (`_release`)."""
        self._releasing = False
        self._wake_due = False
        self._commits_ready: anyio.Event | None = None
        self._lost: str | None = None
        """While a held message goes on failed (what it waited for was lost): why."""
        self._lost_reason = "the session store lost what it had not committed"
        self._gate: CommitGate | None = None
        self._take_failure: Callable[[], None] = lambda: None
        if self.by_store:
            from soulwire.sessions.postgres import PostgresSessionStore

            store = runtime.session.store
            assert isinstance(store, PostgresSessionStore)  # (the one shared store there is)
            self._gate = CommitGate(self._recorded, self._wake, self._store_lost, self._store_failing)
            store.set_gate(self._gate)
            self._take_failure = store.take_failure

    def preload(self, rows: list[tuple[int, str]], last_seq: int) -> None:
        """Start the ring with the newest stored messages (a shared store: what a client
        re-attaching from another replica's `seq` missed is here)."""
        self.ring.start_after(rows[0][0] - 1 if rows else last_seq)
        for seq, text in rows:
            self.ring.add(recorded_line(seq, text))
        self.opened_at = last_seq

    def _recorded(self, seq: int, text: str) -> None:
        """A wire message committed to the shared store (called from the store's writer
        thread): queued in order, numbered into the ring on the loop (`_wake`)."""
        self._committed.append((seq, text))

    def _wake(self) -> None:
        """Appends were committed (the writer's thread): number them and send on what waited
        for them, on the loop (`_take_commits`), once for all that came meanwhile."""
        if self._commits_ready is None:  # (not running yet: numbered by the first message sent)
            return
        if not self._wake_due:
            self._wake_due = True
            self._call_soon_threadsafe(self._wake_on_loop)

    def _wake_on_loop(self) -> None:
        # The event is read here, on the loop, never on the writer's thread: read there, it
        # could be the one `_take_commits` had just replaced, and the wake was lost — with the
        # flag left set, every later one too, until the engine happened to send something.
        self._wake_due = False
        if self._commits_ready is not None:
            self._commits_ready.set()

    async def _take_commits(self) -> None:
        """The session's task that numbers what the store committed (a task, not a loop
        callback: a request let go opens its deadline's cancel scope)."""
        ready = self._commits_ready
        assert ready is not None  # (made before this task starts)
        while True:
            await ready.wait()
            ready = self._commits_ready = anyio.Event()
            self._number_committed()

    def _number_committed(self) -> None:
        """Number the committed messages queued so far, in order. Also run before the hub
        delivers anything unnumbered (an answer, an unrecorded event): a prompt's answer must
        not overtake the TurnEnd committed before it."""
        if not self._committed:
            if self._held:
                self._release()
                self.flush()
            return
        while self._committed:
            seq, text = self._committed.popleft()
            self.ring = renumbered(self.ring, seq, self.settings, self.clients.values())
            line = recorded_line(seq, text)
            self.ring.add(line)
            if self.pending and line.find(b'"type": "TurnEnd"', 0, 80) >= 0:
                self._drop_pending("turn_end")  # (the raw stream does not pass `send` then)
        if self._held:
            self._release()
        self.flush()

    def _release(self) -> None:
        """Send on the held messages whose wait is over, in order: those whose appends were
        committed, and, failed, those whose appends were lost (`_send_now`)."""
        if self._releasing or self._gate is None:
            return  # (a message let go numbered more: the loop below goes on with it)
        self._releasing = True
        try:
            held, gate = self._held, self._gate
            while held:
                outcome = gate.outcome(held[0][0])
                if outcome == "pending":
                    break
                self._send_gated(held.popleft()[1], outcome)
        finally:
            self._releasing = False

    def _send_gated(self, message: bytes, outcome: Outcome) -> None:
        if outcome == "lost":
            self._lost = self._lost_reason
            try:
                self._send_now(message)
            finally:
                self._lost = None
        else:
            self._send_now(message)

    def _store_failing(self) -> None:
        """Some of the store's appends failed (called from its writer's thread): taken on the
        loop, where the engine's next call would take it otherwise."""
        if self._loop_thread and not self.closed:
            self._call_soon_threadsafe(self._take_failure)

    def _store_lost(self, failure: Exception) -> None:
        """The store lost what it had not committed (told on the session's thread): what waited
        for it goes on now, failed — an answer becomes the store's error, a request is not asked
        (the engine gets the error) — so nothing is acted on that was not recorded."""
        self._lost_reason = str(failure)
        self._wake()

    @property
    def seq(self) -> int:
        """The number of the last message published."""
        return self.ring.seq

    # -- the engine's side: its events, and the MessageStream its peer talks through ----
    def _event(self, message: WireModel) -> None:
        """The bus's raw sink. Streamed text and thinking — nearly every event — are framed
        with their `seq` in one step, straight into the ring; the rest goes the way of today's
        Wire (blocked types, legacy shapes), through the peer and `send`."""
        if self._direct:
            line = numbered_part_line(message, self.ring.seq + 1)
            if line is not None:
                self.ring.add(line)
                if self._plain:  # clients of today's Wire get the line without `seq`
                    plain = event_line(message)
                    for client in self._plain:
                        client.deliver(plain)
                if not self._flush_due:
                    self._flush_due = True
                    self._call_soon(self._flush_pass)  # type: ignore[misc]  (set with _direct)
                return
        elif self.by_store and not self._plain and not isinstance(message, NOT_RECORDED):
            return  # every client reads the record (`_recorded`)
        self._send_event(message)

    def _flush_pass(self) -> None:
        self._flush_due = False
        self.flush()

    def _update_direct(self) -> None:
        self._direct = self._call_soon is not None and self._replaying_for is None and not self.by_store

    async def receive(self) -> bytes:
        while not self._inbox:
            if self.closed:
                raise anyio.EndOfStream
            await self._inbox_ready.wait()
            self._inbox_ready = anyio.Event()
        return self._inbox.popleft()

    def _to_engine(self, line: bytes) -> None:
        self._inbox.append(line.rstrip(b"\n"))
        self._inbox_ready.set()

    @property
    def broken(self) -> bool:
        return self.closed  # no client is not broken: requests wait for a controller

    async def drain(self) -> None:
        self.flush()

    def flush(self) -> None:
        """Wake the writers of the clients that have new messages to read: called once per
        event-loop pass in which the engine sent something (the peer schedules it), and
        after the hub's own messages. A reader too far behind is dropped here."""
        ring = self.ring
        seq = ring.seq
        for client in ring.readers:
            behind = seq - client.last_sent
            if behind:
                client.wake()
                if (
                    behind > SLOW_CHECK_EVENTS
                    and not client.catching_up
                    and ring.bytes > client.max_queued_bytes
                    and ring.unread_bytes(client) > client.max_queued_bytes
                ):
                    client.too_slow()

    async def aclose(self) -> None:
        self.close()

    def send(self, message: bytes) -> None:
        """A message from the engine: numbered and fanned out, or routed to its requester. On
        a shared store, one that follows a message the store has not committed yet waits for
        that commit (`_held`): no client sees an answer or a request before the record it
        follows is durable, nor out of its order."""
        self._number_committed()
        gate = self._gate
        if gate is not None:
            appends = gate.submitted
            outcome = gate.outcome(appends)
            if self._held or outcome == "pending":
                self._held.append((appends, message))
            else:
                self._send_gated(message, outcome)
            return
        self._send_now(message)

    def _send_now(self, message: bytes) -> None:
        if message.startswith(EVENT_HEAD):
            if self._replaying_for is not None:
                self._replaying_for.deliver(message)
                return
            if not self.by_store:
                self.ring.publish(message)  # the readers' writers are woken by `flush`
            elif any(message.find(head, 0, 80) >= 0 for head in _UNRECORDED_HEADS):
                for client in self.clients.values():
                    if client.ring is not None:
                        client.deliver(message)
                self._relay(message)
            for client in self._plain:
                client.deliver(message)
            if self.pending and message.find(b'"type":"TurnEnd"', 0, 80) >= 0:
                self._drop_pending("turn_end")
            return
        body = json.loads(message)
        if body.get("method") == "request" and isinstance(body.get("id"), str):
            if self._lost is not None:  # never asked: what it follows was not recorded
                self._to_engine(error_line(body["id"], store_unavailable(self._lost)))
                return
            self._open_request(body, message)
        elif "method" not in body:
            if self._lost is not None and "result" in body:  # what it reports was not recorded
                del body["result"]
                body["error"] = store_unavailable(self._lost).to_json()
            self._route_response(body)
        else:
            self._publish("event", message)

    # -- lifecycle ----------------------------------------------------------------------
    async def run(self) -> None:
        """Serve the session until `close`, then wind the runtime down."""
        try:
            self._call_soon = _call_soon()
            self._call_soon_threadsafe = _call_soon(threadsafe=True)
            self._loop_thread = threading.get_ident()
            self._update_direct()
            self._number_committed()  # (anything committed before the loop was known)
            async with anyio.create_task_group() as group:
                self._group = group
                if self._gate is not None:
                    self._commits_ready = anyio.Event()  # (set in the task: none is missed)
                    group.start_soon(self._take_commits)
                await self.server.serve(self, signals=self.signals)
                group.cancel_scope.cancel()
        finally:
            self._group = None
            self.closed = True
            for client in list(self.clients.values()):
                client.close(*self.close_code)
            try:
                self.runtime.close()
            finally:
                self.finished.set()

    def close(self) -> None:
        """End the session's input: the running turn is cancelled and the runtime closed."""
        self.closed = True
        self._inbox_ready.set()

    @property
    def busy(self) -> bool:
        return bool(getattr(self.server, "_busy", False))

    # -- clients ------------------------------------------------------------------------
    def attach(self, client: Client, params: AttachParams) -> dict[str, Any]:
        """Attach (or re-attach) a client: role, then exactly the events it missed."""
        if self.closed:
            raise RPCError(INVALID_STATE, "the session is closing", {"reason": "closing"})
        is_new = client.number not in self.clients
        if is_new or client.ring is None:
            client.last_sent = self.seq  # live from now (a client of today's Wire got it all)
        mode = params.mode or client.mode
        if params.mode is None and is_new:
            mode = "controller" if self.controller is None and not client.read_only else "observer"
        self._set_mode(client, mode, take=params.take)
        if params.client_key is not None:
            self._adopt(client, params.client_key)
        self.clients[client.number] = client
        client.extended = True
        start, complete, sent = backlog(
            self.ring, self.epoch, params, client, is_new=is_new, opened_at=self.opened_at
        )
        self.regroup()
        for line in self._orphans.pop(client.key, []) if client.key else []:
            client.deliver(line)  # after the backlog: answers to requests in it
        if params.prompt_id is not None:
            self.taken.claim(client, params.prompt_id)
        resent = self._resend_pending(client, up_to=start) if client.mode == "controller" else []
        result = AttachResult(
            session_id=self.id,
            epoch=self.epoch,
            mode=client.mode,
            last_seq=self.seq,
            complete=complete,
            sent=sent,
            pending=resent,
            loaded=Loaded.model_validate(self.loaded),
        )
        return params_of(result)

    def _adopt(self, client: Client, key: str) -> None:
        """The connection speaks for a client key: requests sent by an earlier connection
        with that key are answered here."""
        client.key = key
        for forwarded in self._forwarded.values():
            old = forwarded.client
            if old is not None and old is not client and old.key == key:
                forwarded.client = client
                if self._replaying_for is old:
                    self._replaying_for = client

    def connect(self, client: Client) -> None:
        """A connection without the extensions: today's Wire, live from now, controller if free."""
        self.clients[client.number] = client
        self.regroup()
        client.last_sent = self.seq
        self._set_mode(client, "controller" if self.controller is None else "observer", take=False)
        if client is self.controller:
            self._resend_pending(client)

    def regroup(self) -> None:
        """Who reads the ring and who gets copies (a client came, went or negotiated)."""
        clients = self.clients.values()
        self._plain = tuple(c for c in clients if c.ring is None)
        self.ring.readers = tuple(c for c in clients if c.ring is not None)
        self._update_direct()

    def detach(self, client: Client) -> None:
        self.clients.pop(client.number, None)
        if self._replaying_for is client:
            self._replaying_for = None
        self.regroup()
        if self.controller is client:
            self.controller = None
            self._notice("role/changed", RoleChanged(controller=None, reason="disconnected"))
        if not self.clients:
            self._on_empty(self)

    def _set_mode(self, client: Client, mode: Mode, *, take: bool) -> None:
        if mode == "observer":
            if self.controller is client:
                self.controller = None
                self._notice("role/changed", RoleChanged(controller=None, reason="released"))
            client.mode = "observer"
            return
        if client.read_only:
            if client.user is not None:
                raise forbidden(client.user, "controlling the session")
            raise RPCError(
                INVALID_STATE, "an observer token cannot control the session", {"reason": "read_only"}
            )
        current = self.controller
        if current is not None and current is not client:
            if not take:
                raise RPCError(
                    INVALID_STATE,
                    "the session already has a controller; attach as observer or take over with take=true",
                    {"reason": "controller_taken"},
                )
            current.mode = "observer"
        client.mode = "controller"
        self.controller = client
        if current is not client:
            reason = "taken" if current else "free"
            self._notice("role/changed", RoleChanged(controller=client.number, reason=reason))

    def _resend_pending(self, client: Client, *, up_to: int | None = None) -> list[str]:
        """Open requests the controller may not have, sent again in their order (when it
        attaches: those numbered up to `up_to`, before the backlog that has the later ones)."""
        resent: list[str] = []
        deliver = client.deliver if up_to is None else client.deliver_first
        for pending in list(self.pending.values()):
            if up_to is not None and pending.seq > up_to:
                continue
            deliver(request_line(pending, client.extended))
            resent.append(pending.id)
        return resent

    # -- inbound from clients ---------------------------------------------------------------
    def handle(self, client: Client, text: str | bytes) -> None:
        """One message from a client."""
        inbound = jsonrpc.classify(text)
        if inbound.kind == "invalid":
            assert inbound.error is not None
            client.deliver(error_line(None, inbound.error))
        elif inbound.kind == "response":
            self._on_client_answer(client, inbound.id, inbound.raw)
        elif inbound.kind == "request":
            assert inbound.method is not None
            try:
                self._on_client_request(client, inbound.id, inbound.method, inbound.params)
            except RPCError as error:
                client.deliver(error_line(inbound.id, error))
        elif inbound.kind == "notification" and client is self.controller:
            self._to_engine(line_of(inbound.raw))

    def _on_client_request(self, client: Client, request_id: str, method: str, params: Any) -> None:
        if method == "attach":
            result = self.attach(client, validated(method, AttachParams, params))
            client.deliver_first(response_line(request_id, result))  # before the backlog
            return
        if client.read_only and client.user is not None and method not in _WATCHING:
            raise forbidden(client.user, method)
        if method.startswith("approvals/rules/"):
            answer, changed = rules_answer(self.runtime, method, params, controller=client is self.controller)
            if changed:
                action = "rule_add" if method.endswith("/add") else "rule_remove"
                self._audit(
                    client, action, {"rule": params.get("rule") if isinstance(params, dict) else None}
                )
                self._notice("approvals/rules/changed", answer)
            client.deliver(response_line(request_id, params_of(answer)))
            return
        if method == "blob/read":
            client.deliver(
                response_line(
                    request_id, read_blob(self.settings.blobs, validated(method, BlobReadParams, params))
                )
            )
            return
        if method == "requests/pending":
            resent = self._resend_pending(client) if client is self.controller else []
            listing = RequestsPendingResult(
                requests=[describe(p) for p in self.pending.values()], resent=resent
            )
            client.deliver(response_line(request_id, params_of(listing)))
            return
        if method == "initialize":
            params = negotiate(self, client, params)
            if client is not self.controller:
                client.deliver(response_line(request_id, initialize_reply(self, client)))
                return
        elif client is not self.controller:
            raise RPCError(
                INVALID_STATE,
                f"{method} needs the controller role; this connection observes",
                {"reason": "observer"},
            )
        if self.refusal is not None and method not in ("initialize", "cancel"):
            raise self.refusal
        if method in _AUDITED:
            self._audit(client, method, prompt_detail(params) if method in ("prompt", "steer") else {})
        if method == "prompt":
            self.taken.prompted()
        self._counter += 1
        forwarded_id = f"c{client.number}:{self._counter}"
        self._forwarded[forwarded_id] = Forwarded(client, request_id, method)
        if method == "replay":
            self._replaying_for = client
            self._update_direct()
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": forwarded_id, "method": method}
        if method == "cancel" and client.extended and client.receipts and params in (None, {}):
            params = {"receipt": True}
        if params is not None:
            body["params"] = params
        self._to_engine(line_of(body))

    def _on_client_answer(self, client: Client, request_id: Any, raw: dict[str, Any]) -> None:
        pending = self.pending.get(request_id) if isinstance(request_id, str) else None
        if pending is None or client is not self.controller:
            return  # an observer's answer, or one to a request already resolved: not the engine's
        result = raw.get("result")
        response = result.get("response") if isinstance(result, dict) else None
        try:  # recorded before it counts: an answer nobody can attribute is not taken
            self._audit(client, "approval", {"request": pending.type, "response": response, "id": pending.id})
        except RPCError as error:
            log.warning("an answer to %s was not taken: %s", pending.id, error.message)
            return  # still pending: asked again when the session reopens with its store
        del self.pending[pending.id]
        pending.scope.cancel()
        self._to_engine(line_of(raw))
        self._resolved(pending, by="client", client=client.number, response=response, user=client.user)

    # -- outbound: requests, responses, notices ------------------------------------------
    def _open_request(self, body: dict[str, Any], line: bytes) -> None:
        params = body.get("params") or {}
        request_id: str = body["id"]
        raw_payload = params.get("payload")
        payload: dict[str, Any] = raw_payload if isinstance(raw_payload, dict) else {}
        deadline = anyio.current_time() + self.deadline_ms / 1000
        members = RequestMembers(seq=0, deadline_ms=self.deadline_ms, on_timeout=self.on_timeout)
        seq = self._publish("request", line, members_of(members, exclude={"seq"}))  # (`seq` goes first)
        pending = Pending(request_id, str(params.get("type")), payload, seq, line, deadline, self.on_timeout)
        self.pending[request_id] = pending
        if self._group is not None:
            self._group.start_soon(self._expire, pending)

    async def _expire(self, pending: Pending) -> None:
        with pending.scope:
            await anyio.sleep_until(pending.deadline)
            if self.pending.pop(pending.id, None) is None:
                return
            self._to_engine(expired_answer(pending))
            if pending.on_timeout == "cancel":
                self.cancel_turn()
            self._resolved(pending, by="deadline", response=pending.on_timeout)

    def cancel_turn(self) -> None:
        """Cancel the running turn on the hub's own behalf (its answer goes to nobody)."""
        self._counter += 1
        cancel_id = f"hub:{self._counter}"
        self._forwarded[cancel_id] = Forwarded(None, None, "cancel")
        self._to_engine(line_of({"jsonrpc": "2.0", "id": cancel_id, "method": "cancel"}))

    def refuse(self, error: RPCError) -> None:
        """Take no more requests for the engine (each is answered with `error`), and stop
        the running turn."""
        self.refusal = error
        if self.busy:
            self.cancel_turn()

    def _drop_pending(self, reason: ResolvedBy) -> None:
        """The turn ended: whatever it asked is moot."""
        for pending in list(self.pending.values()):
            del self.pending[pending.id]
            pending.scope.cancel()
            self._resolved(pending, by=reason)

    def _resolved(
        self,
        pending: Pending,
        *,
        by: ResolvedBy,
        client: int | None = None,
        response: Any = None,
        user: str | None = None,
    ) -> None:
        notice = resolved_notice(pending, by=by, client=client, response=response)
        if user is not None:
            notice.user = user
        self._notice("request/resolved", notice)

    def _audit(self, client: Client, action: Action, detail: dict[str, Any]) -> None:
        """Record who did it, where the server has named users (and so an audit log)."""
        if client.user is not None and self.settings.audit is not None:
            try:
                self.settings.audit.append(audit_entry(client.user, action, self.id, detail))
            except StoreUnavailable as exc:  # the action is refused: who did it could not be kept
                raise store_unavailable(str(exc)) from None

    def _route_response(self, body: dict[str, Any]) -> None:
        request_id = body.get("id")
        forwarded = self._forwarded.pop(request_id, None) if isinstance(request_id, str) else None
        if request_id == CONTINUED_TURN and forwarded is not None:
            self.taken.ended(body)
            return
        if forwarded is None or forwarded.client is None:
            return  # an answer to the hub's own cancel, or to an input error nobody can own
        client = forwarded.client
        if forwarded.method == "replay" and self._replaying_for is client:
            self._replaying_for = None
            self._update_direct()
        result = body.get("result")
        if forwarded.method == "initialize" and isinstance(result, dict):
            self.initialize_result = {k: v for k, v in result.items() if k != "serve"}
            if client.extended:
                body["result"] = {**result, "serve": serve_info(self, client)}
        body["id"] = forwarded.original_id
        if client.closed and client.key is not None:  # kept for the connection that re-attaches
            if len(self._orphans) >= MAX_ORPHAN_KEYS and client.key not in self._orphans:
                self._orphans.pop(next(iter(self._orphans)))
            self._orphans.setdefault(client.key, []).append(line_of(body))
            return
        client.deliver(line_of(body))

    def _notice(self, method: str, params: BaseModel) -> None:
        """A notification of the extensions (numbered; only extended clients get it)."""
        self._publish("notice", line_of({"jsonrpc": "2.0", "method": method, "params": params_of(params)}))

    def _relay(self, line: bytes) -> None:
        """What the clients got unnumbered on a shared store, after the record's last seq:
        for the observers on the replicas that follow the session (server/follow.py)."""
        relay = self.settings.relay
        if relay is not None:
            relay(self.id, self.ring.seq, line)

    def _publish(self, kind: Literal["event", "request", "notice"], line: bytes, extra: bytes = b"") -> int:
        """Number a message the hub itself sends; returns its seq (0: sent unnumbered, on a
        shared store, where only the record is numbered)."""
        if self.by_store:
            self._number_committed()
            extended = insert_members(line, extra)
            for client in self.clients.values():
                if client.ring is not None:
                    client.deliver(extended)
            if kind != "notice":
                for client in self._plain:
                    client.deliver(line)
            self._relay(extended)
            return 0
        self.ring.publish(line, extra)
        if kind != "notice":  # notices are of the extensions
            for client in self._plain:
                client.deliver(line)
        self.flush()
        return self.ring.seq


_UNRECORDED_HEADS = tuple(b'"type":"%b"' % cls.__name__.encode() for cls in NOT_RECORDED)
"""How the events a shared store does not record begin: they reach every client unnumbered."""
_AUDITED: frozenset[Action] = frozenset({"prompt", "steer", "cancel", "rewind", "fork"})
"""Wire methods recorded with who sent them (`fork` here is the checkpoints' Wire method)."""
_WATCHING = frozenset(
    {"attach", "initialize", "requests/pending", "blob/read", "approvals/rules/list", "replay"}
)
"""What an observer user may ask: everything that only reads."""


def forbidden(user: str, action: str) -> RPCError:
    """The refusal of what an observer user may not do."""
    message = f"{user} is an observer on this server: {action} is refused"
    return RPCError(INVALID_STATE, message, {"reason": "forbidden", "user": user})


def _unset(callback: Callable[[], None]) -> object:
    raise RuntimeError("the session is not running")


def _call_soon(*, threadsafe: bool = False) -> Callable[[Callable[[], None]], object]:
    """The running loop's `call_soon`: `serve` runs on asyncio only (uvicorn's loop, and
    `anyio.run`'s default for `--stdio`), so there is no other backend to fall back for."""
    import asyncio

    loop = asyncio.get_running_loop()
    return loop.call_soon_threadsafe if threadsafe else loop.call_soon


__all__ = ["LiveSession", "forbidden"]
