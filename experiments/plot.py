"""Plot learning curves: `python -m experiments.plot runs/<a> [runs/<b> ...] [--out curves.png]`.

Draws the mean episode return (unclipped, full games) against env steps, and against wall
time, for every run given, plus each one's critic loss and its exploration (policy entropy,
or the ε of ε-greedy). With two or more runs
it also prints a comparison at their common env-step budget: the return each run had reached
by then, and the env steps and training seconds each took to first reach every
`--thresholds` return.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

from engine.args import cli
from engine.runfolder import UnsafePathError, WriteError, atomic_path


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

    def __post_init__(self):
        if not self.runs or any(not r.strip() for r in self.runs):
            raise ValueError(f"RUNS must be one or more run folders, got {list(self.runs)}")
        bad = [t for t in self.thresholds if not math.isfinite(t)]
        if bad:
            raise ValueError(f"--thresholds must be finite numbers, got {bad[0]}")
        if self.out is not None:
            out = Path(self.out)
            if not out.parent.is_dir() or out.is_dir():
                raise ValueError(f"--out must be a file in an existing folder, got {self.out!r}")


# Columns every plot needs; the loss panels are drawn for the runs that have theirs.
REQUIRED = ("env_steps", "return_mean", "wall_s")


def read_metrics(run: Path, columns=REQUIRED) -> dict[str, list[float]]:
    """The numeric columns of `run`/metrics.csv. A last line without its newline (half
    written by a live run) is left out; a cell that is not a number reads as NaN; rows
    without a finite env_steps are dropped. Problems are one-line `ValueError`s naming the
    file."""
    if not run.exists():
        raise ValueError(f"run folder {run} does not exist")
    if not run.is_dir():
        raise ValueError(f"{run} is not a folder")
    path = run / "metrics.csv"
    if not path.is_file():
        raise ValueError(f"{run} is not a run folder (no metrics.csv)")
    try:
        with open(path, newline="") as f:
            text = f.read()
        if "\n" in text and not text.endswith("\n"):  # a row being written: not yet a row
            text = text[: text.rindex("\n") + 1]
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{path} cannot be read: {err}") from None
    missing = [c for c in columns if c not in header]
    if missing:
        what = "is empty" if not header else f"has no column {', '.join(missing)}"
        raise ValueError(f"{path} {what}")
    out: dict[str, list[float]] = {key: [] for key in header}
    for row in rows:
        values = {key: _number(row.get(key)) for key in header}
        if not math.isfinite(values["env_steps"]):  # none, or not a step count (±inf)
            continue
        for key, value in values.items():
            out[key].append(value)
    if not out["env_steps"]:
        raise ValueError(f"{path} has no rows yet")
    return out


def _number(text: str | None) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


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
            f"{m['wall_s'][i]:,.0f} s of training ({_ratio(m['env_steps'][i], m['wall_s'][i]):.1f} "
            "steps/s)"
        )
        for threshold in thresholds:
            hit = first_reached(m, threshold)
            where = "not reached" if hit is None else f"{hit[0]:,.0f} env steps, {hit[1]:,.0f} s"
            lines.append(f"  first return >= {threshold:g}: {where}")
    return lines


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def literal(text: str) -> str:
    """`text` (a run folder's name, a column's, a label from a config) as matplotlib is to
    show it: a pair of `$` would start mathtext, and a run folder named `a$\\frac{$b` made
    the figure fail to draw."""
    return text.replace("$", r"\$")


def save_figure(fig, out: Path, dpi: int, run_dir: Path | None = None) -> None:
    """`fig.savefig` to `out` atomically and never through a link (a link at `out` is
    refused, not followed; with `run_dir`, so is a folder leading outside it); every failure
    is a one-line SystemExit."""
    import matplotlib

    kind = out.suffix[1:] or matplotlib.rcParams["savefig.format"]
    try:
        with atomic_path(out, run_dir=run_dir) as tmp:
            fig.savefig(tmp, dpi=dpi, format=kind)
    except (UnsafePathError, WriteError) as err:
        raise SystemExit(f"error: {err}") from None
    except (OSError, ValueError) as err:  # ValueError: a file type matplotlib cannot write
        reason = getattr(err, "strerror", None) or err
        raise SystemExit(f"error: cannot write {out}: {reason}") from None


def main(argv: list[str] | None = None) -> Path:
    args = cli(PlotArgs, argv, prog="python -m experiments.plot")
    runs = [Path(r) for r in args.runs]
    names = [run.name for run in runs]
    if len(set(names)) < len(names):  # same folder name under different parents
        names = [str(run) for run in runs]
    try:
        columns = (*REQUIRED, *(() if args.x == "env_steps" else (args.x,)))
        metrics = {n: read_metrics(run, columns) for n, run in zip(names, runs, strict=True)}
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for name, m in metrics.items():
        label = literal(name)
        axes[0, 0].plot(m[args.x], m["return_mean"], label=label)
        axes[0, 1].plot([w / 60 for w in m["wall_s"]], m["return_mean"], label=label)
        # The critic's loss (value-based agents: their TD loss) and how the agent explores
        # (policy entropy, or ε of the value-based agents' ε-greedy).
        critic = "value_loss" if "value_loss" in m else "loss" if "epsilon" in m else None
        if critic:
            axes[1, 0].plot(m["env_steps"], m[critic], label=label)
        if "entropy" in m:
            axes[1, 1].plot(m["env_steps"], m["entropy"], label=label)
        elif "epsilon" in m:
            axes[1, 1].plot(m["env_steps"], m["epsilon"], label=f"{label} (ε)", linestyle="--")
    axes[0, 0].set(xlabel=args.x.replace("_", " "), ylabel="mean episode return")
    axes[0, 1].set(xlabel="training wall time (min)", ylabel="mean episode return")
    axes[1, 0].set(xlabel="env steps", ylabel="critic loss (each agent's own)", yscale="log")
    axes[1, 1].set(xlabel="env steps", ylabel="policy entropy, or ε (dashed)")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    out = Path(args.out) if args.out else runs[0] / "curves.png"
    # the default file must also stay inside its run folder
    save_figure(fig, out, dpi=100, run_dir=None if args.out else runs[0])
    print(f"wrote {out}")
    if len(runs) > 1 or args.thresholds:
        print("\n".join(compare(metrics, args.thresholds)))
    return out


if __name__ == "__main__":
    main()
