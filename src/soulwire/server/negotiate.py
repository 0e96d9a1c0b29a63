"""`initialize` on a shared session: the `serve` member a client negotiates the Wire extensions
with (sequence numbers, batching, message size, deadlines, a role), and the answer it gets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from soulwire.server.client import Client
from soulwire.server.messages import HUB_METHODS, AttachParams, ServeOptions, validated
from soulwire.server.protocol import Loaded, ServeInfo, params_of
from soulwire.wire import PROTOCOL_VERSION

if TYPE_CHECKING:
    from soulwire.server.hub import LiveSession


def negotiate(live: LiveSession, client: Client, params: Any) -> Any:
    """Take the `serve` member out of initialize params (the engine does not know it)."""
    if not isinstance(params, dict) or "serve" not in params:
        return params
    params = dict(params)
    options = validated("initialize", ServeOptions, params.pop("serve"))
    if options.seq and client.ring is None:
        client.extended = True
        client.read_ring(live.ring, live.seq)  # it got everything so far as today's Wire
        live.regroup()
    if options.max_message_bytes is not None:
        client.max_message_bytes = options.max_message_bytes
    client.batch = client.batch or options.batch
    client.receipts = options.receipts
    if options.mode is not None or options.since_seq is not None:
        live.attach(client, AttachParams(since_seq=options.since_seq, mode=options.mode or client.mode))
    if client is live.controller or live.controller is None:
        if options.deadline_ms is not None:
            live.deadline_ms = options.deadline_ms
        if options.on_timeout is not None:
            live.on_timeout = options.on_timeout
    return params


def serve_info(live: LiveSession, client: Client) -> dict[str, Any]:
    """The `serve` member of the initialize answer: what this client negotiated."""
    info = ServeInfo(
        epoch=live.epoch,
        last_seq=live.seq,
        mode=client.mode,
        deadline_ms=live.deadline_ms,
        on_timeout=live.on_timeout,
        methods=sorted(HUB_METHODS),
        max_message_bytes=client.max_message_bytes,
        batch=client.batch,
        receipts=client.extended and client.receipts,
        loaded=Loaded.model_validate(live.loaded),
    )
    return params_of(info)


def initialize_reply(live: LiveSession, client: Client) -> dict[str, Any]:
    """The engine's initialize answer again, for a client that is not the controller."""
    base = dict(live.initialize_result or {})
    base.setdefault("protocol_version", PROTOCOL_VERSION)  # the engine answered none yet
    base.setdefault("session", {"id": live.id, "work_dir": str(live.runtime.options.work_dir)})
    base["serve"] = serve_info(live, client)
    return base


__all__ = ["initialize_reply", "negotiate", "serve_info"]
