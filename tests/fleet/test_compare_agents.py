"""The documented example `examples/fleet/compare-agents/tasks.jsonl` run whole: 20 tasks, 10 on
`soulwire` and 10 on the reference `kimi acp` (kimi-cli 1.49.0), in copies of the same
workspace, checked by the same unittest commands, and reported side by side (pass rate, time,
cost). Both agents play scripted models (offline): Soulwire's answers every task right, kimi's
gets two wrong on purpose, so the report has a difference to show. Marked `soak` (minutes on
a busy machine: 20 agent processes, kimi-cli's slow to start); CI runs it in its bounded slow step."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from soulwire import fleet
from soulwire.wire.pricing import parse_prices
from tests.acp.kimi import KIMI, kimi_world, needs_kimi
from tests.fleet.conftest import FleetLab, write_file
from tests.fleet.test_cli import fleet_cli
from tests.wire_client import scripted_config

pytestmark = [pytest.mark.anyio, pytest.mark.soak, pytest.mark.timeout(600), needs_kimi]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet" / "compare-agents"
WRONG_ON_KIMI = {"halve", "is_even"}
PRICES = {"scripted_echo": {"input": 1.0, "output": 2.0}}  # USD per million tokens


def solved(source: str, name: str, body: str) -> str:
    """calc.py with `name` written (`body`: its return expression)."""
    pattern = rf"(def {name}\(.*?\) -> \w+:\n(?:    \"\"\".*?\"\"\"\n)?)    raise NotImplementedError"
    out, count = re.subn(pattern, rf"\g<1>    return {body}", source, flags=re.S)
    assert count == 1, name
    return out


BODIES = {
    "add": "a + b", "subtract": "a - b", "multiply": "a * b", "square": "a * a", "negate": "-a",
    "double": "2 * a", "halve": "a // 2", "maximum": "max(a, b)", "minimum": "min(a, b)",
    "is_even": "a % 2 == 0",
}  # fmt: skip
WRONG = {"halve": "a / 2", "is_even": "a % 2 == 1"}


def scripted_tasks(lab: FleetLab) -> Path:
    """The example's lines, each agent given a scripted model that writes its function."""
    source = (EXAMPLE / "repo" / "calc.py").read_text()
    lines: list[dict[str, Any]] = []
    for raw in (EXAMPLE / "tasks.jsonl").read_text().splitlines():
        line = json.loads(raw)
        name, agent = line["id"].rsplit("-", 1)
        line["workspace"] = str(EXAMPLE / line["workspace"])
        if agent == "kimi":
            assert line["agent"] == ["kimi", "acp"]
            body = WRONG.get(name, BODIES[name])
            step = write_file("calc.py", solved(source, name, body))
            line["agent"] = [KIMI, "acp"]
            line["env"] = kimi_world(lab.root, step, f"text: wrote {name}", name=line["id"])
        else:
            assert "agent" not in line
            scripts = lab.root / "scripts" / f"{line['id']}.json"
            scripts.parent.mkdir(parents=True, exist_ok=True)
            step = "usage: input_other=1000 output=200\n" + write_file(
                "calc.py", solved(source, name, BODIES[name])
            )
            scripts.write_text(json.dumps([step, f"usage: input_other=1200 output=20\ntext: wrote {name}"]))
            line["config"] = scripted_config(scripts)
        lines.append(line)
    lab.lines = lines
    return lab.write_tasks()


async def test_twenty_tasks_on_soulwire_and_kimi_acp_reported_side_by_side(lab: FleetLab) -> None:
    tasks = fleet.load_tasks(scripted_tasks(lab))
    assert len(tasks) == 20
    out = lab.root / "results.jsonl"
    backend = fleet.LocalBackend(lab.settings(prices=parse_prices(PRICES)))
    async with fleet.run_fleet(tasks, concurrency=4, out=out, backend=backend) as results:
        async for _ in results:
            pass
    by_id = fleet.read_results(out)
    assert {r.status for r in by_id.values()} == {"done"}, {r.id: r.reason for r in by_id.values()}
    failed = {r.id for r in by_id.values() if not r.passed}
    assert failed == {f"{name}-kimi" for name in WRONG_ON_KIMI}
    kimi_label = f"{KIMI} acp"
    assert {r.agent for r in by_id.values()} == {"soulwire", kimi_label}

    report = fleet_cli(lab, "report", str(out), "--json")
    assert report.returncode == 0, report.stderr
    agents = json.loads(report.stdout)["agents"]
    assert list(agents) == ["soulwire", kimi_label]
    assert agents["soulwire"]["checks passed"] == "10/10 (100%)"
    assert agents[kimi_label]["checks passed"] == "8/10 (80%)"
    assert agents["soulwire"]["cost"].startswith("$0.0264 ")  # 10 tasks of 2200 in, 220 out at $1 / $2 per M
    assert agents[kimi_label]["cost"].startswith("unknown")  # kimi acp reports no usage
    for agent in agents.values():  # the time each agent took, per task
        assert re.fullmatch(r"[\d.]+s / [\d.]+s / [\d.]+s", agent["duration p50 / p90 / max"]), agent
    markdown = fleet_cli(lab, "report", str(out), "--markdown").stdout
    assert f"| measure | soulwire | {kimi_label} |" in markdown
