"""Keep the suite's learning curves when runs/ is gone: every run's metrics.csv thinned to at
most 50 rows (env_steps, wall_s, return_mean), plus the sweeps' state files, into this folder.

    python docs/results/suites/collect.py runs/suite-classic runs/suite-pendulum runs/suite-minatar
"""

import csv
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
out_rows = []
for sweep in map(Path, sys.argv[1:]):
    shutil.copy(sweep / "sweep_state.json", HERE / f"{sweep.name}.sweep_state.json")
    for run in sorted(p for p in sweep.iterdir() if (p / "metrics.csv").is_file()):
        cfg = json.loads((run / "config.json").read_text())["run"]
        with open(run / "metrics.csv") as f:
            rows = [r for r in csv.DictReader(f) if r.get("return_mean") not in (None, "")]
        step = max(1, -(-len(rows) // 50))
        keep = rows[::step] + ([rows[-1]] if rows and (len(rows) - 1) % step else [])
        for r in keep:
            wall, ret = f"{float(r['wall_s']):.2f}", f"{float(r['return_mean']):.3f}"
            out_rows.append(
                [sweep.name, cfg["agent"], cfg["env"], cfg["seed"], r["env_steps"], wall, ret]
            )
with open(HERE / "curves.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["sweep", "agent", "env", "seed", "env_steps", "wall_s", "return_mean"])
    w.writerows(out_rows)
print(f"{len(out_rows)} rows -> {HERE / 'curves.csv'}")
