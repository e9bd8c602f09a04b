"""The table of docs/results/sac-prediction/README.md from the kept runs:
`python docs/results/sac-prediction/report.py` (reads <arm>/member-<k>/ beside it).

Per arm: each seed's training return (mean of its last finished episodes, metrics.csv's
return_mean) at 5k, 10k, 15k and 20k env steps, its mean over the whole run (the area under
the curve), and the final evaluation (summary.json: 10 episodes); the mean over the seeds
with a 95% percentile bootstrap interval (10,000 resamples of the seeds, seed 0)."""

from __future__ import annotations

import csv
import json
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).parent
ARMS = ("none", "prediction", "prediction-no-extra")
AT = (5_000, 10_000, 15_000, 20_000)


def seed_row(member: pathlib.Path) -> list[float]:
    rows = [r for r in csv.DictReader(open(member / "metrics.csv")) if r["return_mean"] != "nan"]
    steps = np.array([int(r["env_steps"]) for r in rows])
    ret = np.array([float(r["return_mean"]) for r in rows])
    at = [ret[np.searchsorted(steps, s, side="right") - 1] for s in AT]
    final = json.loads((member / "summary.json").read_text())
    evaluation = final.get("eval_return_mean", final.get("eval", {}).get("return_mean"))
    return [*at, float(ret.mean()), float(evaluation)]


def interval(x: np.ndarray, rng) -> str:
    means = rng.choice(x, size=(10_000, len(x)), replace=True).mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return f"{x.mean():,.0f} [{lo:,.0f}, {hi:,.0f}]"


def main() -> None:
    rng = np.random.default_rng(0)
    head = [f"{s // 1000}k" for s in AT] + ["run mean", "final eval"]
    print("| arm | seeds | " + " | ".join(head) + " |")
    print("|---|---|" + "---|" * len(head))
    for arm in ARMS:
        members = sorted((HERE / arm).glob("member-*"))
        if not members:
            continue
        table = np.array([seed_row(m) for m in members])
        cells = [interval(table[:, j], rng) for j in range(table.shape[1])]
        print(f"| {arm} | {len(members)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
