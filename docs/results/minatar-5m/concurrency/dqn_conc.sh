#!/usr/bin/env bash
# DQN dqn-minatar: one single run alone; two single runs at once; the 5-seed population alone.
# 60k steps each (learning from 5k); rate over the metrics rows from 20k to the end.
# run from the repository root, in its venv
out=runs/concurrency; mkdir -p $out
run() { python -m experiments.train --agent dqn --preset dqn-minatar --env gymnax/Breakout-MinAtar \
  --total-steps 60000 --seed "$1" --run-dir "$out/$2" --no-progress --eval-episodes 1 "${@:3}" > "$out/$2.log" 2>&1; }
for r in 1 2; do
  rm -rf $out/single$r $out/a$r $out/b$r $out/pop$r
  run 0 single$r
  run 0 a$r & run 1 b$r & wait
  run 0 pop$r --num-seeds 5
done
echo done > $out/DONE
