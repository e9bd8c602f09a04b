"""Plot learning curves: `python -m experiments.plot runs/<a> [runs/<b> ...] [--out curves.png]`.

Draws the mean episode return (unclipped, full games) against env steps, and against wall
time, for every run given, plus the critic and policy losses of each.
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


def main(argv: list[str] | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    args = tyro.cli(PlotArgs, args=argv)
    runs = [Path(r) for r in args.runs]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for run in runs:
        m = read_metrics(run)
        label = run.name
        axes[0, 0].plot(m[args.x], m["return_mean"], label=label)
        axes[0, 1].plot([w / 60 for w in m["wall_s"]], m["return_mean"], label=label)
        axes[1, 0].plot(m["env_steps"], m["value_loss"], label=label)
        axes[1, 1].plot(m["env_steps"], m["entropy"], label=label)
    axes[0, 0].set(xlabel=args.x.replace("_", " "), ylabel="mean episode return")
    axes[0, 1].set(xlabel="training wall time (min)", ylabel="mean episode return")
    axes[1, 0].set(xlabel="env steps", ylabel="critic loss", yscale="log")
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
    return out


if __name__ == "__main__":
    main()
