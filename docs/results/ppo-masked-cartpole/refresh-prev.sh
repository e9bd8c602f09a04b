# Recurrent PPO on masked-velocity CartPole: --refresh-memories on/off and --prev-action-reward,
# 5 seeds each at 200k and 60k env steps (refresh-prev.csv). One run at a time, niced.
run() {  # run NAME STEPS [flags]
 name=$1; steps=$2; shift 2
 nice -n 15 python -m experiments.train --agent ppo --exp-name $name \
  --preprocess-obs envs.observation_masks:cartpole_no_velocity --normalize-reward --num-envs 16 \
  --trace-len 32 --total-steps $steps --anneal-steps $steps --no-progress --max-minutes 3 \
  --lstm-size 64 --recurrence 8 --shared-torso "$@"
}
for s in 0 1 2 3 4; do
 for steps in 200000 60000; do
  p=$([ $steps = 200000 ] && echo pr || echo p60)
  run $p-refresh-on-s$s $steps --seed $s
  run $p-refresh-off-s$s $steps --seed $s --no-refresh-memories
  run $p-prev-on-s$s $steps --seed $s --prev-action-reward
 done
done
