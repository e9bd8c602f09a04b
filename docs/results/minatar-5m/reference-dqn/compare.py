"""The MinAtar paper's own DQN script against ours on one game, at the same env steps.

    python docs/results/minatar-5m/reference-dqn/compare.py [Game]     # default Breakout

Reads `<game>-seed<k>.csv` here (one row per finished training episode of the paper's
script: the frame it ended at and its return; see README.md for how they were made) and our
`dqn-minatar` runs' metrics.csv (`return_mean`: the mean of the last 100 finished training
episodes): the grid's (`../games/dqn/<Game>`, minimal action set) and those of the
diagnostics here: for Breakout `full-actions/` (`gymnax/Breakout-MinAtar-full`, the script's 6
actions), for Freeway `freeway-package/` (`MinAtar/Freeway-v1`: the `minatar` package the
script runs, minimal action set) and `freeway-full/` (`gymnax/Freeway-MinAtar-full`); and
prints, at each frame of `AT`, the mean return of the last 100 episodes finished by then for
each, and draws the curves to `<game>.png`.
"""

from __future__ import annotations

import csv
import glob
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

HERE = pathlib.Path(__file__).parent
# the diagnostic runs of dqn-minatar beside the grid's, per game: folder, label
EXTRA = {
    "Breakout": [(HERE / "full-actions", "6 actions")],  # gymnax/Breakout-MinAtar-full
    "Freeway": [
        (HERE / "freeway-package", "minatar package"),  # MinAtar/Freeway-v1
        (HERE / "freeway-full", "6 actions"),  # gymnax/Freeway-MinAtar-full
        (HERE / "freeway-torch-init", "6 actions, PyTorch init"),  # torch_init.py, the same
    ],
}
AT = (100_000, 250_000, 500_000, 750_000, 1_000_000, 1_250_000, 1_500_000)
REFERENCE_FRAMES = 1_500_000  # each reference run's budget (README, Command): a finished run's
# CSV ends at its last finished episode, a few frames short of it; one stopped earlier (a
# session's end) ends more than an episode short (MAX_EPISODE) and counts up to its last row
MAX_EPISODE = 5_000
SPAN = (1_000_000, 1_500_000)  # also: the window's mean over these frames, every 10k frames


def span_mean(frames: np.ndarray, values: np.ndarray, end: int) -> str:
    """The trailing window's mean over SPAN, read every 10k frames (less noisy than a point)."""
    if end < SPAN[1]:
        return ""
    grid = np.arange(SPAN[0], SPAN[1] + 1, 10_000)
    last = np.searchsorted(frames, grid, side="right") - 1  # the last episode done by then
    return f"{values[last].mean():.1f}"


def reference(path: pathlib.Path) -> tuple[np.ndarray, np.ndarray, int]:
    """Frames, the trailing 100-episode mean return after each finished episode, frames run."""
    rows = list(csv.DictReader(open(path)))
    frames = np.array([int(r["frame"]) for r in rows])
    returns = np.array([float(r["return"]) for r in rows])
    window = np.array([returns[max(0, i - 99) : i + 1].mean() for i in range(len(returns))])
    finished = frames[-1] >= REFERENCE_FRAMES - MAX_EPISODE
    return frames, window, REFERENCE_FRAMES if finished else int(frames[-1])


def ours(run: pathlib.Path) -> tuple[np.ndarray, np.ndarray, int]:
    rows = list(csv.DictReader(open(run / "metrics.csv")))
    steps = np.array([float(r["env_steps"]) for r in rows])
    window = np.array([float(r["return_mean"] or "nan") for r in rows])
    return steps[np.isfinite(window)], window[np.isfinite(window)], int(steps[-1])


def at(frames: np.ndarray, values: np.ndarray, end: int, frame: int) -> str:
    """The window after the last episode finished by `frame`; blank past the run's end."""
    done = np.flatnonzero(frames <= frame)
    return "" if end < frame or not len(done) else f"{values[done[-1]]:.1f}"


def main(game: str = "Breakout") -> None:
    scripts = sorted(HERE.glob(f"{game.lower()}-seed*.csv"))
    if not scripts:
        raise SystemExit(f"error: no {game.lower()}-seed<k>.csv here ({HERE})")
    curves = {f"paper's script, seed {p.stem.split('seed')[-1]}": reference(p) for p in scripts}
    for run in sorted(glob.glob(str(HERE.parent / "games" / "dqn" / game / "seed-*"))):
        curves[f"ours, {pathlib.Path(run).name}"] = ours(pathlib.Path(run))
    extras = EXTRA.get(game, [])
    for extra, tag in extras:
        for run in sorted(glob.glob(str(extra / "seed-*"))):
            curves[f"ours, {tag}, {pathlib.Path(run).name}"] = ours(pathlib.Path(run))
    span = f"mean {SPAN[0] / 1e6:g}-{SPAN[1] / 1e6:g}M"
    print("| run | " + " | ".join(f"{f / 1e6:g}M" for f in AT) + f" | {span} |")
    print("|---|" + "---|" * (len(AT) + 1))
    for name, (frames, values, end) in curves.items():
        cells = [at(frames, values, end, f) for f in AT] + [span_mean(frames, values, end)]
        print(f"| {name} | " + " | ".join(cells) + " |")
    fig, ax = plt.subplots(figsize=(7, 4))
    # ours thin and under, the script's thick and on top, up to its budget (ours run to 5M)
    script_colours = iter(["black", "firebrick", "darkorange", "navy"])
    extra_colours = iter(["royalblue", "darkcyan", "darkviolet", "olive", "deeppink", "dimgray"])
    for name, (frames, values, _) in sorted(curves.items(), key=lambda kv: "paper" in kv[0]):
        keep = frames <= REFERENCE_FRAMES * 1.05
        if "paper" in name:
            style = dict(lw=1.4, color=next(script_colours, None))
        elif any(f", {tag}," in name for _, tag in extras):
            style = dict(lw=1.1, ls="--", color=next(extra_colours, None))
        else:
            style = dict(lw=0.6, alpha=0.6)
        ax.plot(frames[keep] / 1e6, values[keep], label=name, **style)
    ax.set(xlabel="env steps (millions)", ylabel="training return, last 100 episodes",
           title=f"{game}, DQN: the MinAtar paper's script and dqn-minatar")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / f"{game.lower()}.png", dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:2])
