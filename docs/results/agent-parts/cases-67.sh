#!/usr/bin/env bash
# The session-67 cases (ACER, the Reactor, SAC, TD3, then a final row per agent) as run:
#   OLD=/path/clone-at-fa014ac NEW=/path/clone-after bash cases-67.sh
C="bash $(dirname "$0")/compare.sh"
$C acer --agent acer --total-steps 8000
$C acergx --agent acer --env gymnax/CartPole-v1 --total-steps 8000
$C acerlstm --agent acer --lstm-size 16 --total-steps 4000
$C acerpend --agent acer --preset acer-pendulum --total-steps 3000
$C acerdbg --agent acer --total-steps 3000 --debug
$C acershared --agent acer --total-steps 4000 --replay-draw shared --no-trust-region
XLA_FLAGS=--xla_force_host_platform_device_count=2 $C acerdp --agent acer --total-steps 4000 --num-devices 2
$C acerpop --agent acer --env gymnax/CartPole-v1 --total-steps 4000 --num-seeds 2 --vary lr=0.001,0.0005
$C reactor --agent reactor --no-decoupled --total-steps 3000
$C reactorgx --agent reactor --no-decoupled --env gymnax/CartPole-v1 --total-steps 3000
$C reactorpop --agent reactor --no-decoupled --env gymnax/CartPole-v1 --total-steps 2000 --num-seeds 2 --vary lr=0.001,0.0005
XLA_FLAGS=--xla_force_host_platform_device_count=2 $C reactordp --agent reactor --no-decoupled --total-steps 2000 --num-devices 2
$C sac --agent sac --total-steps 2400 --start-train-at 800
$C sacdisc --agent sac --env CartPole-v1 --total-steps 2400 --start-train-at 800
$C sacper --agent sac --total-steps 2400 --start-train-at 800 --prioritized --n-step 3 --target vtrace --overwrite-mu
$C sacnorm --agent sac --total-steps 2400 --start-train-at 800 --normalize-obs --rnd-coef 0.1
$C sacdbg --agent sac --total-steps 1600 --start-train-at 800 --debug
$C sacpop --agent sac --total-steps 1600 --start-train-at 800 --num-seeds 2 --vary actor_lr=0.001,0.0003
$C td3 --agent td3 --total-steps 2400 --start-train-at 800
$C td3dbg --agent td3 --total-steps 1600 --start-train-at 800 --debug --normalize-obs
$C td3pop --agent td3 --total-steps 1600 --start-train-at 800 --num-seeds 2 --vary target_noise=0.2,0.1
XLA_FLAGS=--xla_force_host_platform_device_count=2 $C sacdp --agent sac --total-steps 1600 --start-train-at 800 --num-devices 2 --prioritized
$C sacrec --agent sac --env Pendulum-P-v1 --recurrent --total-steps 1200 --start-train-at 800 --batch-size 16 --update-to-data 0.25
$C acerF --agent acer --total-steps 8000
$C reactorF --agent reactor --no-decoupled --total-steps 3000
$C sacF --agent sac --total-steps 2400 --start-train-at 800
$C dqnF --agent dqn --total-steps 8000
$C r2d1F --agent r2d1 --total-steps 6000
$C ppoF --agent ppo --total-steps 16384
$C pqnF --agent pqn --total-steps 40960
