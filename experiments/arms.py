"""The table of an A/B experiment: `python -m experiments.arms DIR [--at STEPS...]`.

DIR holds one folder per arm (one configuration, e.g. a flag on or off), each a population
run (`--num-seeds N`: its `member-<k>/` folders are the seeds) or a folder of single runs.
Per arm, each seed's training return (metrics.csv's `return_mean`: the mean of its last
finished episodes) at the env steps `--at` (the last row at or before each), its mean over the
whole run (the area under the curve), with `--above R` the first env step at which it
exceeded R (seeds that never did are counted, not averaged), and the final evaluation
(summary.json's `eval_return_mean`). Each column is the mean over the arm's seeds with a 95%
percentile bootstrap interval (10,000 resamples of the seeds, one generator seeded 0 for the
whole table, so the same folders print the same table). Prints a GitHub Markdown table.

Run folders are read as data, never executed (`experiments.report`'s readers: a damaged
metrics.csv or summary.json is a one-line error naming the file).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from engine.args import cli
from experiments.report import read_curve, read_summary

RESAMPLES = 10_000


@dataclass(frozen=True)
class ArmsArgs:
    """Print the table of an A/B experiment's arms (module docstring)."""

    dir: tyro.conf.Positional[str]
    """The experiment's folder: one subfolder per arm."""
    arms: tuple[str, ...] = ()
    """The arms, in the table's order (default: every subfolder holding runs, by name)."""
    at: tuple[int, ...] = ()
    """Env steps at which to read each seed's training return."""
    above: float | None = None
    """Also the first env step at which each seed's training return exceeded this."""

    def __post_init__(self):
        if any(s < 0 for s in self.at):
            raise ValueError(f"--at takes env steps >= 0, got {list(self.at)}")
        if self.above is not None and not math.isfinite(self.above):
            raise ValueError(f"--above must be a finite return, got {self.above}")


def seed_runs(arm: Path) -> list[Path]:
    """The run folders of an arm: its population's members, or its single runs."""
    members = sorted(arm.glob("member-*"), key=_number)
    if members:
        return members
    return sorted(p.parent for p in arm.glob("*/metrics.csv")) or (
        [arm] if (arm / "metrics.csv").is_file() else []
    )


def _number(path: Path) -> int:
    tail = path.name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1


def seed_row(run: Path, at: tuple[int, ...], above: float | None) -> list[float]:
    """One seed's cells (NaN where it has none: before its first finished episode, never
    above the threshold, not evaluated)."""
    curve, _ = read_curve(run)
    finite = np.isfinite(curve["return_mean"])
    steps, ret = curve["env_steps"][finite], curve["return_mean"][finite]
    cells = []
    for s in at:
        i = np.searchsorted(steps, s, side="right") - 1
        cells.append(ret[i] if i >= 0 else math.nan)
    cells.append(ret.mean() if len(ret) else math.nan)
    if above is not None:
        hit = np.flatnonzero(ret > above)
        cells.append(steps[hit[0]] if len(hit) else math.nan)
    cells.append(read_summary(run).get("eval_return_mean", math.nan))
    return [float(c) for c in cells]


def interval(x: np.ndarray, rng) -> str:
    """`mean [low, high]` over the finite values (with how many where some are not)."""
    finite = x[np.isfinite(x)]
    if not len(finite):
        return "—"
    means = rng.choice(finite, size=(RESAMPLES, len(finite)), replace=True).mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    text = f"{finite.mean():,.0f} [{lo:,.0f}, {hi:,.0f}]"
    return text if len(finite) == len(x) else f"{text} ({len(finite)} of {len(x)})"


def table(args: ArmsArgs) -> str:
    root = Path(args.dir)
    if not root.is_dir():
        raise SystemExit(f"error: {root}: no such folder")
    arms = args.arms or tuple(p.name for p in sorted(root.iterdir()) if p.is_dir() and seed_runs(p))
    head = [f"{s // 1000}k" if s % 1000 == 0 else str(s) for s in args.at] + ["run mean"]
    if args.above is not None:
        head.append(f"first step above {args.above:g}")
    head.append("final eval")
    lines = ["| arm | seeds | " + " | ".join(head) + " |", "|---|---|" + "---|" * len(head)]
    rng = np.random.default_rng(0)
    for arm in arms:
        runs = seed_runs(root / arm)
        if not runs:
            raise SystemExit(f"error: {root / arm}: no runs (member-<k>/ or run folders) in it")
        try:
            rows = np.array([seed_row(r, args.at, args.above) for r in runs])
        except ValueError as err:
            raise SystemExit(f"error: {err}") from None
        cells = [interval(rows[:, j], rng) for j in range(rows.shape[1])]
        lines.append(f"| {arm} | {len(runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    text = table(cli(ArmsArgs, argv))
    print(text)
    return text


if __name__ == "__main__":
    main()
