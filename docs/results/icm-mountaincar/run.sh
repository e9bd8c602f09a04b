#!/usr/bin/env bash
# Curiosity on a task that needs exploration (issue 63's ICM acceptance): discrete SAC on
# gymnax MountainCar-v0 (200-step episodes, −1 per step until the flag: a return above −200
# means the car reached it), without curiosity, with RND (--rnd-coef 1) and with ICM
# (--icm-coef 1), five seeds each as one population (--num-seeds 5: seeds 0-4), 30,000 env
# steps per seed. Run from a frozen clone:
#   bash docs/results/icm-mountaincar/run.sh [RUNS_ROOT]
set -euo pipefail
root=${1:-runs/icm-mountaincar}
here=$(cd "$(dirname "$0")" && pwd)
common=(--agent sac --env gymnax/MountainCar-v0 --num-seeds 5 --total-steps 30000 --no-progress)
declare -A arms=([none]="" [rnd]="--rnd-coef 1" [icm]="--icm-coef 1")
for arm in none rnd icm; do
  [ -f "$here/$arm/summary.json" ] && continue  # kept: done
  echo "$(date -u +%FT%TZ) $arm"
  # shellcheck disable=SC2086
  python -m experiments.train "${common[@]}" ${arms[$arm]} --run-dir "$root/$arm"
  for m in "$root/$arm"/member-*; do
    mkdir -p "$here/$arm/$(basename "$m")"
    cp "$m/config.json" "$m/metrics.csv" "$m/summary.json" "$here/$arm/$(basename "$m")/"
  done
  cp "$root/$arm/summary.json" "$here/$arm/"
done
