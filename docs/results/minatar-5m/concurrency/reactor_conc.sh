#!/usr/bin/env bash
# Reactor reactor-minatar: one single run alone; two at once (60k steps each).
# run from the repository root, in its venv
out=runs/concurrency; mkdir -p $out
run() { python -m experiments.train --agent reactor --preset reactor-minatar --env gymnax/Breakout-MinAtar \
  --total-steps 60000 --seed "$1" --run-dir "$out/$2" --no-progress --eval-episodes 1 "${@:3}" > "$out/$2.log" 2>&1; }
rm -rf $out/rsingle $out/ra $out/rb
run 0 rsingle
run 0 ra & run 1 rb & wait
echo done > $out/RDONE
