"""Starting a task from a checkpoint of an earlier run (`from_checkpoint: "RUN/TASK@CKPT"`):
the earlier task's session is forked at that checkpoint into the new task's workspace (its
files as the checkpoint recorded them, the conversation before it), and the task's prompt
runs in the fork. The engine does the forking (the Wire `fork` method), so this works with
whatever engine and session store the run uses."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import anyio.to_thread

import soulwire.sdk as sdk
from soulwire.fleet.errors import FleetError
from soulwire.fleet.results import TaskResult, read_results


class RerunError(FleetError):
    """The checkpoint to start from cannot be found or forked (one line)."""


class CheckpointRef(NamedTuple):
    results: Path
    """The earlier run's results file."""
    task: str
    checkpoint: str | None
    """None: the task's last checkpoint."""


def parse_ref(text: str) -> CheckpointRef:
    """`RUN/TASK@CKPT` (RUN: a results file, or its run dir `X.run` beside `X.jsonl`)."""
    run, _, last = text.rstrip("/").rpartition("/")
    task, _, checkpoint = last.partition("@")
    if not run or not task:
        raise RerunError(f"from_checkpoint {text!r}: expected RUN/TASK@CHECKPOINT")
    results = Path(run)
    if results.is_dir() and results.name.endswith(".run"):
        results = results.with_name(results.name.removesuffix(".run") + ".jsonl")
    return CheckpointRef(results, task, checkpoint or None)


def earlier(ref: CheckpointRef) -> tuple[TaskResult, str]:
    """The earlier task's result and the checkpoint to start from."""
    if not ref.results.is_file():
        raise RerunError(f"from_checkpoint: no results file {ref.results}")
    found = read_results(ref.results).get(ref.task)
    if found is None:
        raise RerunError(f"from_checkpoint: {ref.results} has no task {ref.task!r}")
    if found.session_id is None or found.work_dir is None:
        raise RerunError(f"from_checkpoint: task {ref.task!r} of {ref.results} has no session")
    checkpoint = ref.checkpoint or found.checkpoint
    if checkpoint is None:
        raise RerunError(
            f"from_checkpoint: task {ref.task!r} of {ref.results} has no checkpoint"
            " (run it with checkpoints: true)"
        )
    return found, checkpoint


async def fork_into(options: sdk.Options, ref_text: str, work_dir: Path) -> tuple[str, str]:
    """Fork the checkpoint `ref_text` names into `work_dir` (replaced); returns (the fork's
    session id, `RUN/TASK@CKPT` with the checkpoint spelled out). `options` are the task's
    session options: the earlier session is opened with its engine settings."""
    ref = parse_ref(ref_text)
    found, checkpoint = earlier(ref)
    await anyio.to_thread.run_sync(lambda: shutil.rmtree(work_dir, ignore_errors=True))
    work_dir.parent.mkdir(parents=True, exist_ok=True)
    options.work_dir, options.session_id = Path(found.work_dir or ""), found.session_id
    options.checkpoints, options.tools = True, []
    try:
        async with sdk.Session(options) as source:
            forked = await source.fork(checkpoint=checkpoint, work_dir=work_dir)
    except sdk.SDKError as exc:
        raise RerunError(f"from_checkpoint {ref_text}: {exc}") from None
    return forked.session_id, f"{ref.results}/{ref.task}@{checkpoint}"


__all__ = ["CheckpointRef", "RerunError", "earlier", "fork_into", "parse_ref"]
