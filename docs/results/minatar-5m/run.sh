#!/usr/bin/env bash
# Issue 28's grid: AGENT (a preset <agent>-minatar) on the five MinAtar games, 5 seeds in one
# population program per game, 5M env steps each. Run from the repository root:
#   bash docs/results/minatar-5m/run.sh ppo [GAME ...]
# Each game writes runs/minatar-5m/<agent>/<Game>; collect.py copies what is kept (configs,
# metrics, summaries; no checkpoints) into docs/results/minatar-5m/games/. A game cut off by
# --max-minutes resumes from its last checkpoint, bit for bit (--exact-resume: replay, env
# states and RNG are in the checkpoint), with
#   python -m experiments.train --resume runs/minatar-5m/<agent>/<Game>
# (The PPO games ran before --exact-resume was added here: each finished in one go, and the
# flag changes what a checkpoint holds, not what a run computes.)
set -eu
agent=$1
shift
games=${*:-Breakout Asterix Freeway SpaceInvaders Seaquest}
for game in $games; do
  /usr/bin/time -f "$agent $game wall %e s" python -m experiments.train --agent "$agent" \
    --preset "$agent-minatar" --env "gymnax/$game-MinAtar" --num-seeds 5 --seed 0 \
    --run-dir "runs/minatar-5m/$agent/$game" --max-minutes 150 --exact-resume --no-progress
done
