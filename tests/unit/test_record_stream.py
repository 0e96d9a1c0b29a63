"""The store-numbered stream (server/record_stream.py): a stored record as the line a client
reads, a rewind's renumbering, and where an attaching client starts reading."""

from __future__ import annotations

import json

from soulwire.server.client import Client
from soulwire.server.messages import AttachParams, HubSettings
from soulwire.server.record_stream import STORE_EPOCH, backlog, new_ring, recorded_line, renumbered


def stored(kind: str, payload: dict[str, object]) -> str:
    return json.dumps({"type": kind, "payload": payload}, ensure_ascii=False)  # as the store keeps it


def client(number: int = 1) -> Client:
    return Client(number, max_queued_bytes=1 << 20)


def test_a_record_is_an_event_and_a_recorded_request_only_keeps_its_number():
    event = json.loads(recorded_line(7, stored("TurnBegin", {"user_input": "ünï"})))
    assert event == {
        "jsonrpc": "2.0",
        "method": "event",
        "params": {"seq": 7, "type": "TurnBegin", "payload": {"user_input": "ünï"}},
    }
    question = json.loads(recorded_line(8, stored("QuestionRequest", {"id": "q1", "questions": []})))
    assert question["method"] == "recorded" and question["params"]["seq"] == 8


def test_a_rewind_gives_a_new_ring_and_closes_its_readers():
    settings = HubSettings()
    ring = new_ring(settings)
    ring.start_after(4)
    for seq in (5, 6):
        ring.add(recorded_line(seq, stored("StepBegin", {"n": seq})))
    reader, other = client(1), client(2)
    reader.read_ring(ring, 6)
    assert renumbered(ring, 7, settings, [reader, other]) is ring and not reader.closed
    fresh = renumbered(ring, 3, settings, [reader, other])  # the record was cut back to 2
    assert fresh is not ring and fresh.seq == 2 and reader.closed and not other.closed


def test_a_client_naming_the_store_epoch_gets_exactly_what_it_missed_others_what_came_since():
    ring = new_ring(HubSettings())
    ring.start_after(0)
    for seq in range(1, 11):
        ring.add(recorded_line(seq, stored("StepBegin", {"n": seq})))
    knows = AttachParams(since_seq=3, epoch=STORE_EPOCH)
    assert backlog(ring, STORE_EPOCH, knows, client(), is_new=True, opened_at=8) == (3, True, 7)
    fresh = AttachParams(since_seq=0)  # a new client: as from a new run (opened with 8 records)
    assert backlog(ring, STORE_EPOCH, fresh, client(), is_new=True, opened_at=8) == (8, True, 2)
    other_run = AttachParams(since_seq=3, epoch="a1b2")
    assert backlog(ring, STORE_EPOCH, other_run, client(), is_new=True) == (10, False, 0)
