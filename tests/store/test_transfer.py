"""Sessions move between the file store and PostgreSQL both ways, whole and unchanged."""

from __future__ import annotations

import pytest

from soulwire.sessions.postgres import PostgresBackend
from soulwire.sessions.store import FileSessionStore
from soulwire.sessions.transfer import TransferError, copy_session

# pytest-xdist (--dist loadgroup): one throwaway cluster (the session fixture pg_cluster) for
# every store test, in one worker.
pytestmark = pytest.mark.xdist_group("postgres")


def _file(tmp_path, session_id: str, where: str = "share") -> FileSessionStore:
    return FileSessionStore(tmp_path / where, tmp_path / "work", session_id, protocol_version="1.9")


def _snapshot(store) -> tuple:
    archives = [list(store.load_archived_context(i)) for i in range(1, store.archived_contexts() + 1)]
    verbatim = [text for _, text in store.wire_records_verbatim()]
    return archives, list(store.load_context()), list(store.wire_records()), verbatim, store.load_state()


def test_file_to_postgres_and_back(tmp_path, backend: PostgresBackend):
    source = _file(tmp_path, "s1")
    source.append_context([{"role": "user", "content": "first"}])
    source.replace_context([{"role": "_system_prompt", "content": "p"}])
    source.append_context([{"role": "user", "content": "hé ✓"}, {"role": "assistant", "content": "ok"}])
    for message in (
        {"type": "TurnBegin", "payload": {"user_input": "first"}},
        {"type": "ContentPart", "payload": {"type": "text", "text": "ok"}},
        {"type": "TurnEnd", "payload": {}},
    ):
        source.record_wire(message)
    source.save_state({"version": 1, "custom_title": "moved", "approval": {"yolo": False}})

    copied = copy_session(source, backend.open("s1", work_dir=str(tmp_path / "work")))
    assert (copied.contexts, copied.context_records, copied.wire_messages) == (2, 4, 3)
    assert _snapshot(backend.open("s1")) == _snapshot(source)

    back = _file(tmp_path, "s1", where="share2")
    copy_session(backend.open("s1"), back)
    assert _snapshot(back) == _snapshot(source)
    assert back.has_open_turn() is False


def test_a_copy_never_merges_into_an_existing_session(tmp_path, backend: PostgresBackend):
    source = _file(tmp_path, "s2")
    source.append_context([{"role": "user", "content": "a"}])
    target = backend.open("s2")
    target.append_context([{"role": "user", "content": "already here"}])
    with pytest.raises(TransferError, match="already exists"):
        copy_session(source, target)
    with pytest.raises(TransferError, match="nothing to copy"):
        copy_session(_file(tmp_path, "empty"), backend.open("other"))
