cd /work/wt-ppo
for i in 1 2; do  # runs 3 and 4 were a second pass (for i in 3 4)
for a in ppo acer; do
rm -rf runs/main-$a-$i
/usr/bin/time -f "$a run $i: whole process %e s" /work/main/.venv/bin/python -m experiments.train --agent $a --no-progress --exp-name main-$a-$i 2>&1 | tail -2
uptime
done; done
