"""Keep the grid's results when runs/ is gone: every finished game's population summary and
each member's config.json, metrics.csv and summary.json (no checkpoints, no TensorBoard
files), from runs/minatar-5m/<agent>/<Game>/ into docs/results/minatar-5m/games/, and the
same files of every finished sweep, runs/minatar-5m/sweep/<name>/, into sweep/<name>/. A game run
as single runs (run_single.sh: <Game>/seed-<k>/) is kept run by run.
A metrics.csv of more than MAX_ROWS rows (one a host sync, about a second: ACER's games log
thousands) is kept thinned to every k-th row, its first and last rows always in, so that the
last row, which the report's `last train` reads, is the run's; the whole file stays in runs/.

    python docs/results/minatar-5m/collect.py [runs/minatar-5m [games|partial]]

With `partial` as the second argument, games go to partial/<agent>/<Game>/ instead: where an
agent's finished runs wait until it has run all five games (the main report's aggregates take
only the games every agent in it has run).

A run that has not reached its last step is left out and named: still running (no
summary.json yet), or stopped early by --max-minutes or a signal (its summary.json's
`stopped_by` is not `total_steps`) and waiting for `--resume`.
"""

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
MAX_ROWS = 1000


def copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(src, newline="") as f:  # the csv module's \r\n line ends, kept
        lines = f.read().splitlines(keepends=True)
    if src.name != "metrics.csv" or len(lines) <= MAX_ROWS + 1:
        shutil.copy(src, dst)
        return
    header, rows = lines[0], lines[1:]
    k = -(-len(rows) // MAX_ROWS)
    kept = rows[::k] if (len(rows) - 1) % k == 0 else [*rows[::k], rows[-1]]
    with open(dst, "w", newline="") as f:
        f.write(header + "".join(kept))


source = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/minatar-5m")
into = sys.argv[2] if len(sys.argv) > 2 else "games"
if into not in ("games", "partial"):
    sys.exit(f"collect.py: the second argument is games or partial, not {into!r}")
# A game is one population folder (run.sh) or a folder of single runs, seed-<k> (run_single.sh).
games = sorted(source.glob("*/*"))
games = [s for g in games for s in (sorted(g.glob("seed-*")) or [g])]
runs = [(p, HERE / into / p.relative_to(source)) for p in games]
runs = [(p, HERE / "sweep" / p.name) if p.parent.name == "sweep" else (p, out) for p, out in runs]
kept = 0
for run, out in runs:
    if not run.is_dir():
        continue
    summary = run / "summary.json"
    stopped_by = json.loads(summary.read_text()).get("stopped_by") if summary.is_file() else None
    if stopped_by != "total_steps":
        print(f"not finished ({stopped_by or 'no summary.json'}), left out: {run}")
        continue
    kept_files = [run / "config.json", summary]
    kept_files += sorted(run.glob("member-*/*.json")) + sorted(run.glob("member-*/metrics.csv"))
    if (run / "metrics.csv").is_file():  # a single run
        kept_files.append(run / "metrics.csv")
    for f in kept_files:
        copy(f, out / f.relative_to(run))
    kept += 1
    print(f"kept {run} -> {out}")
print(f"{kept} finished runs kept")
