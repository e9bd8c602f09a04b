#!/usr/bin/env bash
# The committed suite (issue 15): three sweeps, one after the other, then one report each and
# the thinned curves. Run from the repository root: bash docs/results/suites/run.sh
set -u
for part in classic pendulum minatar; do
  /usr/bin/time -f "$part sweep wall %e s" python -m experiments.sweep \
    docs/results/suites/$part.yaml --no-live
done
python -m experiments.report runs/suite-classic --out docs/results/suites/classic \
  --title "Suite: classic control (CartPole-v1), every discrete agent × 5 seeds, 50k steps"
python -m experiments.report runs/suite-pendulum --out docs/results/suites/pendulum \
  --title "Suite: classic control (Pendulum-v1), SAC, TD3 and continuous ACER × 5 seeds, 20k steps"
python -m experiments.report runs/suite-minatar --out docs/results/suites/minatar \
  --title "Suite: MinAtar Breakout and SpaceInvaders, six agents × 5 seeds, 100k steps"
python docs/results/suites/collect.py runs/suite-classic runs/suite-pendulum runs/suite-minatar
