"""Plot populations: `python -m experiments.plot_population runs/<a> [runs/<b> ...] --out F`.

For each population run folder (`--num-seeds P`, with or without `--evolve`): every member's
mean training return against its env steps (thin), the population's best and median (thick),
and each varying hyper-parameter (`hp_<field>` columns) per member on a log scale. Prints,
per run and `--threshold`, the env steps per member (and in total, × P) at which the best
member and the median member first reached it: the comparison of issue 16's acceptance
(an evolving population against the same population without evolution).
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

from engine.args import check_output_file, cli
from engine.runfolder import check_file_target
from experiments.plot import literal, read_metrics, save_figure


@dataclass(frozen=True)
class PopulationPlotArgs:
    """Draw the members of one or more population runs into a PNG."""

    runs: tyro.conf.Positional[tuple[str, ...]]
    """Population run folders (each with member-<i>/metrics.csv)."""
    out: str
    """Output PNG."""
    threshold: float | None = None
    """A return level (e.g. the solved level) to report first-reached env steps of."""
    title: str | None = None
    """Figure title."""

    def __post_init__(self):
        if not self.runs:
            raise ValueError("RUNS must be one or more population run folders")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise ValueError(f"--threshold must be a finite number, got {self.threshold}")
        check_output_file("out", self.out)


def members(run: Path) -> list[dict[str, np.ndarray]]:
    """Each member's metrics (env_steps, return_mean and its hp_<field> columns), in member
    order. Problems are one-line `ValueError`s naming the folder or file."""
    if not run.is_dir():
        raise ValueError(f"{run} is not a folder" if run.exists() else f"{run} does not exist")
    folders = sorted(
        (p for p in run.glob("member-*") if _MEMBER.fullmatch(p.name) and p.is_dir()),
        key=lambda p: int(p.name.split("-")[1]),
    )
    if not folders:
        raise ValueError(f"{run} has no member-<i>/ folders: not a --num-seeds run")
    out = []
    for folder in folders:
        metrics = read_metrics(folder, ("env_steps", "return_mean"))  # and every other column
        columns = ("env_steps", "return_mean", *[c for c in metrics if c.startswith("hp_")])
        out.append({k: np.asarray(metrics[k]) for k in columns})
    return out


_MEMBER = re.compile(r"member-\d{1,9}")


def first_reached(steps: np.ndarray, values: np.ndarray, level: float) -> float:
    hit = np.flatnonzero(np.nan_to_num(values, nan=-np.inf) >= level)
    return float(steps[hit[0]]) if hit.size else math.nan


def summary(run: Path, level: float) -> dict:
    """First env step (per member) at which each member, the best and the median reached
    `level`; NaN where never."""
    ms = members(run)
    firsts = [first_reached(m["env_steps"], m["return_mean"], level) for m in ms]
    reached = np.array([f for f in firsts if not math.isnan(f)])
    p = len(ms)
    ordered = np.sort(np.where(np.isnan(firsts), np.inf, firsts))
    median = float(np.median(ordered)) if p % 2 else float(ordered[p // 2 - 1 : p // 2 + 1].mean())
    return {
        "members": p,
        "member_steps_trained": float(ms[0]["env_steps"][-1]),
        "first": firsts,
        "best": float(reached.min()) if reached.size else math.nan,
        "median": median if math.isfinite(median) else math.nan,
    }


def main(argv: list[str] | None = None) -> None:
    args = cli(PopulationPlotArgs, argv, description=__doc__.split("\n\n")[0])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [Path(r) for r in args.runs]
    try:
        check_file_target(args.out)  # a link is refused before anything is drawn
        data = [members(r) for r in runs]
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    hp = sorted({k for ms in data for m in ms for k in m if k.startswith("hp_")})
    fig, axes = plt.subplots(
        1 + len(hp), len(runs), figsize=(5 * len(runs), 3.2 * (1 + len(hp))), squeeze=False
    )
    for j, (run, ms) in enumerate(zip(runs, data, strict=True)):
        ax = axes[0][j]
        steps = ms[0]["env_steps"]
        n = min(len(m["return_mean"]) for m in ms)
        returns = np.stack([m["return_mean"][:n] for m in ms])
        for m in ms:
            ax.plot(m["env_steps"], m["return_mean"], lw=0.6, alpha=0.5)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN: no episode finished yet
            ax.plot(steps[:n], np.nanmax(returns, 0), "k", lw=1.8, label="best member")
            ax.plot(steps[:n], np.nanmedian(returns, 0), "k--", lw=1.4, label="median member")
        if args.threshold is not None:
            ax.axhline(args.threshold, color="grey", lw=0.8, ls=":")
        ax.set_title(literal(run.name))
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
        ax.set_xlabel("env steps per member")
        ax.set_ylabel("training return (window mean)")
        ax.legend(fontsize=8)
        for i, name in enumerate(hp, start=1):
            ax = axes[i][j]
            values = [m[name] for m in ms if name in m]
            for m in ms:
                if name in m:
                    ax.plot(m["env_steps"], m[name], lw=0.8)
            positive = all(np.all(v[np.isfinite(v)] > 0) for v in values)
            ax.set_yscale("log" if positive else "linear")  # a log scale needs values > 0
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
            ax.set_xlabel("env steps per member")
            ax.set_ylabel(literal(name[3:]))
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    out = Path(args.out)
    try:  # --out may name a folder still to be made (check_output_file)
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SystemExit(f"error: --out {args.out}: {err.strerror or err}") from None
    save_figure(fig, out, dpi=110)
    print(f"wrote {args.out}")
    if args.threshold is not None:
        for run in runs:
            s = summary(run, args.threshold)
            p = s["members"]
            firsts = [None if math.isnan(f) else int(f) for f in s["first"]]
            print(
                f"{run.name}: {p} members, {s['member_steps_trained']:.0f} steps each; first "
                f"return >= {args.threshold:g} at (env steps per member / in total): best member "
                f"{s['best']:.0f} / {s['best'] * p:.0f}, median member {s['median']:.0f} / "
                f"{s['median'] * p:.0f}; members: {firsts}"
            )


if __name__ == "__main__":
    main()
