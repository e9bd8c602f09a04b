"""The table of README.md from the run folders here:

    python docs/results/sac-nstep-entropy/table.py docs/results/sac-nstep-entropy

Per seed: the training-return window (`return_mean`, 20 episodes) at 4k / 6k / 8k / 10k env
steps, the first logged step with a window >= -200, the final evaluation and the last q_mean.
"""

from __future__ import annotations

import csv
import json
import sys

import numpy as np


def cells(run: str) -> tuple[str, str, str, str]:
    rows = list(csv.DictReader(open(f"{run}/metrics.csv")))
    steps = np.array([float(r["env_steps"]) for r in rows])
    window = np.array([float(r["return_mean"] or "nan") for r in rows])
    points = [f"{window[np.flatnonzero(steps <= k)[-1]]:.0f}" for k in (4000, 6000, 8000, 10000)]
    ok = np.flatnonzero(window >= -200)
    first = f"{int(steps[ok[0]]):,}" if len(ok) else "never"
    evaluation = json.load(open(f"{run}/summary.json"))["eval_return_mean"]
    return " / ".join(points), first, f"{evaluation:.1f}", f"{float(rows[-1]['q_mean']):.1f}"


def main(root: str) -> None:
    print(
        "| seed | before: window at 4k / 6k / 8k / 10k | after | first window ≥ −200 "
        "(before / after) | eval (before / after) | q_mean at 10k (before / after) |"
    )
    print("|---|---|---|---|---|---|")
    for seed in range(4):
        b, a = cells(f"{root}/before-s{seed}"), cells(f"{root}/after-s{seed}")
        print(f"| {seed} | {b[0]} | {a[0]} | {b[1]} / {a[1]} | {b[2]} / {a[2]} | {b[3]} / {a[3]} |")


if __name__ == "__main__":
    main(sys.argv[1])
