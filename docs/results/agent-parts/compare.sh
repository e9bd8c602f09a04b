#!/usr/bin/env bash
# usage: OLD=<clone before> NEW=<clone after> compare.sh TAG <train flags>
# Trains both clones with the same flags and seed, then compares metrics.csv (less its timing
# columns; a population's per member), every array of the final checkpoint, and the final
# evaluation's mean. Runs go to /tmp/cmp/TAG-old and /tmp/cmp/TAG-new.
tag=$1; shift
mkdir -p /tmp/cmp
for side in old new; do
  dir=$OLD; [ $side = new ] && dir=$NEW
  rm -rf /tmp/cmp/$tag-$side
  (cd $dir && python -m experiments.train "$@" --no-progress --run-dir /tmp/cmp/$tag-$side > /tmp/cmp/$tag-$side.log 2>&1) || { echo "$side failed"; tail -5 /tmp/cmp/$tag-$side.log; }
done
python - /tmp/cmp/$tag-old /tmp/cmp/$tag-new $tag <<'PY'
import sys, csv, json, pathlib, numpy as np
a, b = map(pathlib.Path, sys.argv[1:3])
def rows(p):
    r = list(csv.DictReader(open(p / "metrics.csv")))
    drop = {k for k in r[0] if k in ("sps", "wall_s") or "time" in k or k.endswith("_sps")}
    return [{k: v for k, v in x.items() if k not in drop} for x in r]
members = sorted(x.name for x in a.glob("member-*"))
if members:
    ra = [rows(a / m) for m in members]; rb = [rows(b / m) for m in members]
else:
    ra, rb = rows(a), rows(b)
import orbax.checkpoint as ocp, jax
ca = sorted((a / "checkpoints").iterdir())[-1]; cb = sorted((b / "checkpoints").iterdir())[-1]
def load(c):
    return {i.name: ocp.PyTreeCheckpointer().restore(i) for i in sorted(p for p in c.iterdir() if p.is_dir()) if i.name != "meta"}
la, lb = load(ca), load(cb)
def arrays(t):  # by key path: an empty field (no arrays) on one side only changes nothing
    return {jax.tree_util.keystr(p): np.asarray(x) for p, x in jax.tree.leaves_with_path(t)}
same = all(arrays(la[k]).keys() == arrays(lb[k]).keys() and all(np.array_equal(x, arrays(lb[k])[p]) for p, x in arrays(la[k]).items()) for k in la)
def ev(p):
    if members:
        return [ev1(p / m) for m in members]
    return ev1(p)
def ev1(p):
    s = p / "summary.json"
    return json.loads(s.read_text()).get("eval_return_mean") if s.exists() else None
print(f"{sys.argv[3]}: rows {len(ra)}/{len(rb)} metrics identical {ra == rb}; checkpoint {ca.name} arrays identical {same} ({sum(len(jax.tree.leaves(v)) for v in la.values())} leaves); eval {ev(a)} / {ev(b)}")
PY
