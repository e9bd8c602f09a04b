#!/usr/bin/env bash
# usage: old=<clone before> new=<clone after> bash speed.sh; alternated training throughput, env steps/s per run
for round in 1 2 3; do
  for side in old new; do
    for case in "acer-gymnax|--agent acer --env gymnax/CartPole-v1 --total-steps 200000" "acer-classic|--agent acer --total-steps 100000" "reactor-decoupled|--agent reactor --total-steps 20000" "sac-classic|--agent sac --total-steps 4000 --start-train-at 1000" "td3-classic|--agent td3 --total-steps 6000 --start-train-at 1000"; do
      name=${case%%|*}; flags=${case#*|}
      rm -rf /tmp/speed/$side-$name; mkdir -p /tmp/speed
      out=$(cd ${!side} && python -m experiments.train $flags --no-progress --eval-episodes 0 --run-dir /tmp/speed/$side-$name 2>/dev/null | tail -1)
      echo "round $round $side $name: $(echo "$out" | grep -o 'in [0-9.]* s ([0-9]* steps/s, compile [0-9.]* s')"
    done
  done
done
