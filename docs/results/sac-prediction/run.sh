#!/usr/bin/env bash
# SAC's prediction model on a partially observed task (issue 63): recurrent SAC (the
# sac-pendulum-p preset) on Pendulum-v1 with its angular velocity hidden from the networks
# (--privileged-obs 2), without and with --prediction, and with --prediction on
# Pendulum-P-v1 (the velocity dropped altogether: the model has no privileged data).
# Five seeds each, as one population (--num-seeds 5: seeds 0-4). Run from a frozen clone:
#   bash docs/results/sac-prediction/run.sh [RUNS_ROOT]
# then `python -m experiments.arms docs/results/sac-prediction --at 5000 10000 15000 20000` (the
# README names the arms order) prints the table from the kept runs.
set -euo pipefail
root=${1:-runs/sac-prediction}
here=$(cd "$(dirname "$0")" && pwd)
common=(--preset sac-pendulum-p --num-seeds 5 --no-progress)
declare -A arms=(
  [none]="--env Pendulum-v1 --privileged-obs 2"
  [prediction]="--env Pendulum-v1 --privileged-obs 2 --prediction"
  [prediction-no-extra]="--env Pendulum-P-v1 --prediction"
)
for arm in none prediction prediction-no-extra; do
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
