#!/usr/bin/env bash
# The Atari 100k grid (issue 62): PRESET's runs on GAMES x SEEDS, one at a time, from a
# frozen clone of the repository (its commit named in README.md), with the main venv:
#   git clone <repo> frozen && cd frozen && git checkout <commit>
#   bash docs/results/atari100k/run.sh PRESET "GAMES" "SEEDS" [RUNS_ROOT]
#   e.g. bash docs/results/atari100k/run.sh der "Pong Alien" "0 1 2 3 4"
# Every run is `python -m experiments.train --preset PRESET --env <Game>-v5 --seed <k>` (the
# preset carries --protocol atari100k). A run already kept (its summary.json under games/) is
# skipped; a run folder left without summary.json by a session that ended is started again
# from scratch (an Atari run cannot resume exactly: its replay and envpool state are lost).
# Each finished run's config.json, metrics.csv and summary.json are kept in
# docs/results/atari100k/games/<PRESET>/<Game>/seed-<k>/ of the clone it ran in; commit them
# from there.
set -euo pipefail
preset=$1 games=$2 seeds=$3 root=${4:-runs/atari100k}
here=$(cd "$(dirname "$0")" && pwd)
for game in $games; do
  for seed in $seeds; do
    run="$root/$preset/$game/seed-$seed"
    kept="$here/games/$preset/$game/seed-$seed"
    [ -f "$kept/summary.json" ] && continue
    [ -d "$run" ] && [ ! -f "$run/summary.json" ] && rm -rf "$run"
    echo "$(date -u +%FT%TZ) $preset $game seed $seed"
    python -m experiments.train --preset "$preset" --env "$game-v5" --seed "$seed" \
      --run-dir "$run" --no-progress
    mkdir -p "$kept"
    cp "$run/config.json" "$run/metrics.csv" "$run/summary.json" "$kept/"
  done
done
