"""Both session stores pass the shared conformance checks; the file store also survives torn
writes and keeps the layout other clients read."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

from soulwire.sessions.conformance import CHECKS, OpenStore
from soulwire.sessions.jsonl import iter_lines
from soulwire.sessions.memory import MemoryBackend
from soulwire.sessions.store import FileSessionStore


def file_stores(tmp_path: Path) -> OpenStore:
    return lambda session_id: FileSessionStore(
        tmp_path / "share", tmp_path / "work", session_id, protocol_version="1.3"
    )


def memory_stores(tmp_path: Path) -> OpenStore:
    backend = MemoryBackend()
    return backend.open


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("stores", [file_stores, memory_stores], ids=["file", "memory"])
def test_conformance(stores, check, tmp_path):
    check(stores(tmp_path))


def make_store(tmp_path: Path, session_id: str = "s") -> FileSessionStore:
    return FileSessionStore(tmp_path / "share", tmp_path / "work", session_id, protocol_version="1.3")


def test_a_torn_last_line_is_skipped_and_never_swallows_the_next_record(tmp_path, capsys):
    store = make_store(tmp_path)
    store.append_context([{"role": "user", "content": "kept"}])
    store.record_wire({"type": "TurnBegin", "payload": {"user_input": "kept"}})
    store.close()
    with (store.dir / "context.jsonl").open("ab") as handle:
        handle.write(b'{"role": "assistant", "content": "cut in the mid')  # the process died here
    with (store.dir / "wire.jsonl").open("ab") as handle:
        handle.write(b'{"timestamp": 1.0, "message": {"type": "TurnEnd", "payload": {}}')

    again = make_store(tmp_path)
    assert list(again.load_context()) == [{"role": "user", "content": "kept"}]
    assert "malformed line 2" in capsys.readouterr().err
    again.append_context([{"role": "user", "content": "after"}])
    again.record_wire({"type": "TurnEnd", "payload": {}})
    assert [r["content"] for r in again.load_context()] == ["kept", "after"]
    assert [m["type"] for m in again.wire_records()] == ["TurnBegin", "TurnEnd"]
    assert [m["type"] for m, _ in again.wire_records_verbatim()] == ["TurnBegin", "TurnEnd"]


def test_wire_file_layout_and_verbatim_records(tmp_path):
    store = make_store(tmp_path)
    message = {"type": "ContentPart", "payload": {"type": "text", "text": 'héllo "quoted" }'}}
    store.record_wire(message)
    store.record_wire({"type": "TurnEnd", "payload": {}})
    lines = (store.dir / "wire.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"type": "metadata", "protocol_version": "1.3"}
    assert lines[1].startswith('{"timestamp": ') and "héllo" in lines[1]  # reference separators, raw UTF-8
    assert len(lines) == 3  # one header only
    verbatim = list(store.wire_records_verbatim())
    assert [json.loads(text) for _, text in verbatim] == [message, {"type": "TurnEnd", "payload": {}}]


def test_a_legacy_wire_file_without_header_gets_none(tmp_path):
    store = make_store(tmp_path)
    store.ensure_dir()
    line = json.dumps({"timestamp": 1.0, "message": {"type": "TurnEnd", "payload": {}}})
    (store.dir / "wire.jsonl").write_text(line + "\n")
    assert store.wire_protocol_version() == "1.1"
    store.record_wire({"type": "TurnBegin", "payload": {"user_input": "x"}})
    assert [m["type"] for m in store.wire_records()] == ["TurnEnd", "TurnBegin"]
    assert "metadata" not in (store.dir / "wire.jsonl").read_text()


def test_replace_context_is_atomic_and_keeps_appending_to_the_new_file(tmp_path):
    store = make_store(tmp_path)
    store.append_context([{"role": "user", "content": "old"}])
    store.replace_context([{"role": "_system_prompt", "content": "p"}])
    store.append_context([{"role": "user", "content": "new"}])
    assert [r.get("content") for r in store.load_archived_context(1)] == ["old"]
    assert [r.get("content") for r in store.load_context()] == ["p", "new"]
    assert not list(store.dir.glob(".*.new"))


def test_nothing_is_created_before_the_first_write_and_modes_are_private(tmp_path):
    store = make_store(tmp_path)
    assert not (tmp_path / "share").exists()
    assert not store.has_wire_records() and not store.has_open_turn()
    store.append_context([{"role": "user", "content": "x"}])
    store.save_state({"version": 1})
    for path in (tmp_path / "share", tmp_path / "share" / "sessions", store.dir.parent, store.dir):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for name in ("context.jsonl", "state.json"):
        assert stat.S_IMODE((store.dir / name).stat().st_mode) == 0o600


def test_legacy_metadata_title_is_read(tmp_path):
    store = make_store(tmp_path)
    store.ensure_dir()
    (store.dir / "metadata.json").write_text(json.dumps({"title": "From the SDK"}))
    assert store.load_state()["custom_title"] == "From the SDK"
    store.save_state({"custom_title": "mine"})
    assert store.load_state()["custom_title"] == "mine"


def test_open_turn_is_found_far_from_the_end(tmp_path):
    store = make_store(tmp_path)
    store.record_wire({"type": "TurnBegin", "payload": {"user_input": "long"}})
    for index in range(3000):
        store.record_wire({"type": "ContentPart", "payload": {"type": "text", "text": f"chunk {index}"}})
    assert (store.dir / "wire.jsonl").stat().st_size > 1 << 17
    assert store.has_open_turn()


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 1 << 20])
def test_lines_are_split_the_same_whatever_the_chunk_size(tmp_path, chunk_size):
    for data in (b"", b"a", b"a\n", b"a\nb", b"\n\n", b"abc\ndef\n" * 5, b"x" * 50 + b"\n" + b"y" * 33):
        path = tmp_path / "f"
        path.write_bytes(data)
        expected = data.split(b"\n")
        if expected[-1] == b"":
            expected.pop()
        assert [line for _, line in iter_lines(path, chunk_size=chunk_size)] == expected


def test_a_state_save_that_does_not_wait_is_fsynced_on_the_writer_thread_in_order(tmp_path, monkeypatch):
    import threading

    synced: list[tuple[int, bytes]] = []
    real_replace = FileSessionStore._replace_state  # pyright: ignore[reportPrivateUsage]

    def recording_replace(self: FileSessionStore, data: bytes) -> None:
        synced.append((threading.get_ident(), data))
        real_replace(self, data)

    monkeypatch.setattr(FileSessionStore, "_replace_state", recording_replace)
    store = make_store(tmp_path)
    state = {"version": 1, "custom_title": "first"}
    store.save_state(state, wait=False)
    state["custom_title"] = "changed after saving"  # the write has its own copy
    store.save_state({"version": 1, "custom_title": "second"}, wait=False)
    assert store.load_state() == {"version": 1, "custom_title": "second"}  # waits for both
    titles = [json.loads(data)["custom_title"] for _, data in synced]
    assert titles == ["first", "second"]
    assert all(thread != threading.get_ident() for thread, _ in synced)
    store.save_state({"version": 1, "custom_title": "third"})  # the default: written at once
    assert synced[-1][0] == threading.get_ident()
    on_disk = json.loads((store.dir / "state.json").read_text(encoding="utf-8"))
    assert on_disk["custom_title"] == "third"
    store.close()


def test_the_work_dir_index_is_rewritten_only_when_it_changes(tmp_path):
    from soulwire.sessions.index import last_session_id, update_work_dir_index

    share = tmp_path / "share"
    update_work_dir_index(share, "/w", "s1")
    index = share / "kimi.json"
    first = index.stat().st_ino
    update_work_dir_index(share, "/w", "s1")  # announced, then closed: the same id again
    assert index.stat().st_ino == first  # not replaced
    update_work_dir_index(share, "/w", "s2")
    assert index.stat().st_ino != first and last_session_id(share, "/w") == "s2"
    update_work_dir_index(share, "/w", None, only_if="s1")  # s1 is not the last one: kept
    assert last_session_id(share, "/w") == "s2"
    update_work_dir_index(share, "/w", None, only_if="s2")
    assert last_session_id(share, "/w") is None


def test_the_index_is_parsed_again_only_when_another_process_rewrote_it(tmp_path, monkeypatch):
    import soulwire.sessions.index as index

    share = tmp_path / "share"
    reads: list[int] = []
    read = index._Loaded.read  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(
        index._Loaded,  # pyright: ignore[reportPrivateUsage]
        "read",
        classmethod(lambda cls, share_dir: reads.append(1) or read(share_dir)),  # type: ignore[misc]
    )
    index.update_work_dir_index(share, "/w1", "s1")
    index.update_work_dir_index(share, "/w1", "s1")
    index.update_work_dir_index(share, "/w2", "s2")
    assert len(reads) == 1  # its own writes are what it remembers
    # Another process replaces the index (a new file: another inode, size, time).
    other = json.loads((share / "kimi.json").read_text())
    other["work_dirs"].append({"path": "/elsewhere", "kaos": "local", "last_session_id": "x"})
    tmp = share / "other.tmp"
    tmp.write_text(json.dumps(other, indent=1))
    tmp.replace(share / "kimi.json")
    index.update_work_dir_index(share, "/w3", "s3")
    assert len(reads) == 2
    assert index.known_work_dirs(share) == ["/w1", "/w2", "/elsewhere", "/w3"]  # nothing lost


def test_index_updates_from_many_threads_all_land_and_are_written_together(tmp_path, monkeypatch):
    import threading

    import soulwire.sessions.index as index

    share = tmp_path / "share"
    writes: list[int] = []
    write = index._write  # pyright: ignore[reportPrivateUsage]
    everyone_queued = threading.Event()

    def queued() -> int:
        with index._pending_lock:  # pyright: ignore[reportPrivateUsage]
            return len(index._pending.get(share, []))  # pyright: ignore[reportPrivateUsage]

    def counting_write(share_dir, text):  # type: ignore[no-untyped-def]
        writes.append(len(json.loads(text)["work_dirs"]))
        if len(writes) == 1:
            # The first write holds the writer until every other update has queued behind
            # it, so that the next writer must take them all in one write.
            deadline = time.monotonic() + 30
            while queued() + writes[0] < 40 and time.monotonic() < deadline:
                time.sleep(0.001)
            everyone_queued.set()
        write(share_dir, text)

    monkeypatch.setattr(index, "_write", counting_write)
    gate = threading.Barrier(40)
    failures: list[BaseException] = []

    def announce(n: int) -> None:
        try:
            gate.wait(timeout=30)
            index.update_work_dir_index(share, f"/w{n}", f"s{n}")
            # Back from the call: the update is on disk, whoever wrote it.
            assert index.last_session_id(share, f"/w{n}") == f"s{n}"
        except BaseException as error:  # re-raised below: a thread's failure is the test's
            failures.append(error)

    threads = [threading.Thread(target=announce, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    if failures:
        raise failures[0]
    assert everyone_queued.is_set()
    assert sorted(index.known_work_dirs(share)) == sorted(f"/w{n}" for n in range(40))
    # The first write, then every update that waited behind it in one more write.
    assert len(writes) == 2 and writes[1] == 40


_FOREIGN_INDEXES = {
    "none": None,
    "empty list": '{"work_dirs": []}',
    "ours": '{"work_dirs": [{"path": "/a", "kaos": "local", "last_session_id": "s0"}]}',
    "indented, newline": json.dumps(
        {"work_dirs": [{"path": "/a", "kaos": "local", "last_session_id": "s0"}]}, indent=2
    )
    + "\n",
    "no spaces": '{"work_dirs":[{"path":"/a","kaos":"local","last_session_id":"s0"}]}',
    "another key last": '{"work_dirs": [{"path": "/a", "last_session_id": "s0"}], "other": [1]}',
    "another key first": '{"other": {"x": [2]}, "work_dirs": [{"path": "/a", "last_session_id": "s0"}]}',
}


@pytest.mark.parametrize("start", list(_FOREIGN_INDEXES), ids=list(_FOREIGN_INDEXES))
def test_index_updates_keep_any_index_file_whole(tmp_path, start):  # type: ignore[no-untyped-def]
    """New work dirs are spliced into the text on disk when that is safe (not re-encoding
    every work dir: bench/RESULTS.md §11h); whatever the file looked like, it stays one valid
    JSON object with every work dir, every other key, and each work dir's last session."""
    import soulwire.sessions.index as index

    share = tmp_path / "share"
    share.mkdir()
    text = _FOREIGN_INDEXES[start]
    if text is not None:
        (share / "kimi.json").write_text(text)
    before = json.loads(text) if text is not None else {}
    expected = {e["path"]: e.get("last_session_id") for e in before.get("work_dirs", [])}
    steps = [("/n1", "s1", None), ("/n2", "s2", None), ("/n3", "s3", None), ("/a", "s4", None)]
    steps += [("/n2", None, "s2"), ("/n4", "s5", None), ("/n1", None, "nope")]
    for work_dir, session_id, only_if in steps:
        index.update_work_dir_index(share, work_dir, session_id, only_if=only_if)
        if only_if is None or expected.get(work_dir) == only_if:
            expected[work_dir] = session_id
        on_disk = json.loads((share / "kimi.json").read_text())
        assert {e["path"]: e.get("last_session_id") for e in on_disk["work_dirs"]} == expected
        assert {k: v for k, v in on_disk.items() if k != "work_dirs"} == {
            k: v for k, v in before.items() if k != "work_dirs"
        }
    assert index.known_work_dirs(share) == list(expected)
