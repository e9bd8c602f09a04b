"""Env steps/s of each run (or population member) from its metrics.csv rows, between the
first row at or past `start` env steps and the last row:

    python docs/results/minatar-5m/concurrency/rate.py RUN_DIR [RUN_DIR ...]
"""

import csv
import sys
from pathlib import Path


def rate(run: Path, start: int = 20_000) -> float:
    with open(run / "metrics.csv", newline="") as f:
        rows = [(float(r["env_steps"]), float(r["wall_s"])) for r in csv.DictReader(f)]
    first = next(r for r in rows if r[0] >= start)
    last = rows[-1]
    return (last[0] - first[0]) / (last[1] - first[1])


for name in sys.argv[1:]:
    run = Path(name)
    rates = [rate(m) for m in sorted(run.glob("member-*")) or [run]]
    print(f"{name}: per member {[round(r) for r in rates]}, sum {sum(rates):,.0f}")
