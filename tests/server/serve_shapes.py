"""Every message a real `soulwire serve` sends to a test's WebSocket is validated against the
serve protocol's models (src/soulwire/server/protocol.py), the one definition the server
builds them from: a member renamed, dropped or mistyped on either side fails every server
test that sees such a message, not only a test written for it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from soulwire.runtime.builder import NOT_RECORDED
from soulwire.server import protocol
from soulwire.server.record_stream import STORE_EPOCH

NOTICES: dict[str, type[BaseModel]] = {
    "role/changed": protocol.RoleChanged,
    "request/resolved": protocol.RequestResolved,
    "approvals/rules/changed": protocol.Rules,
    "attached": protocol.AttachResult,
}
"""The extensions' notifications: their `params`."""

RESULTS: dict[str, type[BaseModel]] = {
    "attach": protocol.AttachResult,
    "requests/pending": protocol.RequestsPendingResult,
    "blob/read": protocol.BlobChunk,
    "approvals/rules/list": protocol.Rules,
    "approvals/rules/add": protocol.Rules,
    "approvals/rules/remove": protocol.Rules,
    "cancel": protocol.CancelResult,
}
"""The extensions' methods: their `result`."""

UNRECORDED = tuple(cls.__name__ for cls in NOT_RECORDED)
"""Events a shared store does not record, which therefore come without `seq` there."""


class ShapeChecker:
    """Validates one connection's messages; `checked` counts them by model name."""

    def __init__(self) -> None:
        self.asked: dict[str, str] = {}
        """Request id → method, for the responses."""
        self.numbered = False
        """The connection negotiated `seq`: every event and request from now on has one."""
        self.checked: dict[str, int] = {}
        self.by_store = False
        """The session is numbered by a shared store (epoch `store`): only recorded messages
        carry `seq`; requests and notices come unnumbered."""

    def _validate(self, model: type[BaseModel], data: Any) -> None:
        model.model_validate(data, strict=True)
        self.checked[model.__name__] = self.checked.get(model.__name__, 0) + 1

    def sent(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.asked[str(message["id"])] = message["method"]

    def received(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params")
        if method in ("event", "request"):
            assert isinstance(params, dict), message
            if "seq" in params:
                self.numbered = True
            if self.numbered and self.by_store and (method == "request" or params["type"] in UNRECORDED):
                model = protocol.RequestMembers if method == "request" else protocol.EventMembers
                self._validate(model, {"seq": 0, **params})  # (not recorded: not numbered)
            elif self.numbered:
                self._validate(
                    protocol.RequestMembers if method == "request" else protocol.EventMembers, params
                )
            if "blob" in params and "payload" not in params:
                self._validate(protocol.BlobRef, params["blob"])
        elif method in NOTICES:
            self._validate(NOTICES[method], params)
            if method == "attached":  # (the answer to `?since_seq=…` as the socket opens)
                self.by_store = params.get("epoch") == STORE_EPOCH
            elif not self.by_store:
                self._validate(protocol.EventMembers, params)  # the notices are numbered
        elif method == "recorded":  # a recorded request's place in a store's numbering
            assert self.by_store, message
            self._validate(protocol.EventMembers, {"seq": params["seq"]})
        elif method is None and "result" in message:
            asked = self.asked.pop(str(message.get("id")), None)
            result = message["result"]
            if asked == "initialize" and isinstance(result, dict) and "serve" in result:
                self._validate(protocol.ServeInfo, result["serve"])
                self.by_store = result["serve"]["epoch"] == STORE_EPOCH
            elif asked in RESULTS:
                self._validate(RESULTS[asked], result)
