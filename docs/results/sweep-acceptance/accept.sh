#!/bin/bash
# kill -9 of one run and of the sweep mid-way, then a restart.
cd /work/wt-sweep && . /work/main/.venv/bin/activate
rm -rf runs/sweep-acceptance
SPEC=docs/results/sweep-acceptance/acceptance.yaml
T0=$(date +%s)
echo "start $(date -Is)"
setsid nice -n 15 python -m experiments.sweep $SPEC --no-live > /tmp/acc1.log 2>&1 &
SWEEP=$!
# wait until 3 runs are done
while [ "$(grep -c '"status": "done"' runs/sweep-acceptance/sweep_state.json 2>/dev/null)" -lt 3 ]; do sleep 5; done
# wait until a running run has written a checkpoint, then kill -9 it
while true; do
  PID=$(python - <<'PY'
import json, pathlib
s = json.load(open("runs/sweep-acceptance/sweep_state.json"))
for name, r in s["runs"].items():
    if r["status"] == "running" and list(pathlib.Path("runs/sweep-acceptance", name).glob("checkpoints/*/")):
        print(r["launches"][-1]["pid"], name); break
PY
)
  [ -n "$PID" ] && break; sleep 2
done
echo "kill -9 run $PID at $(( $(date +%s) - T0 )) s"; kill -9 ${PID%% *}
sleep 25
echo "kill -9 sweep $SWEEP at $(( $(date +%s) - T0 )) s"; kill -9 $SWEEP
sleep 5
T1=$(date +%s)
echo "restart at $(( T1 - T0 )) s"
nice -n 15 python -m experiments.sweep $SPEC --no-live > /tmp/acc2.log 2>&1
echo "restart exit $? after $(( $(date +%s) - T1 )) s; total $(( $(date +%s) - T0 )) s"
