"""The behaviour every SessionStore must have, as plain checks usable from any test runner.

`open_store(session_id)` must return a store for that id on a shared backing, so that a
second call reopens what the first wrote (like a new process opening the same directory):

    for check in CHECKS:
        check(lambda session_id: FileSessionStore(share, work_dir, session_id, protocol_version="1.3"))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from soulwire.sessions.store import SessionStore

OpenStore = Callable[[str], SessionStore]

USER = {"role": "user", "content": "hi"}
ASSISTANT = {"role": "assistant", "content": [{"type": "text", "text": "hé ✓"}]}


def _fail(what: str, got: Any, expected: Any) -> None:
    raise AssertionError(f"{what}: got {got!r}, expected {expected!r}")


def _expect(what: str, got: Any, expected: Any) -> None:
    if got != expected:
        _fail(what, got, expected)


def check_new_session_is_empty(open_store: OpenStore) -> None:
    store = open_store("fresh")
    _expect("exists() of a new session", store.exists(), False)
    _expect("context of a new session", list(store.load_context()), [])
    _expect("wire records of a new session", list(store.wire_records()), [])
    _expect("has_wire_records() of a new session", store.has_wire_records(), False)
    _expect("has_open_turn() of a new session", store.has_open_turn(), False)
    _expect("state of a new session", store.load_state(), {})
    _expect("archives of a new session", store.archived_contexts(), 0)


def check_context_round_trip_and_reopen(open_store: OpenStore) -> None:
    store = open_store("ctx")
    store.append_context([{"role": "_checkpoint", "id": 0}, USER])
    store.append_context([ASSISTANT])
    expected = [{"role": "_checkpoint", "id": 0}, USER, ASSISTANT]
    _expect("context read back", list(store.load_context()), expected)
    _expect("exists() after a context write", store.exists(), True)
    store.close()
    again = open_store("ctx")
    _expect("context after reopening", list(again.load_context()), expected)
    again.append_context([{"role": "_usage", "token_count": 7}])
    _expect("records appended after reopening", len(list(again.load_context())), 4)


def check_written_records_are_copies(open_store: OpenStore) -> None:
    store = open_store("copies")
    record: dict[str, Any] = {"role": "user", "content": "before"}
    store.append_context([record])
    record["content"] = "after"
    _expect(
        "a record mutated after writing", list(store.load_context()), [{"role": "user", "content": "before"}]
    )


def check_replace_context_archives(open_store: OpenStore) -> None:
    store = open_store("rotate")
    store.append_context([USER, ASSISTANT])
    store.replace_context([{"role": "_system_prompt", "content": "p"}])
    _expect("context after replace", list(store.load_context()), [{"role": "_system_prompt", "content": "p"}])
    _expect("archives after one replace", store.archived_contexts(), 1)
    _expect("archived context", list(store.load_archived_context(1)), [USER, ASSISTANT])
    store.append_context([USER])
    store.replace_context([])
    _expect("archives after two replaces", store.archived_contexts(), 2)
    _expect("second archive", list(store.load_archived_context(2))[-1], USER)
    _expect("context after replacing with nothing", list(store.load_context()), [])
    store.append_context([ASSISTANT])
    _expect("append after replace", list(open_store("rotate").load_context()), [ASSISTANT])


def check_wire_records_in_order(open_store: OpenStore) -> None:
    store = open_store("wire")
    messages = [
        {"type": "TurnBegin", "payload": {"user_input": "hi"}},
        {"type": "ContentPart", "payload": {"type": "text", "text": "hé"}},
        {"type": "TurnEnd", "payload": {}},
    ]
    for message in messages:
        store.record_wire(message)
    _expect("wire records", list(store.wire_records()), messages)
    verbatim = list(store.wire_records_verbatim())
    _expect("verbatim records", [m for m, _ in verbatim], messages)
    _expect("verbatim texts", [json.loads(t) for _, t in verbatim], messages)
    _expect("has_wire_records()", store.has_wire_records(), True)
    store.close()
    again = open_store("wire")
    again.record_wire({"type": "TurnBegin", "payload": {"user_input": "again"}})
    _expect("wire records after reopening", len(list(again.wire_records())), 4)


def check_open_turn_detection(open_store: OpenStore) -> None:
    store = open_store("turns")
    store.record_wire({"type": "TurnBegin", "payload": {"user_input": "a"}})
    store.record_wire({"type": "StepBegin", "payload": {"n": 1}})
    _expect("has_open_turn() inside a turn", store.has_open_turn(), True)
    store.record_wire({"type": "TurnEnd", "payload": {}})
    _expect("has_open_turn() after TurnEnd", store.has_open_turn(), False)
    store.record_wire(
        {
            "type": "SubagentEvent",
            "payload": {"event": {"type": "TurnBegin", "payload": {"user_input": "x"}}},
        }
    )
    _expect("a wrapped sub-agent TurnBegin", store.has_open_turn(), False)


def check_state_round_trip(open_store: OpenStore) -> None:
    store = open_store("state")
    state: dict[str, Any] = {
        "version": 1,
        "custom_title": "tïtle",
        "todos": [{"title": "a", "status": "done"}],
    }
    store.save_state(state)
    state["custom_title"] = "changed after saving"
    _expect("state read back", open_store("state").load_state()["custom_title"], "tïtle")
    store.save_state({"version": 1, "custom_title": "second"})
    _expect("state replaced", open_store("state").load_state(), {"version": 1, "custom_title": "second"})


def check_sessions_are_separate(open_store: OpenStore) -> None:
    one, two = open_store("one"), open_store("two")
    one.append_context([USER])
    one.record_wire({"type": "TurnEnd", "payload": {}})
    _expect("context of another session", list(two.load_context()), [])
    _expect("wire of another session", list(two.wire_records()), [])


def check_delete(open_store: OpenStore) -> None:
    store = open_store("doomed")
    store.append_context([USER])
    store.record_wire({"type": "TurnEnd", "payload": {}})
    store.save_state({"version": 1})
    store.delete()
    again = open_store("doomed")
    _expect("exists() after delete", again.exists(), False)
    _expect("state after delete", again.load_state(), {})


def check_objects_and_checkpoint_log(open_store: OpenStore) -> None:
    store = open_store("objects")
    _expect("has_object() of a new session", store.has_object("d1"), False)
    _expect("get_object() of a new session", store.get_object("d1"), None)
    _expect("checkpoint log of a new session", list(store.checkpoint_records()), [])
    store.put_objects({"d1": b"\x00bytes\xff", "d2": b""})
    store.put_objects({"d1": b"ignored: d1 is kept already", "d3": b"three"})
    store.append_checkpoint({"type": "checkpoint", "id": "c1", "changed": {"a": ["f", 420]}})
    store.append_checkpoint({"type": "rewind", "id": "r2"})
    store.close()
    again = open_store("objects")
    _expect("an object after reopening", again.get_object("d1"), b"\x00bytes\xff")
    _expect("an empty object", again.get_object("d2"), b"")
    _expect("has_object() after reopening", (again.has_object("d3"), again.has_object("d4")), (True, False))
    _expect("checkpoint log after reopening", [r["id"] for r in again.checkpoint_records()], ["c1", "r2"])
    _expect("a checkpoint record", next(iter(again.checkpoint_records()))["changed"], {"a": ["f", 420]})
    _expect("the checkpoint log of another session", list(open_store("other").checkpoint_records()), [])
    # (objects are content-addressed: a store may share them between sessions)


def check_truncate_history(open_store: OpenStore) -> None:
    store = open_store("cut")
    store.append_context([USER, ASSISTANT, USER])
    for kind in ("TurnBegin", "TurnEnd", "TurnBegin"):
        store.record_wire({"type": kind, "payload": {}})
    store.truncate_history(2, 2)
    _expect("context after truncate", list(store.load_context()), [USER, ASSISTANT])
    _expect("wire after truncate", [m["type"] for m in store.wire_records()], ["TurnBegin", "TurnEnd"])
    store.append_context([ASSISTANT])
    store.record_wire({"type": "TurnBegin", "payload": {"user_input": "again"}})
    again = open_store("cut")
    _expect("context appended after truncate", list(again.load_context())[-1], ASSISTANT)
    _expect("wire appended after truncate", len(list(again.wire_records())), 3)
    _expect("archives after truncate", again.archived_contexts(), 0)


CHECKS: tuple[Callable[[OpenStore], None], ...] = (
    check_new_session_is_empty,
    check_context_round_trip_and_reopen,
    check_written_records_are_copies,
    check_replace_context_archives,
    check_wire_records_in_order,
    check_open_turn_detection,
    check_state_round_trip,
    check_sessions_are_separate,
    check_delete,
    check_objects_and_checkpoint_log,
    check_truncate_history,
)


def run_all(open_store: OpenStore) -> None:
    """Run every check; raises AssertionError at the first failure."""
    for check in CHECKS:
        check(open_store)
