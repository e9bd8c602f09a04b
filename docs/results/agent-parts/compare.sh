#!/usr/bin/env bash
# usage: cmp66.sh TAG args...  runs old and new with same args, compares metrics + final checkpoint
tag=$1; shift
for side in old66 main; do
  rm -rf /tmp/cmp/$tag-$side
  (cd /work/$side && python -m experiments.train "$@" --no-progress --run-dir /tmp/cmp/$tag-$side > /tmp/cmp/$tag-$side.log 2>&1) || { echo "$side failed"; tail -5 /tmp/cmp/$tag-$side.log; }
done
python - /tmp/cmp/$tag-old66 /tmp/cmp/$tag-main <<'PY'
import sys, csv, pathlib, numpy as np
a, b = map(pathlib.Path, sys.argv[1:])
def rows(p):
    r = list(csv.DictReader(open(p / "metrics.csv")))
    drop = {k for k in r[0] if k in ("sps", "wall_s") or "time" in k or k.endswith("_sps")}
    return [{k: v for k, v in x.items() if k not in drop} for x in r], drop
ra, drop = rows(a); rb, _ = rows(b)
print("rows", len(ra), len(rb), "identical metrics (less", sorted(drop), "):", ra == rb)
import orbax.checkpoint as ocp
ca = sorted((a / "checkpoints").iterdir())[-1]; cb = sorted((b / "checkpoints").iterdir())[-1]
print(ca.name, cb.name)
import jax
def load(c):
    out = {}
    for item in sorted(p for p in c.iterdir() if p.is_dir()):
        try:
            out[item.name] = ocp.PyTreeCheckpointer().restore(item)
        except Exception as e:
            out[item.name] = repr(e)[:80]
    return out
la, lb = load(ca), load(cb)
print("items", sorted(la))
for k in la:
    if k in ("meta",): print("meta", la[k] == lb[k] if not isinstance(la[k], dict) else {kk: la[k][kk] == lb[k].get(kk) for kk in la[k] if "time" not in kk and "wall" not in kk})
    else:
        eq = jax.tree.map(lambda x, y: bool(np.array_equal(np.asarray(x), np.asarray(y))), la[k], lb[k])
        print(k, "bit-identical:", all(jax.tree.leaves(eq)), len(jax.tree.leaves(eq)), "leaves")
PY
