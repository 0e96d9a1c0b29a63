#!/usr/bin/env python3
"""Print a Markdown table comparing two `wire_bench.py --json` results (medians), with the
ratio reference / soulwire (>1 means soulwire is faster or smaller).

    python3 bench/side_by_side.py reference.json soulwire.json > table.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HIGHER_IS_BETTER = ("events/s",)


def main(reference_path: str, ours_path: str) -> int:
    with Path(reference_path).open(encoding="utf-8") as file:
        reference = json.load(file)
    with Path(ours_path).open(encoding="utf-8") as file:
        ours = json.load(file)
    names = (reference.get("label") or "reference", ours.get("label") or "soulwire")
    print(f"| scenario | metric | {names[0]} | {names[1]} | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for group, metrics in ours["results"].items():
        for metric, stats in metrics.items():
            ref = reference["results"].get(group, {}).get(metric)
            mine = stats["median"]
            if ref is None:
                print(f"| {group} | {metric} | - | {mine:,.1f} | |")
                continue
            theirs = ref["median"]
            if any(k in metric for k in HIGHER_IS_BETTER):
                ratio = mine / theirs if theirs else float("inf")
            else:
                ratio = theirs / mine if mine else float("inf")
            print(f"| {group} | {metric} | {theirs:,.1f} | {mine:,.1f} | {ratio:,.1f}\u00d7 |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
