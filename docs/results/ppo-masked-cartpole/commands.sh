cd /work/wt-ppo
for kind in lstm ff; do
 extra=""; [ $kind = lstm ] && extra="--lstm-size 64 --recurrence 8 --shared-torso"
 rm -rf runs/ppo-masked-cartpole-$kind-3
 nice -n 5 /work/main/.venv/bin/python -m experiments.train --agent ppo --exp-name ppo-masked-cartpole-$kind-3 --preprocess-obs envs.observation_masks:cartpole_no_velocity --normalize-reward --num-envs 16 --trace-len 32 --total-steps 200000 --anneal-steps 200000 --no-progress --max-minutes 7 $extra
done
