"""Plot learning curves: `python -m experiments.plot runs/<a> [runs/<b> ...] [--out curves.png]`.

Draws the mean episode return (unclipped, full games) against env steps, and against wall
time, for every run given, plus each run's critic loss (`value_loss`) and policy entropy
where the agent logs them (README, "Metrics"). With two or more runs
it also prints a comparison at their common env-step budget: the return each run had reached
by then, and the env steps and training seconds each took to first reach every
`--thresholds` return.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro


@dataclass(frozen=True)
class PlotArgs:
    """Draw learning curves of one or more run folders into a PNG."""

    runs: tyro.conf.Positional[tuple[str, ...]]
    """Run folders (each with a metrics.csv)."""
    out: str | None = None
    """Output PNG; default <first run>/curves.png."""
    x: Literal["env_steps", "frames"] = "env_steps"
    """Horizontal axis of the return-vs-experience panel."""
    title: str | None = None
    """Figure title."""
    thresholds: tuple[float, ...] = ()
    """Returns to report the first-reached env steps and training seconds of (per run)."""


def read_metrics(run: Path) -> dict[str, list[float]]:
    path = run / "metrics.csv"
    if not path.exists():
        raise SystemExit(f"error: {path} not found")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"error: {path} has no rows yet")
    out: dict[str, list[float]] = {}
    for key in rows[0]:
        out[key] = [float(r[key]) if r[key] not in ("", None) else math.nan for r in rows]
    return out


def _last_at_or_before(m: dict[str, list[float]], budget: float) -> int:
    """Index of the last logged row with env_steps <= budget (the first row if none)."""
    idx = 0
    for i, steps in enumerate(m["env_steps"]):
        if steps <= budget:
            idx = i
    return idx


def first_reached(m: dict[str, list[float]], threshold: float) -> tuple[float, float] | None:
    """(env_steps, wall_s) of the first logged row whose mean return is >= threshold."""
    for steps, ret, wall in zip(m["env_steps"], m["return_mean"], m["wall_s"], strict=True):
        if not math.isnan(ret) and ret >= threshold:
            return steps, wall
    return None


def compare(runs: dict[str, dict[str, list[float]]], thresholds=()) -> list[str]:
    """Lines comparing runs at their common env-step budget and at return thresholds."""
    budget = min(m["env_steps"][-1] for m in runs.values())
    lines = [f"common budget: {budget:,.0f} env steps"]
    for name, m in runs.items():
        i = _last_at_or_before(m, budget)
        lines.append(
            f"{name}: return {m['return_mean'][i]:.1f} at {m['env_steps'][i]:,.0f} env steps, "
            f"{m['wall_s'][i]:,.0f} s of training ({m['env_steps'][i] / m['wall_s'][i]:.1f} "
            "steps/s)"
        )
        for threshold in thresholds:
            hit = first_reached(m, threshold)
            where = "not reached" if hit is None else f"{hit[0]:,.0f} env steps, {hit[1]:,.0f} s"
            lines.append(f"  first return >= {threshold:g}: {where}")
    return lines


def main(argv: list[str] | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args = tyro.cli(PlotArgs, args=argv)
    runs = [Path(r) for r in args.runs]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    names = [run.name for run in runs]
    if len(set(names)) < len(names):  # same folder name under different parents
        names = [str(run) for run in runs]
    metrics = {name: read_metrics(run) for name, run in zip(names, runs, strict=True)}
    for label, m in metrics.items():
        axes[0, 0].plot(m[args.x], m["return_mean"], label=label)
        axes[0, 1].plot([w / 60 for w in m["wall_s"]], m["return_mean"], label=label)
        for ax, name in ((axes[1, 0], "value_loss"), (axes[1, 1], "entropy")):
            if name in m:  # not every agent has a critic or a stochastic policy
                ax.plot(m["env_steps"], m[name], label=label)
    axes[0, 0].set(xlabel=args.x.replace("_", " "), ylabel="mean episode return")
    axes[0, 1].set(xlabel="training wall time (min)", ylabel="mean episode return")
    axes[1, 0].set(xlabel="env steps", ylabel="critic loss (each agent's own)", yscale="log")
    axes[1, 1].set(xlabel="env steps", ylabel="policy entropy")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    out = Path(args.out) if args.out else runs[0] / "curves.png"
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")
    if len(runs) > 1 or args.thresholds:
        print("\n".join(compare(metrics, args.thresholds)))
    return out


if __name__ == "__main__":
    main()
