#!/usr/bin/env bash
# Issue 28's grid as single runs, WORKERS at a time (default 2): AGENT (preset <agent>-minatar)
# on GAMEs (default all five), SEEDS (default 0-4), or the (game, seed) runs RUNS lists, 5M env
# steps each. Run from the repository root:
#   DEADLINE="2026-11-27 21:00" bash docs/results/minatar-5m/run_single.sh reactor Breakout
# Each run writes runs/minatar-5m/<agent>/<Game>/seed-<k>; the seed-k run is the same
# experiment as member k of run.sh's `--num-seeds 5 --seed 0` population (member i has seed
# i). On 2 vCPUs two single processes at once train faster in aggregate than one population
# program (README, "How the grid runs"). A run already finished is skipped; one cut off (by
# DEADLINE, which no run should pass) resumes from its --exact-resume checkpoint, bit for bit.
# FRESH_MINUTES=N: a run not yet begun starts only with N minutes or more to DEADLINE (say 95
# for a DQN run beside another one), where the checkpoints of a run cut off would not outlast
# the session (the workspace outside the repository is not always kept between sessions).
set -eu
agent=$1
shift
games=${*:-Breakout Asterix Freeway SpaceInvaders Seaquest}
workers=${WORKERS:-2}
seeds=${SEEDS:-0 1 2 3 4} # e.g. SEEDS="2 3 4": the seeds a collected partial/ game still lacks
# RUNS="Breakout:4 Asterix:0 ...": these (game, seed) runs, in this order, as one queue, where
# GAMEs x SEEDS gives every game the same seeds (no GAME argument nor SEEDS with it)
runs=${RUNS:-}
if [ -n "$runs" ]; then
  if [ $# -gt 0 ] || [ -n "${SEEDS:-}" ]; then
    echo "RUNS lists the runs: give no GAME argument nor SEEDS with it" >&2
    exit 2
  fi
  for run in $runs; do
    [[ $run =~ ^[A-Za-z]+:[0-9]+$ ]] || { echo "RUNS: '$run' is not Game:seed" >&2; exit 2; }
  done
fi
deadline=$(date -d "${DEADLINE:-+10 years}" +%s)
export agent deadline
one() {
  game=$1 seed=$2
  dir="runs/minatar-5m/$agent/$game/seed-$seed"
  if [ -f "$dir/summary.json" ] && grep -q '"stopped_by": "total_steps"' "$dir/summary.json"; then
    return 0
  fi
  # --max-minutes counts from the first iteration: leave room for the start (restore,
  # compile), the last checkpoint and the evaluation's 100 episodes
  mins=$(( ($deadline - $(date +%s)) / 60 - 10 ))
  if [ "$mins" -lt 5 ]; then
    echo "$agent $game seed $seed: not started, under 15 minutes to DEADLINE" >&2
    return 0
  fi
  if [ ! -f "$dir/config.json" ] && [ "$(( mins + 10 ))" -lt "${FRESH_MINUTES:-0}" ]; then
    echo "$agent $game seed $seed: not started, under FRESH_MINUTES=$FRESH_MINUTES to DEADLINE" >&2
    return 0
  fi
  if [ -f "$dir/config.json" ]; then
    set -- --resume "$dir"
  else
    set -- --agent "$agent" --preset "$agent-minatar" --env "gymnax/$game-MinAtar" \
      --seed "$seed" --run-dir "$dir" --exact-resume
  fi
  /usr/bin/time -f "$agent $game seed $seed wall %e s" python -m experiments.train "$@" \
    --max-minutes "$mins" --no-progress
}
export -f one
if [ -n "$runs" ]; then
  for run in $runs; do echo "${run%%:*} ${run##*:}"; done
else
  for game in $games; do for seed in $seeds; do echo "$game $seed"; done; done
fi |
  xargs -P "$workers" -L 1 bash -c 'one $0 $1'
