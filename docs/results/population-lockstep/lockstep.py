"""A population's chunk program with its lock-step updates unmasked (the code as committed)
against every update masked (the code before 4dda3d9), alternated in one process:

    P=5 PYTHONPATH=. python docs/results/population-lockstep/lockstep.py

Env: P (members, 5), AGENT (dqn), PRESET (dqn-minatar), ENV (gymnax/Breakout-MinAtar),
WARM (env steps per member before timing, 6000: past learning start), ROUNDS (8). Each round
runs one chunk of `max_chunk` iterations with each program; printed: ms per iteration.

The "before" program is built from a new callable (a lambda around `device_iteration`): the
traced iteration of `lax.cond` is cached per callable, so the same bound method would reuse
the first program's trace.
"""

import os
import statistics
import time

import jax
import jax.numpy as jnp

from agents.core.population import Population
from agents.core.programs import ChunkProgram
from experiments.common import make_population

P = int(os.environ.get("P", "5"))
AGENT, PRESET = os.environ.get("AGENT", "dqn"), os.environ.get("PRESET", "dqn-minatar")
ENV = os.environ.get("ENV", "gymnax/Breakout-MinAtar")
pop = make_population(AGENT, ENV, P, preset=PRESET)
state = pop.init(jnp.stack([jax.random.PRNGKey(i) for i in range(P)]), jit=True)
t = time.perf_counter()
pop.compile(state)
print(f"compile, after: {time.perf_counter() - t:.2f} s")
n, spi = pop.max_chunk, pop.member_steps_per_iteration
it = steps = 0
while steps < int(os.environ.get("WARM", "6000")):
    state, _ = pop.train_chunk(state, it, steps, n)
    it, steps = it + n, steps + n * spi
after = pop._chunk
pop._member_update = lambda *a, masked=True: Population._member_update(pop, *a, masked=True)
t = time.perf_counter()
before = ChunkProgram(lambda s, todo: pop.device_iteration(s, todo), n, (P,), None)
before.compile(pop._place_all(state))
print(f"compile, before: {time.perf_counter() - t:.2f} s")
programs, times = {"after": after, "before": before}, {"after": [], "before": []}
for r in range(int(os.environ.get("ROUNDS", "8"))):
    for name in ["after", "before"] if r % 2 == 0 else ["before", "after"]:
        todos = [pop._todo(it + k, steps + k * spi) for k in range(n)]
        t = time.perf_counter()
        state, out = programs[name](pop._place_all(state), todos)
        jax.block_until_ready(out)
        times[name].append((time.perf_counter() - t) / n)
        it, steps = it + n, steps + n * spi
for name, ts in times.items():
    med = statistics.median(ts)
    rounds = " / ".join(f"{x * 1e3:.3f}" for x in ts)
    rate = P * spi / med
    print(f"{name}: {med * 1e3:.3f} ms an iteration ({rate:,.0f} aggregate env steps/s); {rounds}")
ratio = statistics.median(times["before"]) / statistics.median(times["after"])
print(f"before / after: {ratio:.2f}")
