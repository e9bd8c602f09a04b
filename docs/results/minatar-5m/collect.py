"""Keep the grid's results when runs/ is gone: every finished game's population summary and
each member's config.json, metrics.csv and summary.json (no checkpoints, no TensorBoard
files), from runs/minatar-5m/<agent>/<Game>/ into docs/results/minatar-5m/games/.

    python docs/results/minatar-5m/collect.py [runs/minatar-5m]

A game that has not reached its last step is left out and named: still running (no
summary.json yet), or stopped early by --max-minutes or a signal (its summary.json's
`stopped_by` is not `total_steps`) and waiting for `--resume`.
"""

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
source = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/minatar-5m")
kept = 0
for game in sorted(p for p in source.glob("*/*") if p.is_dir()):
    summary = game / "summary.json"
    stopped_by = json.loads(summary.read_text()).get("stopped_by") if summary.is_file() else None
    if stopped_by != "total_steps":
        print(f"not finished ({stopped_by or 'no summary.json'}), left out: {game}")
        continue
    out = HERE / "games" / game.relative_to(source)
    kept_files = [game / "config.json", game / "summary.json"]
    kept_files += sorted(game.glob("member-*/*.json")) + sorted(game.glob("member-*/metrics.csv"))
    for f in kept_files:
        (out / f.relative_to(game)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, out / f.relative_to(game))
    kept += 1
print(f"{kept} finished games -> {HERE / 'games'}")
