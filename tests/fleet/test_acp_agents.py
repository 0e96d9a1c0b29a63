"""A fleet whose tasks name their agent: `soulwire` (the engine through the SDK) beside an ACP
agent command (`soulwire acp` with its own scripted model, a third-party agent as far as the
fleet knows): the same workspaces, checks and diffs, and a report that puts them side by side."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import pytest

from soulwire import fleet
from tests.acp.test_delegate import BAD_AGENT, _dead
from tests.fleet.conftest import FleetLab, write_file
from tests.fleet.test_cli import fleet_cli
from tests.wire_client import scripted_config

pytestmark = pytest.mark.anyio


def acp_task(lab: FleetLab, task_id: str, *scripts: str, **fields: object) -> None:
    """A task done by `soulwire acp` (its own config and scripted model)."""
    scripts_file = lab.root / "scripts" / f"{task_id}.json"
    scripts_file.parent.mkdir(parents=True, exist_ok=True)
    scripts_file.write_text(json.dumps(list(scripts)))
    config = lab.root / f"{task_id}.config.json"
    config.write_text(json.dumps(scripted_config(scripts_file)))
    agent = [sys.executable, "-m", "soulwire", "acp", "--config-file", str(config)]
    lab.lines.append({"id": task_id, "prompt": f"do {task_id}", "agent": agent, "time_limit": 60, **fields})


async def test_tasks_on_soulwire_and_on_an_acp_agent_are_reported_side_by_side(lab: FleetLab) -> None:
    source = lab.workspace("repo", {"README.md": "hello\n"})
    check = "grep -q done out.txt"
    for n in (1, 2):
        lab.task(
            f"sw-{n}", write_file("out.txt", "done\n"), "text: wrote it", workspace=str(source), check=check
        )
    acp_task(lab, "acp-1", write_file("out.txt", "done\n"), "text: wrote it too", workspace=str(source),
             check=check, approval="yolo")  # fmt: skip
    acp_task(lab, "acp-2", write_file("out.txt", "nope\n"), "text: rejected", workspace=str(source),
             check=check, approval="reject")  # fmt: skip
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "tasks.results.jsonl"
    async with fleet.run_fleet(tasks, concurrency=2, out=out, backend=lab.backend()) as results:
        async for _ in results:
            pass
    by_id = fleet.read_results(out)
    assert {r.id: r.status for r in by_id.values()} == dict.fromkeys(by_id, "done"), {
        r.id: r.reason for r in by_id.values()
    }
    label = f"{sys.executable} -m soulwire acp --config-file {lab.root / 'acp-1.config.json'}"
    assert by_id["acp-1"].agent == label and by_id["sw-1"].agent == "soulwire"
    assert by_id["acp-1"].passed is True and by_id["acp-1"].final_message == "wrote it too"
    assert "+done" in by_id["acp-1"].diff and by_id["acp-1"].session_id
    assert by_id["acp-2"].passed is False  # the policy rejected the write
    assert not Path(by_id["acp-2"].work_dir or "", "out.txt").exists()

    report = fleet_cli(lab, "report", str(out), "--json")
    assert report.returncode == 0, report.stderr
    agents = json.loads(report.stdout)["agents"]
    assert agents["soulwire"]["checks passed"] == "2/2 (100%)"
    assert sorted(v["checks passed"] for k, v in agents.items() if k != "soulwire") == [
        "0/1 (0%)",
        "1/1 (100%)",
    ]
    markdown = fleet_cli(lab, "report", str(out), "--markdown").stdout
    assert "| measure | soulwire |" in markdown


def test_an_agent_that_is_neither_soulwire_nor_a_command_is_refused(lab: FleetLab) -> None:
    lab.lines.append({"id": "t", "prompt": "p", "agent": "claude"})
    with pytest.raises(fleet.TaskFileError) as refused:
        fleet.load_tasks(lab.write_tasks())
    assert "agent" in str(refused.value)


async def test_bad_acp_agents_fail_their_task_alone_and_leave_nothing_running(lab: FleetLab) -> None:
    """A command that does not exist, one that crashes at the prompt, answers garbage, never
    answers `initialize`, or goes silent mid-turn: each its task's one-line failure (or
    `timed_out`), the agent's whole process group gone, and the fleet's other task done."""
    expected = {
        "missing": ("failed", "cannot start the ACP agent '/nonexistent/acp-agent'"),
        "crash": ("failed", "exited with status 3 mid-turn"),
        "garbage": ("failed", "not JSON-RPC"),
        "silent": ("timed_out", "time limit 3s (the agent did not start)"),
        "hang": ("timed_out", "time limit 3s"),
    }
    for mode in expected:
        command = ["/nonexistent/acp-agent"] if mode == "missing" else [
            sys.executable, BAD_AGENT, mode, str(lab.root / f"{mode}.pids")
        ]  # fmt: skip
        lab.lines.append({"id": mode, "prompt": "do it", "agent": command, "time_limit": 3})
    lab.task("fine", write_file("out.txt", "done\n"), "text: ok", check="grep -q done out.txt")
    tasks = fleet.load_tasks(lab.write_tasks())
    out = lab.root / "tasks.results.jsonl"
    async with fleet.run_fleet(tasks, concurrency=3, out=out, backend=lab.backend()) as results:
        async for _ in results:
            pass
    by_id = fleet.read_results(out)
    assert by_id["fine"].status == "done" and by_id["fine"].passed is True
    for mode, (status, reason) in expected.items():
        result = by_id[mode]
        assert result.status == status and reason in (result.reason or ""), (mode, result.reason)
        assert "\n" not in (result.reason or "") and "Traceback" not in (result.reason or "")
        if mode != "missing":  # the agent's child (same process group) went with it
            child = int((lab.root / f"{mode}.pids").read_text().split()[0])
            deadline = time.monotonic() + 10
            while not _dead(child):
                assert time.monotonic() < deadline, f"{mode}: the agent's child outlived its task"
                await anyio.sleep(0.05)
