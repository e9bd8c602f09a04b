"""`PatchConv`'s patches placed view by view (the code as committed) against interleaved
channel by channel (before), alternated in one process: chunk programs of one agent or
population, the same state, ms per iteration.

    P=5 PYTHONPATH=. python docs/results/population-lockstep/patch_order.py

Env: P (members; 1: a single run, not a population), AGENT (dqn), PRESET (dqn-minatar),
ROUNDS (6). The "before" form is defined here and swapped in while its program is traced.
"""

import os
import statistics
import time

import flax.linen as nn
import jax
import jax.numpy as jnp

from agents.core.programs import ChunkProgram
from experiments.common import make_agent, make_population
from networks import torsos

P = int(os.environ.get("P", "5"))
AGENT, PRESET = os.environ.get("AGENT", "dqn"), os.environ.get("PRESET", "dqn-minatar")
ENV = "gymnax/Breakout-MinAtar"


class Interleaved(torsos.PatchConv):
    """Before: the views stacked last, patches ordered (C, kh, kw)."""

    @nn.compact
    def __call__(self, x):
        return interleaved(self, x)


def interleaved(self, x):
    kh, kw = self.kernel_size
    c = x.shape[-1]
    kernel = self.param("kernel", self.kernel_init, (kh, kw, c, self.features))
    bias = self.param("bias", nn.initializers.zeros, (self.features,))
    h, w = x.shape[-3] - kh + 1, x.shape[-2] - kw + 1
    views = [x[..., i : i + h, j : j + w, :] for i in range(kh) for j in range(kw)]
    patches = jnp.stack(views, axis=-1).reshape((*x.shape[:-3], h, w, c * kh * kw))
    matrix = jnp.transpose(kernel, (2, 0, 1, 3)).reshape(c * kh * kw, self.features)
    return patches @ matrix + bias.reshape((1, 1, 1, -1))


if P == 1:
    agent = make_agent(AGENT, ENV, preset=PRESET)
    state, spi, shape = agent.init(jax.random.PRNGKey(0), jit=True), agent.steps_per_iteration, ()
    due, place = agent.updates_due, lambda s: s
else:
    agent = make_population(AGENT, ENV, P, preset=PRESET)
    state = agent.init(jnp.stack([jax.random.PRNGKey(i) for i in range(P)]), jit=True)
    spi, shape, due, place = agent.member_steps_per_iteration, (P,), agent._todo, agent._place_all
agent.compile(state)
n = agent.max_chunk
it = steps = 0
while steps < 6000:  # past learning start
    state, _ = agent.train_chunk(state, it, steps, n)
    it, steps = it + n, steps + n * spi
programs = {"after": agent._chunk}
committed = torsos.PatchConv
torsos.PatchConv = Interleaved  # MinAtarCNN looks it up when traced
programs["before"] = ChunkProgram(lambda s, todo: agent.device_iteration(s, todo), n, shape)
programs["before"].compile(place(state))
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
