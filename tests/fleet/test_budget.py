"""Budgets in a fleet: a task's own `budget` and the `--budget-*` flags of `fleet run` (under
the task's), enforced by each task's engine; a task a limit stopped is `failed` with the reason
`budget_exceeded`, its cost and usage in its result line."""

from __future__ import annotations

import json

import pytest

from soulwire.fleet import TaskResult, read_results
from tests.budget_cases import (
    KINDS,
    PRICES,
    RAISED_VALUE,
    SCOPES,
    STEP_TOKENS,
    calls_made,
    command_call,
    limit_value,
    scripts,
    step,
)
from tests.fleet.conftest import FleetLab
from tests.fleet.test_cli import fleet_cli


def shell_step(call_id: str, tokens: int, command: str | None = None) -> str:
    arguments = json.dumps({"command": command or f"echo {call_id}"})
    call = json.dumps({"id": call_id, "name": "Shell", "arguments": arguments})
    return f"tool_call: {call}\nusage: {json.dumps({'input_other': tokens, 'output': 0})}"


@pytest.mark.parametrize("engines", [("--engines", "fresh"), ("--engines", "warm")], ids=["fresh", "warm"])
def test_task_budgets_and_the_command_line_budget_stop_tasks(lab: FleetLab, engines: tuple[str, ...]) -> None:
    lab.task(
        "own", shell_step("o1", 600), shell_step("o2", 600), "text: never", budget={"tree": {"tokens": 1000}}
    )
    lab.task("flag", shell_step("f1", 600), "text: never")  # the flag's 500: crossed by the first call
    lab.task("roomy", shell_step("r1", 600), "text: done", budget={"tree": {"tokens": 100_000}})
    lab.write_tasks()
    run = fleet_cli(lab, "run", "tasks.jsonl", "--budget-tokens", "500", "--no-progress", *engines)
    assert run.returncode in (0, 1), run.stderr
    results = read_results(lab.root / "tasks.results.jsonl")
    assert (results["own"].status, results["own"].reason) == ("failed", "budget_exceeded")
    assert results["own"].usage.input_other == 600  # the second call was not made
    assert (results["flag"].status, results["flag"].reason) == ("failed", "budget_exceeded")
    assert results["roomy"].status == "done" and results["roomy"].final_message == "done"


def test_a_budget_scope_without_a_limit_is_a_usage_error(lab: FleetLab) -> None:
    lab.task("a", "text: ok")
    lab.write_tasks()
    run = fleet_cli(lab, "run", "tasks.jsonl", "--budget-scope", "turn")
    assert run.returncode == 2 and run.stderr.startswith(
        "soulwire fleet run: error: --budget-scope needs a limit"
    )


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("engines", [("--engines", "fresh"), ("--engines", "warm")], ids=["fresh", "warm"])
def test_the_run_total_stops_the_run_and_a_higher_total_continues_it(
    lab: FleetLab, engines: tuple[str, ...]
) -> None:
    """The task file's run total (1000 tokens) over three tasks of 600 each, one at a time: the
    first is stopped by its engine at the run's remainder (its next call would cross it), the
    second crosses it, the third does not start; all three run again under a higher total."""
    for name in ("a", "b", "c"):
        lab.task(name, shell_step(f"{name}1", 600), "text: never")
    lab.lines.insert(0, {"fleet": {"budget": {"tokens": 1000}}})
    lab.write_tasks()
    run = fleet_cli(lab, "run", "tasks.jsonl", "--json", "--concurrency", "1", *engines)
    assert run.returncode == 1, run.stderr
    results = read_results(lab.root / "tasks.results.jsonl")
    reasons = sorted(str(r.reason) for r in results.values())
    assert [r.status for r in results.values()] == ["cancelled"] * 3
    assert reasons == [
        "budget_exceeded: the run's total is nearly spent (stopped at its remainder)",
        "budget_exceeded: the run's total tokens limit (1000) is reached (not started)",
        "budget_exceeded: the run's total tokens limit (1000) is reached (stopped)",
    ]
    assert sorted(r.usage.input_other for r in results.values()) == [0, 600, 600]
    finished = _json_lines(run.stdout)[-1]
    assert finished["event"] == "fleet_finished"
    assert finished["run_budget"] == {
        "limits": {"tokens": 1000},
        "spent": {"tokens": 1200},
        "remaining": {"tokens": 0.0},
        "reached": True,
        "stopped_tasks": 3,
    }
    report = fleet_cli(lab, "report", "tasks.results.jsonl", "--markdown")
    assert "| stopped by a budget | 0 by their own, 3 by the run's total |" in report.stdout

    # Raised on the command line (over the file's): the stopped tasks continue their sessions.
    for name in ("a", "b", "c"):
        (lab.root / "scripts" / f"{name}.json").write_text(json.dumps([f"text: {name} done"]))
    again = fleet_cli(lab, "run", "tasks.jsonl", "--run-budget-tokens", "100000", "--no-progress", *engines)
    assert again.returncode == 0, again.stderr
    results = read_results(lab.root / "tasks.results.jsonl")
    assert {r.id: (r.status, r.final_message) for r in results.values()} == {
        n: ("done", f"{n} done") for n in ("a", "b", "c")
    }
    assert sum(r.resumed for r in results.values()) == 2  # the two that had started
    assert "run total: tokens" in again.stderr


def test_the_run_total_stops_tasks_running_together(lab: FleetLab) -> None:
    """Two tasks at once, each given the whole remainder: their spend together crosses the
    total; the one still running when it is reached is stopped at once, not at its end."""
    wait = "for i in $(seq 1200); do [ -f ../../slow/workspace/started ] && break; sleep 0.05; done"
    lab.task("quick", shell_step("q1", 10, wait), "text: quick done\nusage: " + json.dumps({"output": 800}))
    lab.task("slow", shell_step("s1", 10, "touch started && sleep 60"), "text: never")
    lab.write_tasks()
    run = fleet_cli(
        lab, "run", "tasks.jsonl", "--run-budget-tokens", "700", "--concurrency", "2", "--no-progress"
    )
    assert run.returncode == 1, run.stderr
    results = read_results(lab.root / "tasks.results.jsonl")
    assert (results["slow"].status, results["slow"].reason) == (
        "cancelled",
        "budget_exceeded: the run's total tokens limit (700) is reached (stopped)",
    )
    assert results["quick"].usage.output == 800
    assert "run total: tokens 820/700 (reached)" in run.stderr


def test_a_bad_fleet_line_names_its_line(lab: FleetLab) -> None:
    lab.lines.append({"fleet": {"budget": {"tool_calls": 3}}})
    lab.task("a", "text: ok")
    lab.write_tasks()
    run = fleet_cli(lab, "run", "tasks.jsonl")
    assert run.returncode == 2
    assert (
        run.stderr.startswith("soulwire fleet: ") and "tasks.jsonl:1: fleet.budget.tool_calls:" in run.stderr
    )


def each_limit_at_each_scope(lab: FleetLab) -> None:
    """A task for each limit at each scope (tests/budget_cases.py), its own budget that limit."""
    for kind in KINDS:
        for scope in SCOPES:
            line = lab.task(f"{kind}-{scope}", *scripts(kind), budget={scope: {kind: limit_value(kind)}})
            line["config"]["prices"] = PRICES


def check_each_stopped(results: dict[str, TaskResult]) -> None:
    """Each task was stopped by its limit after its first command, spending what it did."""
    for kind in KINDS:
        for scope in SCOPES:
            result = results[f"{kind}-{scope}"]
            assert (result.status, result.reason) == ("failed", "budget_exceeded"), (kind, scope, result)
            assert result.usage.input_other == STEP_TOKENS * calls_made(kind), (kind, scope)
            # priced with the task's own [prices], as its engine priced its money limit
            assert result.cost_usd == pytest.approx(result.usage.input_other * 100 / 1e6), (kind, scope)


def raise_each_limit(lab: FleetLab) -> None:
    """Each task's limit raised in the task file, its scripts what a new engine plays next."""
    for line in lab.lines:
        if "-" not in str(line["id"]):
            continue
        kind, scope = str(line["id"]).split("-")
        line["budget"] = {scope: {kind: RAISED_VALUE[kind]}}
        rest = scripts(kind)[calls_made(kind) :]  # a new engine replays the scripts from the start
        (lab.root / "scripts" / f"{line['id']}.json").write_text(json.dumps(rest))
    lab.write_tasks()


def check_each_continued(results: dict[str, TaskResult]) -> None:
    """Each task continued its session and finished; its line holds both runs' spend."""
    for kind in KINDS:
        for scope in SCOPES:
            result = results[f"{kind}-{scope}"]
            assert (result.status, result.final_message, result.resumed) == ("done", "continued", True), (
                kind,
                scope,
                result,
            )
            # the first run's calls, then the second command's (not run before: a tool-call limit)
            assert result.usage.input_other == 2 * STEP_TOKENS, (kind, scope)
            assert result.steps == 3, (kind, scope)


def test_each_limit_at_each_scope_stops_a_task_and_a_raised_one_continues_it(lab: FleetLab) -> None:
    """Twelve tasks, each with one limit at one scope, and one with room: each limited one is
    stopped after its first command (`failed`, `budget_exceeded`); the same command again, with
    the limits raised in the task file, over the same results file: each stopped task continues
    its session where it stopped and finishes, its line holding both runs' spend; the finished
    task is kept, not run again."""
    each_limit_at_each_scope(lab)
    lab.task("roomy", shell_step("r1", 600), "text: roomy done")
    lab.write_tasks()
    command = ("run", "tasks.jsonl", "--no-progress", "--concurrency", "4")
    run = fleet_cli(lab, *command)
    assert run.returncode == 1, run.stderr
    first = read_results(lab.root / "tasks.results.jsonl")
    check_each_stopped(first)
    assert first["roomy"].status == "done"

    raise_each_limit(lab)
    again = fleet_cli(lab, *command)
    assert again.returncode == 0, again.stderr
    results = read_results(lab.root / "tasks.results.jsonl")
    check_each_continued(results)
    assert results["roomy"] == first["roomy"]  # kept: its line is the first run's
    lines = (lab.root / "tasks.results.jsonl").read_text().splitlines()
    assert sum('"id":"roomy"' in line for line in lines) == 1


def test_a_budget_stopped_task_run_again_unchanged_stays_stopped_and_keeps_its_spend(lab: FleetLab) -> None:
    """The same command again, its tree limit unchanged: the task continues its session, whose
    limit its first call crossed: no model call is made (the script a new engine would play is
    not), it is stopped again, and its line still holds what the first run spent."""
    lab.task(
        "capped",
        shell_step("c1", 1200),
        shell_step("c2", 600),
        "text: never",
        budget={"tree": {"tokens": 1000}},
    )
    lab.write_tasks()
    command = ("run", "tasks.jsonl", "--no-progress", "--engines", "fresh")
    assert fleet_cli(lab, *command).returncode == 1
    first = read_results(lab.root / "tasks.results.jsonl")["capped"]
    assert (first.status, first.reason, first.usage.input_other) == ("failed", "budget_exceeded", 1200)
    (lab.root / "scripts" / "capped.json").write_text(json.dumps(["text: never"]))
    run = fleet_cli(lab, *command)
    assert run.returncode == 1, run.stderr
    result = read_results(lab.root / "tasks.results.jsonl")["capped"]
    assert (result.status, result.reason, result.resumed) == ("failed", "budget_exceeded", True)
    assert (result.usage.input_other, result.steps, result.session_id) == (1200, 1, first.session_id)
    assert result.final_message == first.final_message


RUN_TOTALS = {"usd": 0.1, "time_s": 4.0}
"""The run totals besides tokens (above): money as for the tasks' own limits; time larger, as
the run's wall time includes starting the engine."""


def run_total_tasks(lab: FleetLab, kind: str) -> None:
    """Two tasks under a run total of `kind`; a task's first command takes past the time total."""
    first = "sleep 5; echo slept" if kind == "time_s" else "echo one"
    for name in ("a", "b"):
        lab.task(name, step(command_call(f"{name}1", first), STEP_TOKENS), "text: never")
    lab.lines.insert(0, {"fleet": {"budget": {kind: RUN_TOTALS[kind]}}})
    (lab.root / "prices.json").write_text(json.dumps(PRICES))  # the run's prices: its engines' too


def check_run_total(results: list[TaskResult], kind: str, *, slow_start: bool = False) -> None:
    """One at a time: the first task is stopped (at the run's remainder), the second by the
    total (money: its first call crosses what was left; time: not started). `slow_start`: the
    time total may run out before the first task's engine makes its call (Ray's workers)."""
    assert [r.status for r in results] == ["cancelled"] * 2, [r.reason for r in results]
    assert all(str(r.reason).startswith("budget_exceeded: the run's") for r in results)
    spent = sorted(r.usage.input_other for r in results)
    if kind != "time_s":
        assert spent == [STEP_TOKENS, STEP_TOKENS], spent
    else:
        assert spent in ([0, STEP_TOKENS], [0, 0] if slow_start else [0, STEP_TOKENS]), spent


@pytest.mark.parametrize("kind", list(RUN_TOTALS))
def test_the_run_total_of_money_and_time_stops_the_run(lab: FleetLab, kind: str) -> None:
    run_total_tasks(lab, kind)
    lab.write_tasks()
    run = fleet_cli(lab, "run", "tasks.jsonl", "--json", "--concurrency", "1", "--prices", "prices.json")
    assert run.returncode == 1, run.stderr
    check_run_total(list(read_results(lab.root / "tasks.results.jsonl").values()), kind)
    finished = _json_lines(run.stdout)[-1]
    assert finished["run_budget"]["limits"] == {kind: RUN_TOTALS[kind]}
    assert finished["run_budget"]["reached"] is True
