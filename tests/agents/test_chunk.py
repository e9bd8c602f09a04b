"""Many iterations per host sync (`train_chunk`: engine/driver.py, engine/population.py).

A chunk of N iterations in one program must be the N iterations of the one-iteration path
(`train_iteration`, whose programs the host drives): the same update counts, episode
statistics and metrics, and the same learner to float32 rounding (one program may fuse the
same maths differently). Chunks of any sizes must give bit-identical results: they run one
executable."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from engine.common import make_agent, make_population
from engine.protocol import ChunkOutput

RTOL, ATOL = 1e-4, 1e-5
SMALL = {
    "dqn": dict(
        num_envs=2,
        trace_len=2,
        batch_size=8,
        buffer_size=256,
        start_train_at=8,
        replay_ratio=24.0,
        hidden=(16,),
    ),  # fmt: skip  1.5 updates per iteration
    "ppo": dict(num_envs=2, trace_len=8, num_minibatches=2, epochs=2, hidden=(16,)),
    "pqn": dict(num_envs=2, trace_len=8, num_minibatches=2, epochs=2, hidden=(16,)),
}


def _one_by_one(agent, state, iters, steps):
    """The one-iteration path: `train_iteration` N times, summed as a chunk would be."""
    outs = []
    for it in range(iters):
        state, out = agent.train_iteration(state, it, it * steps)
        outs.append(jax.device_get(out))
    return state, outs


def _counts(out: ChunkOutput, n):
    return np.asarray(out.updates)[:n]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_chunk_is_its_iterations(name):
    iters = 7
    a = make_agent(name, "CartPole-v1", seed=1, **SMALL[name])
    b = make_agent(name, "CartPole-v1", seed=1, **SMALL[name])
    assert a.host_driven is None and a.max_chunk >= iters
    sa, outs = _one_by_one(a, a.init(jax.random.PRNGKey(1)), iters, a.steps_per_iteration)
    sb = b.init(jax.random.PRNGKey(1))
    b.compile(sb)
    sb, chunk = b.train_chunk(sb, 0, 0, iters)
    chunk = jax.device_get(chunk)
    for it, out in enumerate(outs):
        n_updates = sum(np.size(m[a.metric_names[0]]) for m in out.metrics)
        assert chunk.updates[it] == n_updates, it
        np.testing.assert_array_equal(chunk.game_over[it], out.game_over)
        np.testing.assert_array_equal(chunk.finished_length[it], out.finished_length)
        for k in a.metric_names:
            total = sum(np.sum(m[k]) for m in out.metrics)
            np.testing.assert_allclose(chunk.metric_sums[k][it], total, RTOL, ATOL, err_msg=k)
    assert chunk.updates[:iters].sum() > 0  # it learnt
    assert not chunk.game_over[iters:].any() and not chunk.updates[iters:].any()  # skipped
    jax.tree.map(
        lambda x, y: np.testing.assert_allclose(x, y, RTOL, ATOL),
        jax.device_get(sa.learner.params),
        jax.device_get(sb.learner.params),
    )


def test_chunk_sizes_do_not_change_the_run():
    """3 + 1 + 4 iterations in three syncs == 8 in one, bit for bit (one executable)."""
    results = []
    for counts in ((3, 1, 4), (8,)):
        agent = make_agent("dqn", "CartPole-v1", seed=2, **SMALL["dqn"])
        state = agent.init(jax.random.PRNGKey(2))
        agent.compile(state)
        it, updates = 0, []
        for n in counts:
            state, out = agent.train_chunk(state, it, it * agent.steps_per_iteration, n)
            updates += list(_counts(jax.device_get(out), n))
            it += n
        results.append((updates, jax.device_get(state.learner)))
    assert results[0][0] == results[1][0]
    jax.tree.map(np.testing.assert_array_equal, results[0][1], results[1][1])


ACER_DRAWS = dict(
    num_envs=2,
    trace_len=4,
    batch_size=2,
    buffer_size=64,
    start_train_at=0,
    replay_ratio=2.0,
    hidden=(16,),
    lstm_size=0,
)  # fmt: skip  Poisson(2) replay updates an iteration, drawn per member seed


@pytest.mark.parametrize(
    "name, config, lock_step",
    [
        ("dqn", SMALL["dqn"], None),
        ("acer", ACER_DRAWS, None),
        pytest.param("acer", ACER_DRAWS, True, marks=pytest.mark.slow),  # the fallback
    ],
)
def test_population_chunk_is_its_iterations(name, config, lock_step):
    """P = 2 members: one chunk == the population's one-iteration path, per member. DQN's
    members owe the same updates every iteration (lock step: unmasked updates); ACER's draw
    their own counts, so the chunk runs updates that one member skips (masked). A population
    wrongly taken for lock step (forced here) switches to masked updates at its first chunk
    whose members differ."""
    iters, size = 6, 2
    pops = [make_population(name, "CartPole-v1", size, seed=3, **config) for _ in "ab"]
    keys = jnp.stack([jax.random.PRNGKey(3 + i) for i in range(size)])
    a, b = pops
    assert b.host_driven is None
    assert b.lock_step == (name == "dqn")
    if lock_step is not None:
        b.lock_step = lock_step
    sa = a.init(keys)
    counts = np.zeros((iters, size), int)
    for it in range(iters):
        sa, out = a.train_iteration(sa, it, it * a.member_steps_per_iteration)
        for i, member in enumerate(a.split_output(jax.device_get(out))):
            counts[it, i] = sum(np.size(m["loss"]) for m in member.metrics)
    sb = b.init(keys)
    b.compile(sb)
    sb, chunk = b.train_chunk(sb, 0, 0, iters)
    members = b.split_chunk(jax.device_get(chunk))
    for i, m in enumerate(members):
        np.testing.assert_array_equal(m.updates[:iters], counts[:, i])
    assert counts.sum() > 0
    if name == "acer":  # the members' counts differed: masked updates ran
        assert (counts[:, 0] != counts[:, 1]).any() and not b.lock_step
    jax.tree.map(
        lambda x, y: np.testing.assert_allclose(x, y, RTOL, ATOL),
        jax.device_get(sa.learner.member.params),
        jax.device_get(sb.learner.member.params),
    )


def _host_driven(case):
    """A host-driven agent (PPO's --update-loop dispatch) or population (2 DQN members split
    over 2 devices, on envpool's XLA step), its initial state and steps per iteration."""
    from agents.core.parallel import POP, make_mesh

    if case == "agent":
        agent = make_agent("ppo", "CartPole-v1", seed=5, update_loop="dispatch", **SMALL["ppo"])
        return agent, agent.init(jax.random.PRNGKey(5)), agent.steps_per_iteration
    mesh = make_mesh(2, axis=POP)
    pop = make_population("dqn", "CartPole-v1", 2, mesh=mesh, seed=5, **SMALL["dqn"])
    keys = jnp.stack([jax.random.PRNGKey(5 + i) for i in range(2)])
    return pop, pop.init(keys), pop.member_steps_per_iteration


@pytest.mark.parametrize("case", ["agent", "population"])
def test_host_driven_chunk_is_its_iterations_from_the_host(case):
    """Where the host drives each iteration, a chunk of N is the N iterations of the
    one-iteration path (`train_iteration`) run from the host and stacked as a chunk program's
    output (so the runner logs one metrics row per N iterations, not per iteration): the
    same update counts, episodes, metric sums and learner, already on the host."""
    iters = 4
    (a, sa, steps), (b, sb, _) = _host_driven(case), _host_driven(case)
    assert b.host_driven is not None and b.max_chunk >= iters
    split = a.split_output if case == "population" else lambda out: [out]
    outs = []  # [iteration][member]: the one-iteration path's outputs
    for it in range(iters):
        sa, out = a.train_iteration(sa, it, it * steps)
        outs.append(split(jax.device_get(out)))
    with pytest.raises(ValueError, match=f"1 to {b.max_chunk} iterations, not 0"):
        b.train_chunk(sb, 0, 0, 0)
    sb, chunk = b.train_chunk(sb, 0, 0, iters)
    assert all(isinstance(x, np.ndarray) for x in jax.tree.leaves(chunk))  # synced
    members = b.split_chunk(chunk) if case == "population" else [chunk]
    for i, m in enumerate(members):
        assert m.updates.shape[0] == iters
        for it in range(iters):
            out = outs[it][i]
            np.testing.assert_array_equal(m.game_over[it], out.game_over)
            np.testing.assert_array_equal(m.finished_return[it], out.finished_return)
            assert m.updates[it] == sum(np.size(x[b.metric_names[0]]) for x in out.metrics)
            for k in b.metric_names:
                total = sum(np.sum(x[k], dtype=np.float64) for x in out.metrics)
                np.testing.assert_allclose(m.metric_sums[k][it], total, RTOL, ATOL, err_msg=k)
        assert m.updates.sum() > 0
    if case == "agent":
        np.testing.assert_array_equal(chunk.updates, 4)  # 2 epochs x 2 minibatches
    jax.tree.map(np.testing.assert_array_equal, *jax.device_get((sa.learner, sb.learner)))


def test_a_host_chunk_ends_at_a_non_finite_metric():
    """`host_chunk` stops at the iteration whose metrics are not finite (the runner stops the
    run on it) instead of running the rest of its count; the iterations and env steps it
    hands each iteration are the chunk's."""
    from engine.programs import host_chunk
    from engine.protocol import IterationOutput

    seen = []

    def train_iteration(state, iteration, env_steps):
        seen.append((iteration, env_steps))
        loss = np.float32(np.nan if iteration == 12 else 1.0)
        stats = np.zeros((2, 3)), np.zeros((2, 3), np.int32), np.zeros((2, 3), bool)
        return state + 1, IterationOutput([{"loss": loss}], *stats)

    state, out = host_chunk(train_iteration, 0, 10, 500, 6, 5, ("loss",))
    assert seen == [(10, 500), (11, 506), (12, 512)] and state == 3
    assert out.metric_sums["loss"].tolist()[:2] == [1.0, 1.0] and np.isnan(
        out.metric_sums["loss"][2]
    )
    assert out.updates.tolist() == [1, 1, 1] and out.game_over.shape == (3, 2, 3)


SPLIT = {
    **SMALL,  # ACER: Poisson update counts, so the devices' update loops differ in length
    "acer": dict(num_envs=2, trace_len=4, batch_size=2, buffer_size=64, hidden=(16,)),
}


# ACER (members' loops of different lengths) and PQN (no replay) in the fast tier; DQN (a
# replay in lock step) and PPO (PQN's on-policy shape) in the slow one.
SPLIT_SLOW = {"dqn", "ppo"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.slow] * (n in SPLIT_SLOW)) for n in sorted(SPLIT)]
)
def test_population_split_over_devices_runs_chunked_as_on_one(name):
    """P = 4 members on gymnax's CartPole (its step is plain JAX), split over a 2-device
    mesh: many iterations in one program, each device scanning its own 2 members (the whole
    state split, the actors' too, and no collective in the program), with the same update
    counts, episodes and learners as the population on one device. With envpool's XLA step
    (a call out to one host-side pool) the split stays one iteration per program."""
    from agents.core.parallel import POP, make_mesh

    iters, size = 5, 4
    mesh = make_mesh(2, axis=POP)
    keys = jnp.stack([jax.random.PRNGKey(4 + i) for i in range(size)])
    host = make_population(name, "CartPole-v1", 2, mesh=mesh, seed=4, **SPLIT[name])
    assert "plain JAX" in host.host_driven
    outs = []
    for mesh_or_none in (None, mesh):
        pop = make_population(
            name, "gymnax/CartPole-v1", size, mesh=mesh_or_none, seed=4, **SPLIT[name]
        )
        assert pop.host_driven is None and pop.max_chunk >= iters
        state = pop.init(keys)
        pop.compile(state)
        state, out = pop.train_chunk(state, 0, 0, 3)
        state, out2 = pop.train_chunk(state, 3, 3 * pop.member_steps_per_iteration, iters - 3)
        devices = 1 if mesh_or_none is None else 2
        for part in (state.learner, state.replay, state.actor):
            for leaf in jax.tree.leaves(part):
                assert len(leaf.sharding.device_set) == devices
        program = pop._chunk._compiled.as_text()
        for collective in ("all-gather", "all-reduce", "all-to-all", "collective-permute"):
            assert collective not in program, collective
        outs.append((jax.device_get((out, out2)), jax.device_get(state.learner.member.params)))
    (one, params_one), (two, params_two) = outs
    if name == "acer":  # the members' Poisson counts differ: so do the devices' loops
        assert (one[0].updates[:3] != one[0].updates[:3, :1]).any()
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a.updates, b.updates)
        np.testing.assert_array_equal(a.game_over, b.game_over)
        np.testing.assert_array_equal(a.finished_length, b.finished_length)
        for k in a.metric_sums:
            np.testing.assert_allclose(a.metric_sums[k], b.metric_sums[k], RTOL, ATOL, err_msg=k)
    assert one[0].updates.sum() + one[1].updates.sum() > 0
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, RTOL, ATOL), params_one, params_two)
