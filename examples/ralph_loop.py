"""The "Ralph loop" for CI: never trust the agent's word — run a verification command after
every turn and, while it fails, prompt again with the failure output, up to N iterations.

    python examples/ralph_loop.py                 # offline: the scripted agent needs two tries
    python examples/ralph_loop.py --real --work-dir path/to/project

Exit code 0 when the verification passed, 1 when it still fails after the last iteration."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from offline import call, session_options

import soulwire.sdk as sdk

MAX_ITERATIONS = 3
TASK = "Create calc.py with a function add(a, b) that returns the sum of a and b."
VERIFY = [
    sys.executable,
    "-B",  # no calc.pyc: a rewrite of the same size within a second would pass as unchanged
    "-c",
    "import calc; assert calc.add(2, 3) == 5, f'add(2, 3) returned {calc.add(2, 3)}'",
]

DEMO_REPLIES = [
    call("w1", "write_file", {"path": "calc.py", "content": "def add(a, b):\n    return a - b\n"}),
    "text: Done: calc.py defines add().",
    call("w2", "write_file", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}),
    "text: Fixed the operator in add().",
]


def file_writer(root: Path) -> sdk.Tool:
    @sdk.tool
    def write_file(path: str, content: str) -> str:
        """Write a text file inside the project (created or overwritten).

        Args:
            path: path relative to the project root
            content: the whole new content
        """
        target = (root / path).resolve()
        if root.resolve() not in target.parents:
            raise sdk.ToolError(f"{path} is outside the project")
        target.write_text(content)
        return f"wrote {len(content)} bytes to {path}"

    return write_file


def verify(root: Path) -> tuple[bool, str]:
    done = subprocess.run(VERIFY, cwd=root, capture_output=True, text=True, timeout=120)
    return done.returncode == 0, (done.stdout + done.stderr).strip()


async def main() -> int:
    options = session_options(DEMO_REPLIES, __doc__ or "")
    root = Path(options.get("work_dir") or ".")
    async with sdk.Session(**options, tools=[file_writer(root)], yolo=True) as session:
        prompt = TASK
        for iteration in range(1, MAX_ITERATIONS + 1):
            result = await session.prompt(prompt)
            ok, output = verify(root)
            print(
                f"iteration {iteration}: agent said {result.final_text!r}; verification "
                f"{'passed' if ok else 'FAILED'}"
            )
            if ok:
                return 0
            prompt = (
                f"The verification command failed:\n\n$ {' '.join(VERIFY)}\n{output[-2000:]}\n\n"
                "Fix the problem; the command must pass."
            )
    print(f"still failing after {MAX_ITERATIONS} iterations")
    return 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
