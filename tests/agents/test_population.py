"""`--num-seeds P`: a population of P learners in one program (agents/population.py).

Member i must equal the single run with seed `seed + i`: its own envs, RNG streams, Poisson
update counts and replay. Compared metric by metric over several iterations, and on a mesh
of 2 fake CPU devices (conftest fakes 4)."""

import jax
import numpy as np
import pytest

from agents.acer.agent import ACERAgent
from agents.acer.config import ACERConfig
from agents.config import ConfigError
from agents.parallel import POP, make_mesh
from agents.population import Population
from envs import make_env

CFG = ACERConfig(
    num_envs=4, trace_len=5, batch_size=4, buffer_size=4 * 5 * 8, hidden=(16,), replay_ratio=2.0
)
SEED, ITERS = 3, 6
# Member i and its single run compute the same maths, vmapped or not; XLA:CPU may order a
# batched matmul's sums differently, so allow float32 rounding (observed: see the README).
RTOL, ATOL = 1e-5, 1e-6


def _single(seed: int, iters: int = ITERS):
    agent = ACERAgent(CFG, make_env("CartPole-v1", CFG.num_envs, seed), seed=seed)
    state = agent.init(jax.random.PRNGKey(seed))
    agent.compile(state)
    rows = []
    for it in range(iters):
        state, out = agent.train_iteration(state, it, it * agent.steps_per_iteration)
        rows.append(jax.device_get(out))
    agent.close()
    return rows


def _population(size: int, mesh=None, iters: int = ITERS):
    members = [
        ACERAgent(CFG, make_env("CartPole-v1", CFG.num_envs, SEED + i), seed=SEED + i)
        for i in range(size)
    ]
    pop = Population(members, mesh=mesh)
    keys = jax.numpy.stack([jax.random.PRNGKey(SEED + i) for i in range(size)])
    state = pop.init(keys)
    pop.compile(state)
    rows = []
    for it in range(iters):
        state, out = pop.train_iteration(state, it, it * pop.member_steps_per_iteration)
        rows.append(pop.split_output(jax.device_get(out)))
    pop.close()
    return rows, pop, state


def _assert_same(single, member):
    for it, (a, b) in enumerate(zip(single, member, strict=True)):
        assert len(a.metrics) == len(b.metrics), f"iteration {it}: update counts differ"
        np.testing.assert_array_equal(a.game_over, b.game_over)
        np.testing.assert_allclose(a.finished_return, b.finished_return, rtol=RTOL)
        for ma, mb in zip(a.metrics, b.metrics, strict=True):
            for k in ma:
                np.testing.assert_allclose(
                    ma[k], mb[k], rtol=RTOL, atol=ATOL, err_msg=f"iter {it} {k}"
                )


@pytest.mark.parametrize("devices", [1, 2])
def test_members_equal_single_runs(devices):
    mesh = make_mesh(devices, axis=POP) if devices > 1 else None
    rows, pop, state = _population(2, mesh)
    assert pop.num_devices == devices
    assert jax.tree.leaves(state.learner)[0].shape[0] == 2
    for i in range(2):
        single = _single(SEED + i)
        _assert_same(single, [r[i] for r in rows])
    # the members did different numbers of updates somewhere (the masking was exercised)
    counts = [[len(r[i].metrics) for r in rows] for i in range(2)]
    assert counts[0] != counts[1]
    assert pop.programs["absorb"].traces == 1
    assert pop.programs["replay_updates"].traces == 1


def test_bad_population_is_refused():
    env = make_env("CartPole-v1", CFG.num_envs, 0)
    with pytest.raises(ValueError, match="--num-seeds=3 is not divisible by the number of devices"):
        Population([ACERAgent(CFG, env, seed=i) for i in range(3)], mesh=make_mesh(2, axis=POP))
    from agents.dqn.agent import DQNAgent
    from agents.registry import get_agent

    dqn_cfg = get_agent("dqn").make_config(None, num_envs=CFG.num_envs)
    with pytest.raises(ConfigError, match="--num-seeds > 1 is not supported by --agent dqn"):
        Population([DQNAgent(dqn_cfg, env)])
