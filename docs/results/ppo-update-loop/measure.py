"""PPO's epochs x minibatches loop with the Nature CNN on XLA:CPU: compile time and seconds
per update for update_loop = scan, unroll, dispatch, in one process on one fake rollout.

    PYTHONPATH=. python docs/results/ppo-update-loop/measure.py [EPOCHS MINIBATCHES]
"""

import sys
import time

import jax
import numpy as np

from engine.common import make_agent

E, M = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (2, 2)
results = {}
for mode in ("dispatch", "unroll", "scan"):
    agent = make_agent(
        "ppo", "Pong-v5", preset="ppo-atari", update_loop=mode, num_envs=4, trace_len=32,
        epochs=E, num_minibatches=M, microbatch_traces=32,
    )  # fmt: skip
    state = agent.init(jax.random.PRNGKey(0))
    t0 = time.perf_counter()
    agent.compile(state)
    compile_s = time.perf_counter() - t0
    actor, traj, placed = agent.collect(state)
    jax.block_until_ready(traj.obs)

    def learn(learner, mode=mode, agent=agent, placed=placed):
        if mode == "dispatch":
            learner, buffer = agent._prepare(learner, placed)
            for _, args in agent._indices:
                learner, m = agent._minibatch(learner, buffer, *args)
            return learner, m
        learner, _, ms = agent._absorb(learner, (), placed)
        return learner, ms[-1]

    learner = state.learner
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        learner, m = learn(learner)
        jax.block_until_ready(m)
        times.append(time.perf_counter() - t0)
    per_update = float(np.median(times[1:])) / (E * M)
    results[mode] = (compile_s, per_update)
    print(
        f"{mode}: compile {compile_s:.1f} s (rollout + learning programs), "
        f"{per_update * 1000:.0f} ms per minibatch update of {4 * 32 // M} frames "
        f"(median of 2, after 1 warm-up)",
        flush=True,
    )
    agent.close()
base = results["dispatch"][1]
for mode, (_, s) in results.items():
    print(f"{mode} / dispatch time per update: {s / base:.2f}x")
