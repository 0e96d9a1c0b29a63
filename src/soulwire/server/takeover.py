"""The turn a session's previous process left open, as the server that took the session over
answers it (`serve` opens every session with `continue_turn`: engine/recovery.py).

The `prompt` request of that turn died with the connection to the process that ran it. A
client whose prompt was unanswered when its connection dropped re-attaches with `prompt_id`
(that request's id; the Python SDK sends it): if this run of the session took the turn over,
that client gets the answer its prompt would have had, under its id, after the backlog —

* the continued turn's own answer (`{"status": …}`, or its error) when it ends, for a turn that
  was waiting for approvals (they are asked again);
* at once, an `INVALID_STATE` error with `data.reason = "interrupted"`, for a turn that was
  closed as interrupted when the session opened here.

Once a prompt has run here, a `prompt_id` is ignored (an answer of this run reaches its client
as every answer does). Clients without `prompt_id` tell the turn's end by its `TurnEnd`."""

from __future__ import annotations

from typing import Any

from soulwire.runtime.builder import Runtime
from soulwire.server.client import Client
from soulwire.server.messages import line_of
from soulwire.sessions.interrupted import ENGINE_STOPPED
from soulwire.wire.jsonrpc import INTERRUPTED, INVALID_STATE, RPCError

INTERRUPTED_MESSAGE = f"the turn was interrupted: {ENGINE_STOPPED} before it finished"


class TakenTurn:
    """Who waits for the answer of the turn this run took over, and that answer once known."""

    def __init__(self, runtime: Runtime) -> None:
        self.continuing = runtime.continuation is not None
        """The turn is being continued (its answer comes as `CONTINUED_TURN`'s)."""
        self._answer: dict[str, Any] | None = None
        if runtime.interrupted_turn and not self.continuing:
            error = RPCError(INVALID_STATE, INTERRUPTED_MESSAGE, {"reason": INTERRUPTED})
            self._answer = {"error": error.to_json()}
        self._open = self.continuing or self._answer is not None
        self._claims: list[tuple[Client, str]] = []

    def claim(self, client: Client, prompt_id: str) -> None:
        """`client`'s prompt `prompt_id` was unanswered: it gets the taken turn's answer."""
        if not self._open:
            return
        if self._answer is not None:
            client.deliver(line_of({"jsonrpc": "2.0", "id": prompt_id, **self._answer}))
        else:
            self._claims.append((client, prompt_id))

    def ended(self, body: dict[str, Any]) -> None:
        """The continued turn's answer (`body`, the engine's): to every client that claimed it."""
        self.continuing = False
        self._answer = {k: v for k, v in body.items() if k in ("result", "error")}
        claims, self._claims = self._claims, []
        for client, prompt_id in claims:
            if not client.closed:
                client.deliver(line_of({"jsonrpc": "2.0", "id": prompt_id, **self._answer}))

    def prompted(self) -> None:
        """A prompt ran in this run: later `prompt_id`s are not the taken turn's."""
        self._open = False
        self._claims = []


__all__ = ["INTERRUPTED_MESSAGE", "TakenTurn"]
