"""The Atari 100k section of `python -m experiments.report` (issue 62): our runs under
`--protocol atari100k` (envs/protocols.py) beside the published per-game means of
data-efficient Rainbow (DER), OTRainbow (OTR), DrQ and SPR, and the aggregates those rows give.

Reference: `experiments/references/atari100k.csv` (the 26 games' random and human scores and
the four published rows, as SPR's Table 4 reprints them; its header names every source). Human
normalisation is (score − random) / (human − random) with that file's random and human scores,
which equal `atari_human_random.csv`'s for these games (tests/experiments/test_report.py).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

REFERENCE = Path(__file__).resolve().parent / "references" / "atari100k.csv"
PUBLISHED = ("DER", "OTR", "DrQ", "SPR")


def load_table() -> dict[str, dict[str, float]]:
    """game -> {random, human, DER, OTR, DrQ, SPR} (the reference file's rows)."""
    with open(REFERENCE, newline="") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return {r["game"]: {k: float(v) for k, v in r.items() if k != "game"} for r in rows}


def normalised(game: str, score, table=None):
    """Human-normalised score(s) of `game` with the reference's random and human scores."""
    row = (table or load_table())[game]
    return (np.asarray(score, float) - row["random"]) / (row["human"] - row["random"])


def published_aggregates(table=None) -> dict[str, dict[str, float]]:
    """{agent: {mean, median}} of each published row's human-normalised per-game means over the
    26 games (DER: 0.285 / 0.161, as its papers report)."""
    table = table or load_table()
    out = {}
    for name in PUBLISHED:
        hns = np.array([normalised(g, row[name], table) for g, row in table.items()])
        out[name] = {"mean": float(hns.mean()), "median": float(np.median(hns))}
    return out


def game_of(env_id: str) -> str | None:
    """'Alien-v5' -> 'Alien' (None unless one of the 26 games)."""
    game = env_id.removesuffix("-v5")
    return game if game in load_table() and env_id.endswith("-v5") else None


def is_protocol_run(result) -> bool:
    """Whether a report `RunResult` was trained under `--protocol atari100k`."""
    return result.config.get("run.protocol") == "atari100k" and game_of(result.env) is not None


def _cell(mean: float, half: float) -> str:
    return f"{mean:,.1f}" if np.isnan(half) else f"{mean:,.1f} ± {half:,.1f}"


def section(results, mean_ci95, out: Path | None = None) -> tuple[list[str], dict]:
    """The report's Atari 100k markdown lines and JSON for `results` (its `RunResult`s; those
    not under the protocol are left out): per game, each algorithm's final evaluation mean ±
    95% CI beside the published rows, with the published DER value flagged where it falls
    outside our DER-like runs' seeds; our human-normalised mean and median (with the
    bootstrap CIs of the report's aggregates table) beside the published ones; what the runs
    cost; and, with `out`, each game's learning curves (`atari100k_curves.png` there)."""
    runs = [r for r in results if is_protocol_run(r)]
    if not runs:
        return [], {}
    table = load_table()
    algos = sorted({r.algo for r in runs})
    games = [g for g in table if any(game_of(r.env) == g for r in runs)]
    md = [
        "## Atari 100k",
        "",
        f"{len(runs)} runs under `--protocol atari100k` (envs/protocols.py) on {len(games)} of "
        "the 26 games. Per game: the final evaluation (100 episodes) mean ± 95% CI over seeds, "
        "beside the published per-game means (experiments/references/atari100k.csv). `!` marks "
        "a published DER value outside the range of our seeds (two or more) of an algorithm "
        "whose name starts with `dqn` (our DER: `--preset der`); one seed has no range.",
        "",
        "| game | " + " | ".join(algos) + " | " + " | ".join(PUBLISHED) + " |",
        "|---|" + "---|" * (len(algos) + len(PUBLISHED)),
    ]
    data: dict = {"games": {}, "published_aggregates": published_aggregates(table)}
    outside = []
    for game in games:
        cells, data["games"][game] = [], {}
        for algo in algos:
            finals = [r.final for r in runs if r.algo == algo and game_of(r.env) == game]
            if not finals:
                cells.append("")
                continue
            cells.append(_cell(*mean_ci95(finals)))
            data["games"][game][algo] = finals
            der = table[game]["DER"]
            spread = len(finals) >= 2  # one seed is a point, not a range
            if algo.startswith("dqn") and spread and not min(finals) <= der <= max(finals):
                outside.append(f"{game} ({algo}: {min(finals):,.1f} .. {max(finals):,.1f})")
                cells[-1] += " !"
        published = [f"{table[game][p]:,.1f}" for p in PUBLISHED]
        md.append(f"| {game} | " + " | ".join(cells + published) + " |")
    md.append("")
    if outside:
        md += ["Published DER outside our seeds' range: " + "; ".join(outside) + ".", ""]
    md += [
        "Human-normalised mean and median over the games each algorithm ran (ours: the "
        "aggregates table's stratified bootstrap 95% CIs cover the same runs when every "
        "algorithm ran every game); published: over the 26 games.",
        "",
        "| agent | games | mean | median |",
        "|---|---|---|---|",
    ]
    for algo in algos:
        mine = [game_of(r.env) for r in runs if r.algo == algo]
        per_game = [
            float(np.mean(normalised(g, [r.final for r in runs if r.algo == algo
                                         and game_of(r.env) == g], table)))
            for g in sorted(set(mine))
        ]  # fmt: skip
        md.append(
            f"| {algo} (ours) | {len(per_game)} | {np.mean(per_game):.3f} "
            f"| {np.median(per_game):.3f} |"
        )
        data.setdefault("ours", {})[algo] = {
            "games": len(per_game), "mean": float(np.mean(per_game)),
            "median": float(np.median(per_game)),
        }  # fmt: skip
    for name, agg in data["published_aggregates"].items():
        md.append(f"| {name} (published) | 26 | {agg['mean']:.3f} | {agg['median']:.3f} |")
    md.append("")
    data["outside_der"] = outside
    md += _cost(runs, algos, data)
    if out is not None:
        md += _curves(runs, algos, games, table, out)
    return md, data


def _cost(runs, algos, data: dict) -> list[str]:
    """The cost table: per algorithm, its runs' training rate and minutes (medians over runs:
    the machine was not always quiet) and what one seed of the 26 games takes at them."""
    md = [
        "**Cost.** What the runs cost, as they ran (medians over each algorithm's runs: some "
        "shared the machine with other jobs, so these are upper bounds of a quiet machine's): "
        "training "
        "env steps per second (env steps ÷ training seconds, compilation excluded), training "
        "and final-evaluation minutes per run, and the hours one seed of all 26 games takes "
        "at those medians, run after run on this machine.",
        "",
        "| agent | runs | env steps/s | training min | evaluation min | hours per 26 games |",
        "|---|---|---|---|---|---|",
    ]
    data["cost"] = {}
    for algo in algos:
        mine = [r for r in runs if r.algo == algo]
        sps = float(np.median([r.sps for r in mine]))
        train = float(np.median([r.wall_s for r in mine])) / 60
        known = [r.eval_s for r in mine if np.isfinite(r.eval_s)]
        evaluation = float(np.median(known)) / 60 if known else np.nan
        hours = 26 * (train + (0.0 if np.isnan(evaluation) else evaluation)) / 60
        data["cost"][algo] = {
            "runs": len(mine), "sps": sps, "train_min": train, "eval_min": evaluation,
            "hours_per_26_games": hours,
        }  # fmt: skip
        ev = "" if np.isnan(evaluation) else f"{evaluation:.1f}"
        md.append(f"| {algo} | {len(mine)} | {sps:.0f} | {train:.1f} | {ev} | {hours:.1f} |")
    return [*md, ""]


def _curves(runs, algos, games, table, out: Path) -> list[str]:
    """atari100k_curves.png in `out`: one panel per game, each algorithm's training return
    (the runs' moving-window mean, clipped rewards undone: whole-game scores) against env
    steps, the mean over seeds as a line and each seed faint, the published DER's final
    score dashed."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from experiments.report import save_figure

    cols = min(len(games), 5)
    rows = -(-len(games) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.0 * cols, 2.3 * rows), squeeze=False, layout="constrained"
    )
    thousands = FuncFormatter(lambda value, _: f"{value / 1000:g}k" if value else "0")
    colours = {algo: f"C{i % 10}" for i, algo in enumerate(algos)}
    for ax, game in zip(list(axes.flat)[: len(games)], games, strict=True):
        for algo in algos:
            mine = [r for r in runs if r.algo == algo and game_of(r.env) == game]
            if not mine:
                continue
            for r in mine:
                ax.plot(r.curve_steps, r.curve_return, color=colours[algo], alpha=0.25, lw=0.7)
            end = min(r.curve_steps[-1] for r in mine)
            grid = np.linspace(0, end, 50)
            mean = np.mean([np.interp(grid, r.curve_steps, r.curve_return) for r in mine], 0)
            ax.plot(grid, mean, color=colours[algo], label=algo)
        ax.axhline(table[game]["DER"], color="grey", ls="--", lw=0.8, label="DER (published)")
        ax.set_title(game, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_formatter(thousands)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(games) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    fig.supxlabel("env steps (agent steps; 4 frames each)", fontsize=9)
    fig.supylabel("training return (moving-window mean)", fontsize=9)
    save_figure(fig, out / "atari100k_curves.png")
    return [
        "Learning curves per game: the training return (each run's moving-window mean of "
        "whole-game scores) against env steps, the mean over seeds bold, each seed faint; "
        "dashed, the published DER's final score (an evaluation score, for scale).",
        "",
        "![Atari 100k learning curves](atari100k_curves.png)",
        "",
    ]
