#!/usr/bin/env bash
# alternated old (/work/old66) vs new (/work/main) training throughput; prints env steps/s per run
PPO="--agent ppo --num-envs 4 --trace-len 128 --epochs 4 --num-minibatches 4 --hidden 64 64"
for round in 1 2 3; do
  for side in old66 main; do
    for case in "ppo-breakout|$PPO --env gymnax/Breakout-MinAtar --flatten-obs --total-steps 300000" "ppo-classic|--agent ppo" "pqn-cartpole|--agent pqn --total-steps 200000"; do
      name=${case%%|*}; flags=${case#*|}
      rm -rf /tmp/speed/$side-$name; mkdir -p /tmp/speed
      out=$(cd /work/$side && /work/main/.venv/bin/python -m experiments.train $flags --no-progress --eval-episodes 0 --run-dir /tmp/speed/$side-$name 2>/dev/null | tail -1)
      echo "round $round $side $name: $(echo "$out" | grep -o 'in [0-9.]* s ([0-9]* steps/s, compile [0-9.]* s')"
    done
  done
done
