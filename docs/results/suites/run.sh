#!/usr/bin/env bash
# The committed suite (issue 15): three sweeps, one after the other, then one report.
# Run from the repository root: bash docs/results/suites/run.sh
set -u
for part in classic pendulum minatar; do
  /usr/bin/time -f "$part sweep wall %e s" python -m experiments.sweep \
    docs/results/suites/$part.yaml --no-live
done
