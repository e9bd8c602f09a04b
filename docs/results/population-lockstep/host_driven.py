"""A lock-step population's host-driven replay updates (`Population.train_iteration`, the path
of populations that run one iteration per host call), masked program against unmasked,
alternated round by round in one process on the same state (median ms per call of one update
of every member):

    P=5 PYTHONPATH=. python docs/results/population-lockstep/host_driven.py

Env: P (members, 5), ROUNDS (6). DQN `dqn-minatar` on gymnax/Breakout-MinAtar, past learning
start (6,000 env steps per member)."""

import os
import statistics
import time

import jax
import jax.numpy as jnp

from engine.common import make_population

P = int(os.environ.get("P", "5"))
pop = make_population("dqn", "gymnax/Breakout-MinAtar", P, preset="dqn-minatar")
assert pop.lock_step
state = pop.init(jnp.stack([jax.random.PRNGKey(i) for i in range(P)]), jit=True)
pop.compile(state)
it = steps = 0
while steps < 6000:
    state, _ = pop.train_iteration(state, it, steps)
    it, steps = it + 1, steps + pop.member_steps_per_iteration
learner, replay = state.learner, state.replay
todo = pop._place(jnp.ones((P,), jnp.int32))
programs = {"masked (before)": pop._updates, "unmasked (after)": pop._all_updates}
for program in programs.values():  # compile both
    learner, replay, _ = program(learner, replay, todo)
times = {name: [] for name in programs}
for _ in range(int(os.environ.get("ROUNDS", "6"))):
    for name, program in programs.items():
        jax.block_until_ready(learner)
        t = time.perf_counter()
        for _ in range(200):
            learner, replay, m = program(learner, replay, todo)
        jax.block_until_ready((learner, m))
        times[name].append((time.perf_counter() - t) / 200 * 1e3)
print(f"P={P}, ms per call of one update of every member (rounds, then median):")
for name, values in times.items():
    rounds = " ".join(f"{v:.3f}" for v in values)
    print(f"  {name:17s} {rounds}  median {statistics.median(values):.3f}")
