#!/usr/bin/env bash
# Before/after the horizon-blocked distributional Retrace (7ac5d5a): the Reactor's MinAtar
# preset on gymnax Breakout, one process at a time, alternating OLD (a checkout of the commit
# before, e.g. `git worktree add /tmp/old 08a94aa`) and NEW (this repository), ROUNDS times.
# Each run: 60k env steps (learning from 5k), env steps/s from its metrics rows past 20k steps
# (docs/results/minatar-5m/concurrency/rate.py). Usage, from the repository root:
#   OLD=/tmp/old ROUNDS=3 bash docs/results/reactor-retrace/run.sh
set -eu
new=$(pwd)
old=${OLD:?a checkout of the commit before}
rounds=${ROUNDS:-3}
out=${OUT:-/tmp/reactor-retrace}
rm -rf "$out" && mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
  for side in $order; do
    dir=$old; [ "$side" = new ] && dir=$new
    (cd "$dir" && python -m experiments.train --agent reactor --preset reactor-minatar \
      --env gymnax/Breakout-MinAtar --total-steps 60000 --eval-episodes 1 --no-progress \
      --run-dir "$out/$side-$r" > "$out/$side-$r.log" 2>&1)
    python "$new/docs/results/minatar-5m/concurrency/rate.py" "$out/$side-$r"
  done
done
