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


def section(results, mean_ci95, fmt) -> tuple[list[str], dict]:
    """The report's Atari 100k markdown lines and JSON for `results` (its `RunResult`s; those
    not under the protocol are left out): per game, each algorithm's final evaluation mean ±
    95% CI beside the published rows, with the published DER value flagged where it falls
    outside our DER-like runs' seeds; then our human-normalised mean and median (with the
    bootstrap CIs of the report's aggregates table) beside the published ones."""
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
            cells.append(fmt(*mean_ci95(finals)))
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
    return md, data
