"""The server's parts alone: the per-client bounded queue, `params` member insertion, the
session lock, and the blob store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from soulwire.server.blobs import BlobStore
from soulwire.server.client import TOO_SLOW, Client, insert_members
from soulwire.sessions.lock import SessionBusyError, SessionLock, is_locked


def test_a_client_that_falls_behind_is_dropped_not_buffered_forever():
    client = Client(1, max_queued_bytes=100)
    for _ in range(3):
        client.deliver(b"x" * 30)
    assert not client.closed
    client.deliver(b"x" * 30)
    assert client.closed and client.close_code == TOO_SLOW
    client.deliver(b"more")  # nothing is kept once dropped
    assert anyio.run(client.next_batch) is None


def test_queued_messages_come_out_in_order():
    client = Client(1, max_queued_bytes=1000)
    client.deliver(b"a\n")
    client.deliver(b"b\n")
    assert anyio.run(client.next_batch) == [b"a\n", b"b\n"]


def test_members_go_first_inside_params():
    line = b'{"jsonrpc":"2.0","method":"event","params":{"type":"TurnEnd","payload":{}}}\n'
    assert insert_members(line, b'"seq":7,') == (
        b'{"jsonrpc":"2.0","method":"event","params":{"seq":7,"type":"TurnEnd","payload":{}}}\n'
    )
    assert insert_members(b'{"method":"x","params":{}}', b'"seq":1,') == b'{"method":"x","params":{"seq":1}}'
    assert insert_members(b'{"method":"x"}', b'"seq":1,') == b'{"method":"x"}'


def test_one_process_per_session(tmp_path):
    lock = SessionLock.acquire(tmp_path, "/work", "s1")
    assert is_locked(tmp_path, "/work", "s1") and not is_locked(tmp_path, "/work", "s2")
    holder = subprocess.run(
        [sys.executable, "-c", (
            "import sys; from pathlib import Path; from soulwire.sessions.lock import SessionLock\n"
            f"try: SessionLock.acquire(Path({str(tmp_path)!r}), '/work', 's1')\n"
            "except Exception as e: print(e); sys.exit(3)"
        )],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert holder.returncode == 3 and f"pid {os.getpid()}" in holder.stdout
    with pytest.raises(SessionBusyError):
        SessionLock.acquire(tmp_path, "/work", "s1")  # another open file: refused in-process too
    lock.release()
    assert not is_locked(tmp_path, "/work", "s1")
    SessionLock.acquire(tmp_path, "/work", "s1").release()


def test_blobs_are_content_addressed_and_read_in_chunks(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    data = os.urandom(300_000)
    blob_id = store.put(data)
    assert store.put(data) == blob_id and len(blob_id) == 64
    first = store.read(blob_id, 0, 1 << 30)
    assert first is not None and first[1] == len(data) and len(first[0]) == 1 << 18
    rest = store.read(blob_id, len(first[0]), 1 << 18)
    assert rest is not None and first[0] + rest[0] == data
    assert store.read("../../etc/passwd", 0, 10) is None and store.read("0" * 64, 0, 10) is None
    assert oct((tmp_path / "blobs" / blob_id[:2] / blob_id).stat().st_mode & 0o777) == "0o600"


def test_the_extensions_are_in_the_exported_schema(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "soulwire", "schema", "--out", str(tmp_path)], capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    attach = (tmp_path / "serve" / "AttachParams.json").read_text()
    assert '"since_seq"' in attach and '"controller"' in attach
    assert '"on_timeout"' in (tmp_path / "serve" / "ServeOptions.json").read_text()
    assert '"batch"' in (tmp_path / "serve" / "ServeOptions.json").read_text()
    receipt = (tmp_path / "serve" / "CancelResult.json").read_text()
    assert '"left_running"' in receipt and '"process_groups"' in receipt
    for name in ("ServeInfo", "AttachResult", "RequestResolved", "RoleChanged", "Rules", "BlobRef"):
        assert (tmp_path / "serve" / f"{name}.json").is_file(), name


def test_a_cancel_receipt_fits_its_model():
    # (A receipt from a real cancel is checked in test_serve_lifecycle.py; every message a
    # real server sends to the tests' WebSockets is validated by tests/server/serve_shapes.py.)
    from soulwire.server import protocol

    receipt = {
        "stopped": {"tool_calls": [{"id": "tc-1", "name": "Shell"}], "process_groups": [12], "subagents": []},
        "left_running": {"background_tasks": [{"id": "b", "description": "w", "command": "x", "pgid": 3}]},
        "survived": [],
    }
    protocol.CancelResult.model_validate({"receipt": receipt}, strict=True)
    protocol.CancelResult.model_validate({}, strict=True)


def test_the_shape_checker_refuses_a_message_that_is_not_its_model():
    from pydantic import ValidationError

    from tests.server.serve_shapes import ShapeChecker

    checker = ShapeChecker()
    checker.received(
        {"jsonrpc": "2.0", "method": "event", "params": {"seq": 1, "type": "TurnEnd", "payload": {}}}
    )
    with pytest.raises(ValidationError):  # numbered once: every event is
        checker.received({"jsonrpc": "2.0", "method": "event", "params": {"type": "TurnEnd", "payload": {}}})
    with pytest.raises(ValidationError):
        checker.received({"jsonrpc": "2.0", "method": "role/changed", "params": {"seq": 2, "controller": 1}})
    checker.sent({"jsonrpc": "2.0", "id": "7", "method": "blob/read", "params": {"blob_id": "b"}})
    with pytest.raises(ValidationError):
        checker.received(
            {"jsonrpc": "2.0", "id": "7", "result": {"data": "", "offset": "0", "size": 0, "eof": True}}
        )
    assert checker.checked == {"EventMembers": 1}


def test_the_host_names_a_server_answers_to():
    from soulwire.server.security import Guard

    loopback = Guard.for_listen("t" * 20, "127.0.0.2", 8000, [])
    assert loopback.hosts == {"127.0.0.1:8000", "127.0.0.2:8000", "[::1]:8000", "localhost:8000"}
    assert "http://localhost:8000" in loopback.origins and "http://evil:8000" not in loopback.origins
    wildcard = Guard.for_listen("t" * 20, "0.0.0.0", 8000, ["Box.LAN"])
    assert "box.lan:8000" in wildcard.hosts and "0.0.0.0:8000" not in wildcard.hosts


def _event(text: str) -> bytes:
    return (
        b'{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":{"type":"text","text":"'
        + text.encode()
        + b'"}}}\n'
    )


def test_the_ring_numbers_in_the_clients_form_and_frames_streamed_parts_the_same_way():
    from soulwire.server.ring import Ring
    from soulwire.wire.serde import event_line, numbered_part_line
    from soulwire.wire.types import TextPart, ThinkPart

    ring = Ring(10, 1 << 20, large=1 << 16, referencer=lambda _line: None)
    first = ring.publish(_event("a"))
    assert first.startswith(b'{"jsonrpc":"2.0","method":"event","params":{"seq":1,"type":"ContentPart"')
    notice = ring.publish(b'{"jsonrpc":"2.0","method":"x","params":{}}\n')
    assert notice == b'{"jsonrpc":"2.0","method":"x","params":{"seq":2}}\n'
    for part in (TextPart(text='h\u00e9 "q"\n'), ThinkPart(think="t", encrypted="sig"), ThinkPart(think="u")):
        assert numbered_part_line(part, ring.seq + 1) == ring.publish(event_line(part))
    assert ring.after(0, ring.seq, 1 << 20, 1 << 20) == ring._buf  # pyright: ignore[reportPrivateUsage]


def test_the_ring_keeps_what_a_live_reader_has_yet_to_read_unless_it_is_too_far_behind():
    from soulwire.server.ring import Ring

    ring = Ring(4, 1 << 20, large=1 << 16, referencer=lambda _line: None)
    reader = Client(1, max_queued_bytes=10_000)
    reader.read_ring(ring, 0)
    ring.readers = (reader,)
    for i in range(8):
        ring.publish(_event(str(i)))
    assert ring.oldest == 1 and not reader.closed  # 8 > 4 kept: the reader has not read them
    taken = anyio.run(reader.next_batch)
    assert taken is not None and [b'"seq":%d,' % n in line for n, line in enumerate(taken, 1)] == [True] * 8
    ring.publish(_event("next"))
    assert ring.oldest == 6  # read: back to the bound
    assert anyio.run(reader.next_batch) is not None
    slow = Client(2, max_queued_bytes=300)
    slow.read_ring(ring, ring.seq)
    ring.readers = (reader, slow)
    for i in range(6):
        ring.publish(_event(str(i)))
    assert slow.closed and slow.close_code == TOO_SLOW  # further behind than its allowance
    assert ring.after(0, ring.seq, 1 << 20, 1 << 20) is None  # that gap left the ring


def test_a_reader_gets_large_messages_by_reference_and_queued_answers_in_their_place():
    from soulwire.server.ring import Ring

    big = _event("x" * 70_000)
    ring = Ring(100, 1 << 30, large=1 << 16, referencer=lambda line: b"REF " + line[-20:])
    client = Client(1, max_queued_bytes=1 << 20, max_message_bytes=1 << 16)
    client.read_ring(ring, 0)
    ring.readers = (client,)
    ring.publish(_event("before"))
    client.deliver_first(b"first\n")  # before anything not yet read (`attached`)
    client.deliver(b"answer\n")  # after what was numbered so far
    ring.publish(big)
    batch = anyio.run(client.next_batch)
    assert batch is not None and batch[0] == b"first\n" and batch[2] == b"answer\n"
    assert b'"seq":1,' in batch[1] and batch[3].startswith(b"REF ")


def test_connections_to_the_server_are_sent_without_nagle_delays():
    # asyncio sets TCP_NODELAY only on connections whose socket names IPPROTO_TCP; with a plain
    # socket() the server's small answers waited for the client's delayed ACK (40 ms).
    import socket

    from soulwire.server.main import _bind  # pyright: ignore[reportPrivateUsage]

    listener = _bind("127.0.0.1", 0)
    client = socket.create_connection(listener.getsockname())
    try:
        accepted, _ = listener.accept()
        with accepted:
            assert accepted.proto == socket.IPPROTO_TCP
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        client.close()
        listener.close()


def test_stopping_the_copies_waits_for_those_that_end_and_kills_one_that_does_not():
    # Stand-ins for forked copies: one ends on SIGTERM, as a copy does once its sessions are
    # wound down; the other ignores it and is killed when the timeout is up.
    from soulwire.server.prefork import Copies

    script = "import signal, sys, time; signal.signal(signal.SIGTERM, {}); print('ready', flush=True); time.sleep(60)"
    obeys = subprocess.Popen(
        [sys.executable, "-c", script.format("lambda *_: sys.exit(0)")], stdout=subprocess.PIPE
    )
    ignores = subprocess.Popen(
        [sys.executable, "-c", script.format("signal.SIG_IGN")], stdout=subprocess.PIPE
    )
    copies = Copies()
    for proc in (obeys, ignores):
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        copies.urls[proc.pid] = f"http://127.0.0.1:{proc.pid}"
    try:
        copies.stop(timeout=1.0)
        assert copies.urls == {} and copies.stopping
        for proc in (obeys, ignores):  # both reaped by `stop` (waitpid): gone from /proc
            assert not Path(f"/proc/{proc.pid}").exists()
    finally:
        for proc in (obeys, ignores):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_the_cyclic_collector_is_back_on_once_the_server_is_tuned() -> None:
    """`run_serve` turns the collector off for its start-up imports; the running server gets it
    back (with its own thresholds) from `_tune_gc`, on every path to serving."""
    import gc

    from soulwire.server import main

    thresholds, was_enabled = gc.get_threshold(), gc.isenabled()
    try:
        gc.disable()
        main._tune_gc(collect=False)  # pyright: ignore[reportPrivateUsage]
        assert gc.isenabled()
        assert gc.get_threshold()[0] == 20_000
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        if not was_enabled:
            gc.disable()
