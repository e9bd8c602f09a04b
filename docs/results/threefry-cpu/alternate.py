"""JAX's CPU lowering of the threefry hash (a rolled 5-iteration loop, jax 0.10.2) against the
unrolled lowering JAX uses on other platforms, for one agent's chunk program, alternated round by
round in one process on the same state (median ms per iteration, host syncs excluded), with the
compile time of each:

    CASE=ppo-cartpole PYTHONPATH=. python docs/results/threefry-cpu/alternate.py

CASE: ppo-cartpole (bench_gymnax's flags: 4 envs × 128 steps, 4 epochs × 4 minibatches, MLP
64-64), ppo-breakout (the same on gymnax/Breakout-MinAtar, flattened), acer-cartpole (the
README's main job: `--agent acer` on envpool's CartPole-v1), dqn-minatar (`--preset
dqn-minatar`, past learning start). ROUNDS (6). The two lowerings compute the same bits (the
same hash); only the program's shape differs. The unrolled rule is registered for the CPU
platform through `jax._src` (not a public API), after the rolled program is compiled.
"""

import os
import statistics
import time

import jax
from jax._src.interpreters import mlir
from jax._src.random import threefry2x32 as threefry

from engine.common import build_agent, preset_args
from engine.programs import ChunkProgram
from envs import make_env, run_env_seed

PPO = dict(num_envs=4, trace_len=128, epochs=4, num_minibatches=4, hidden=(64, 64))
CASES = {
    "ppo-cartpole": ("ppo", "gymnax/CartPole-v1", PPO, 0),
    "ppo-breakout": ("ppo", "gymnax/Breakout-MinAtar", PPO, 0),  # flattened observations
    "acer-cartpole": ("acer", "CartPole-v1", {}, 0),
    "dqn-minatar": ("dqn", "gymnax/Breakout-MinAtar", {"preset": "dqn-minatar"}, 6_000),
}
CASE = os.environ.get("CASE", "ppo-cartpole")
name, env_id, flags, warm = CASES[CASE]
flags = dict(flags)
args = preset_args(name, env_id, flags.pop("preset", None), 0, flags)
n = args.config.num_envs
env = make_env(env_id, n, run_env_seed(0, n), flatten_obs=CASE == "ppo-breakout")
agent = build_agent(args, env)
state = agent.init(jax.random.PRNGKey(0), jit=True)
t = time.perf_counter()
agent.compile(state)
compile_s = {"rolled (jax 0.10.2's CPU default)": time.perf_counter() - t}
n, spi = agent.max_chunk, agent.steps_per_iteration
it = steps = 0
while it == 0 or steps < warm:
    state, _ = agent.train_chunk(state, it, steps, n)
    it, steps = it + n, steps + n * spi
programs = {"rolled (jax 0.10.2's CPU default)": agent._chunk}
mlir.register_lowering(
    threefry.threefry2x32_p, threefry._threefry2x32_lowering_rule, platform="cpu"
)
t = time.perf_counter()
unrolled = ChunkProgram(lambda s, todo: agent.device_iteration(s, todo), n)  # a new trace
programs["unrolled"] = unrolled.compile(state)
compile_s["unrolled"] = time.perf_counter() - t
times = {k: [] for k in programs}
for _ in range(int(os.environ.get("ROUNDS", "6"))):
    for key, program in programs.items():
        todos = [agent.updates_due(it + k, steps + k * spi) for k in range(n)]
        jax.block_until_ready(state)
        t = time.perf_counter()
        state, out = program(state, todos)
        jax.block_until_ready(out)
        times[key].append((time.perf_counter() - t) / n * 1e3)
        it, steps = it + n, steps + n * spi
print(f"{CASE}: {n} iterations of {spi} env steps per call")
for key, values in times.items():
    med = statistics.median(values)
    rounds = " ".join(f"{v:.3f}" for v in values)
    print(f"  {key:34s} compile {compile_s[key]:.2f} s; ms/iteration {rounds}; median {med:.3f}"
          f" ({spi / med * 1e3:,.0f} env steps/s)")  # fmt: skip
