#!/usr/bin/env bash
# Old (0196e04, /work/old) vs new (/work/main) alternated, on a quiet machine.
PY=/work/main/.venv/bin/python
out=/tmp/meas
for i in 1 2; do
  for side in old new; do
    dir=/work/old; [ $side = new ] && dir=/work/main
    cd $dir && rm -rf runs/acer-CartPole-v1-seed0
    $PY -m experiments.train --no-progress > $out/main_${side}_$i.txt 2>&1
  done
done
for i in 1 2; do
  for side in old new; do
    dir=/work/old; [ $side = new ] && dir=/work/main
    cd $dir
    if [ $side = old ]; then
      $PY -m experiments.bench_throughput --env Pong-v5 --iterations 8 --replay-ratios 4 --json-out $out/acer_${side}_$i.json > $out/acer_${side}_$i.txt 2>&1
    else
      $PY -m experiments.bench_throughput --env Pong-v5 --iterations 8 --rounds 1 --compare replay_ratio=4 --json-out $out/acer_${side}_$i.json > $out/acer_${side}_$i.txt 2>&1
    fi
  done
done
for i in 1 2; do
  for side in old new; do
    dir=/work/old; [ $side = new ] && dir=/work/main
    cd $dir
    $PY -m experiments.bench_throughput --agent reactor --env Pong-v5 --iterations 4 --rounds 2 --json-out $out/reactor_${side}_$i.json > $out/reactor_${side}_$i.txt 2>&1
  done
done
echo ALLDONE > $out/done
