"""One agent's or population's chunk program as committed against the program before one of
two changes, alternated round by round in one process on the same state (median ms per
iteration of the chunk program, host syncs excluded):

    CHANGE=lockstep P=5 PYTHONPATH=. python docs/results/population-lockstep/alternate.py
    CHANGE=patches P=1 AGENT=acer PRESET=acer-minatar PYTHONPATH=. python docs/results/...

CHANGE: `lockstep` ("before" masks every replay update of a population) or `patches`
("before" is `PatchConv` with its views interleaved channel by channel, patches ordered
(C, kh, kw)). Env: P (members; 1 with CHANGE=patches: a single run, not a population), AGENT
(dqn), PRESET (dqn-minatar), WARM (env steps before timing, 6000: past learning start),
ROUNDS (6). gymnax/Breakout-MinAtar.

Each "before" program is built from a new callable (a lambda around `device_iteration`):
`lax.cond` caches a traced branch per callable, so the same bound method would bring back the
first program's trace.
"""

import os
import statistics
import time

import flax.linen as nn
import jax
import jax.numpy as jnp

from engine.common import make_agent, make_population
from engine.programs import ChunkProgram
from networks import torsos

CHANGE, P = os.environ.get("CHANGE", "lockstep"), int(os.environ.get("P", "5"))
AGENT, PRESET = os.environ.get("AGENT", "dqn"), os.environ.get("PRESET", "dqn-minatar")
ENV = "gymnax/Breakout-MinAtar"


class Interleaved(torsos.PatchConv):
    """`PatchConv` before e6a0055: the views stacked last, patches ordered (C, kh, kw)."""

    @nn.compact
    def __call__(self, x):
        kh, kw = self.kernel_size
        c = x.shape[-1]
        kernel = self.param("kernel", self.kernel_init, (kh, kw, c, self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        h, w = x.shape[-3] - kh + 1, x.shape[-2] - kw + 1
        views = [x[..., i : i + h, j : j + w, :] for i in range(kh) for j in range(kw)]
        patches = jnp.stack(views, axis=-1).reshape((*x.shape[:-3], h, w, c * kh * kw))
        matrix = jnp.transpose(kernel, (2, 0, 1, 3)).reshape(c * kh * kw, self.features)
        return patches @ matrix + bias.reshape((1, 1, 1, -1))


if P == 1 and CHANGE == "patches":
    agent = make_agent(AGENT, ENV, preset=PRESET)
    state, spi, shape = agent.init(jax.random.PRNGKey(0), jit=True), agent.steps_per_iteration, ()
    due, place = agent.updates_due, lambda s: s
else:
    agent = make_population(AGENT, ENV, P, preset=PRESET)
    state = agent.init(jnp.stack([jax.random.PRNGKey(i) for i in range(P)]), jit=True)
    spi, shape, due, place = agent.member_steps_per_iteration, (P,), agent._todo, agent._place_all
t = time.perf_counter()
agent.compile(state)
print(f"compile, after: {time.perf_counter() - t:.2f} s")
n = agent.max_chunk
it = steps = 0
while steps < int(os.environ.get("WARM", "6000")):
    state, _ = agent.train_chunk(state, it, steps, n)
    it, steps = it + n, steps + n * spi
programs = {"after": agent._chunk}
committed = torsos.PatchConv
if CHANGE == "patches":
    torsos.PatchConv = Interleaved  # MinAtarCNN looks it up when traced
else:
    agent.lock_step = False  # every update masked, as before 4dda3d9
t = time.perf_counter()
programs["before"] = ChunkProgram(lambda s, todo: agent.device_iteration(s, todo), n, shape)
programs["before"].compile(place(state))
print(f"compile, before: {time.perf_counter() - t:.2f} s")
torsos.PatchConv = committed
times = {"after": [], "before": []}
for r in range(int(os.environ.get("ROUNDS", "6"))):
    for name in ["after", "before"] if r % 2 == 0 else ["before", "after"]:
        todos = [due(it + k, steps + k * spi) for k in range(n)]
        t = time.perf_counter()
        state, out = programs[name](place(state), todos)
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
