"""Recorded events for the trace view with large payloads by reference: a record over
`max_record_bytes` keeps its small members (ids, names, statuses) and names a blob that holds
the whole payload, read back over HTTP on demand."""

from __future__ import annotations

import json

from tests.tool_calls import call


def test_a_large_record_comes_by_reference_and_its_blob_is_the_whole_payload(serve, sandbox):
    command = "for i in $(seq 0 19999); do echo line $i; done"  # ~170 KB of output (capped at 50,000)
    server = serve(call("tc1", "Shell", {"command": command}), "text: printed", args=("--yolo",))
    session = server.create_session()
    ws = server.ws(session)
    ws.initialize()
    _, done = ws.call("prompt", {"user_input": "print a lot"})
    assert done["result"]["status"] == "finished"
    whole = server.api("GET", f"/api/sessions/{session}/records").json()["records"]
    cut = server.api("GET", f"/api/sessions/{session}/records?max_record_bytes=16384").json()["records"]
    assert [r["message"]["type"] for r in whole] == [r["message"]["type"] for r in cut]
    by_ref = [r for r in cut if "blob" in r["message"]]
    assert [r["message"]["type"] for r in by_ref] == ["ToolResult"]
    result = by_ref[0]["message"]
    # What a timeline needs stays; the output itself is in the blob.
    assert result["payload"]["tool_call_id"] == "tc1"
    assert result["payload"]["return_value"]["is_error"] is False
    assert "output" not in result["payload"]["return_value"]
    assert result["blob"]["size"] > 40_000 and result["blob"]["preview"].startswith(
        "{"
    )  # (outputs are capped)
    loaded = server.api("GET", f"/api/blobs/{result['blob']['blob_id']}").json()
    original = next(r for r in whole if r["message"]["type"] == "ToolResult")["message"]["payload"]
    assert loaded == original and loaded["return_value"]["output"].startswith("line 0\nline 1\n")
    small = [r for r in cut if "blob" not in r["message"]]
    assert small == [r for r in whole if json.dumps(r).encode().__len__() <= 16384]
    assert server.api("GET", f"/api/sessions/{session}/records?max_record_bytes=10").status_code == 422
