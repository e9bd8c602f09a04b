import csv, sys
from pathlib import Path
def rate(d, start=20000):
    rows = list(csv.DictReader(open(Path(d) / "metrics.csv")))
    rows = [(float(r["env_steps"]), float(r["wall_s"])) for r in rows]
    a = next(r for r in rows if r[0] >= start); b = rows[-1]
    return (b[0] - a[0]) / (b[1] - a[1])
for d in sys.argv[1:]:
    p = Path(d)
    members = sorted(p.glob("member-*")) or [p]
    rs = [rate(m) for m in members]
    print(f"{d}: per member {[round(r) for r in rs]}, sum {sum(rs):,.0f}")
