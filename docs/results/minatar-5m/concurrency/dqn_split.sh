#!/usr/bin/env bash
# DQN dqn-minatar on Breakout: two single runs at once, against a 2-member and a 3-member
# population at once (5 seeds in 2 processes). 60k steps each; rate from 20k steps on.
# run from the repository root, in its venv
out=runs/concurrency2; mkdir -p $out
run() { python -m experiments.train --agent dqn --preset dqn-minatar --env gymnax/Breakout-MinAtar \
  --total-steps 60000 --seed "$1" --run-dir "$out/$2" --no-progress --eval-episodes 1 "${@:3}" > "$out/$2.log" 2>&1; }
for r in 1 2; do
  rm -rf $out/a$r $out/b$r $out/p2_$r $out/p3_$r
  run 0 a$r & run 1 b$r & wait
  run 0 p2_$r --num-seeds 2 & run 2 p3_$r --num-seeds 3 & wait
  python docs/results/minatar-5m/concurrency/rate.py $out/a$r $out/b$r $out/p2_$r $out/p3_$r
done
