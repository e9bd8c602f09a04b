"""``partition_specs``: data-parallel layouts of both buffers, run under ``jax.shard_map`` on 2
fake CPU devices (tests/conftest.py asks for 4 host devices).

Each device runs the replay of its own ``N_LOCAL`` envs. What lands where is checked against a
NumPy record of the global rollout, placed by the documented ring layout (written out here).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from replay import (
    PrioritizedReplayState,
    PrioritizedTraceReplay,
    ReplaySample,
    SampleInfo,
    StoredTraces,
    TraceReplay,
    TraceReplayState,
)

SDS = jax.ShapeDtypeStruct
AXIS = "data"
DEVICES = 2
N_LOCAL, T, C = 2, 2, 4  # per device: envs, trace length, traces per env
N = DEVICES * N_LOCAL
NUM_ADDS = 6  # wraps the ring
BATCH = 32  # per device


class Core(NamedTuple):
    c: jax.ShapeDtypeStruct
    h: jax.ShapeDtypeStruct


STEP_SPEC = {
    "id": SDS((), jnp.int32),
    "mu": {"mean": SDS((3,), jnp.float32), "log_std": SDS((3,), jnp.float32)},
}
EXTRAS_SPECS = {
    "none": None,
    "lstm": ((SDS((5,), jnp.float32), SDS((5,), jnp.float32)),),
    "namedtuple": Core(c=SDS((5,), jnp.float32), h=SDS((2,), jnp.int32)),
}


def make(extras, kind="uniform"):
    replay = TraceReplay(
        num_envs=N_LOCAL,
        trace_len=T,
        capacity=N_LOCAL * T * C,
        obs_shape=(3,),
        obs_dtype=np.float32,
        frame_stack=1,
        step_spec=STEP_SPEC,
        extras_spec=EXTRAS_SPECS[extras],
    )
    return PrioritizedTraceReplay(replay, epsilon=0.0) if kind == "prioritized" else replay


@pytest.fixture(scope="module")
def mesh():
    return Mesh(np.array(jax.devices()[:DEVICES]), (AXIS,))


def hand_built_specs(extras):
    split = P(AXIS)
    return TraceReplayState(
        frames=split,
        steps={"id": split, "mu": {"mean": split, "log_std": split}},
        extras=jax.tree.map(lambda _: split, EXTRAS_SPECS[extras]),
        write_slot=P(),
        count=P(),
    )


@pytest.mark.parametrize("extras", sorted(EXTRAS_SPECS))
def test_specs_have_the_state_structure(extras):
    replay = make(extras)
    specs = replay.partition_specs(AXIS)
    state = jax.eval_shape(replay.init)
    assert jax.tree.structure(specs) == jax.tree.structure(state)
    expected = hand_built_specs(extras)
    assert jax.tree.structure(specs) == jax.tree.structure(expected)
    assert jax.tree.leaves(specs) == jax.tree.leaves(expected)

    prioritized = make(extras, "prioritized")
    specs = prioritized.partition_specs(AXIS)
    assert jax.tree.structure(specs) == jax.tree.structure(jax.eval_shape(prioritized.init))
    expected = PrioritizedReplayState(
        base=hand_built_specs(extras), priorities=P(AXIS), tree=P(AXIS), assigned=P(AXIS)
    )
    assert jax.tree.structure(specs) == jax.tree.structure(expected)
    assert jax.tree.leaves(specs) == jax.tree.leaves(expected)


class Record:
    """The global rollout (all N envs) in NumPy."""

    def __init__(self, extras_spec, seed=0):
        self.rng = np.random.default_rng(seed)
        self.extras_spec = extras_spec
        self.obs, self.steps, self.extras = [], [], []

    def leaf(self, shape, dtype):
        if np.issubdtype(np.dtype(dtype), np.integer):
            return self.rng.integers(-1000, 1000, shape).astype(dtype)
        return self.rng.standard_normal(shape).astype(dtype)

    def next(self):
        self.obs.append(self.leaf((T, N, 3), np.float32))
        self.steps.append(jax.tree.map(lambda s: self.leaf((T, N, *s.shape), s.dtype), STEP_SPEC))
        self.extras.append(
            jax.tree.map(lambda s: self.leaf((N, *s.shape), s.dtype), self.extras_spec)
        )
        return self.obs[-1], self.steps[-1], self.extras[-1]

    def storage(self):
        """The global state's storage arrays as the ring layout places the record."""
        ring = C * T
        position = np.arange(ring)
        newest_step = position + ring * ((NUM_ADDS * T - 1 - position) // ring)  # [C*T]
        slot = np.arange(C)
        newest_trace = slot + C * ((NUM_ADDS - 1 - slot) // C)  # [C]

        def steps_of(*leaves):  # [T, N, ...] per add -> [N, C*T, ...]
            return np.swapaxes(np.concatenate(leaves)[newest_step], 0, 1)

        def extras_of(*leaves):  # [N, ...] per add -> [N, C, ...]
            return np.swapaxes(np.stack(leaves)[newest_trace], 0, 1)

        return (
            steps_of(*self.obs),
            jax.tree.map(steps_of, *self.steps),
            jax.tree.map(extras_of, *self.extras),
        )

    def traces(self, env, slot):
        """StoredTraces of the traces at global envs ``env`` and ``slot``."""
        trace = slot + C * ((NUM_ADDS - 1 - slot) // C)
        assert (trace <= NUM_ADDS - 2).all()
        time = trace[None, :] * T + np.arange(T + 1)[:, None]

        def steps_of(*leaves):
            return np.concatenate(leaves)[time, env[None, :]]

        return StoredTraces(
            steps_of(*self.obs),
            jax.tree.map(steps_of, *self.steps),
            jax.tree.map(lambda *leaves: np.stack(leaves)[trace, env], *self.extras),
        )


def sharded_fill(replay, specs, mesh, record):
    """Sharded init and NUM_ADDS sharded adds of the global rollout."""
    init = jax.jit(jax.shard_map(replay.init, mesh=mesh, in_specs=(), out_specs=specs))
    add = jax.jit(
        jax.shard_map(
            replay.add,
            mesh=mesh,
            in_specs=(specs, P(None, AXIS), P(None, AXIS), P(AXIS)),
            out_specs=specs,
        ),
        donate_argnums=0,
    )
    state = init()
    for _ in range(NUM_ADDS):
        state = add(state, *record.next())
    return state


def sharded_sample(replay, specs, mesh, axis_name=None):
    """Every device draws BATCH traces of its own envs; outputs concatenated over devices.
    `axis_name`: passed on to `sample` (None: as a caller that does not give the mesh axis)."""

    def sample(state, key):
        key = jax.random.fold_in(key, jax.lax.axis_index(AXIS))
        return replay.sample(state, key, BATCH, axis_name=axis_name)

    split, per_step = P(AXIS), P(None, AXIS)
    out_specs = ReplaySample(StoredTraces(per_step, per_step, split), SampleInfo(*[split] * 4))
    return jax.jit(jax.shard_map(sample, mesh=mesh, in_specs=(specs, P()), out_specs=out_specs))


def global_env(info):
    """Global env of each draw: device d drew the d-th block of BATCH, from its own envs."""
    device = np.arange(DEVICES * BATCH) // BATCH
    return device * N_LOCAL + np.asarray(info.env_index)


def assert_tree_equal(got, want):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    jax.tree.map(np.testing.assert_array_equal, got, want)


@pytest.mark.parametrize("extras", ["lstm", "namedtuple", "none"])
def test_uniform_replay_shards_by_env(mesh, extras):
    replay = make(extras)
    specs = replay.partition_specs(AXIS)
    record = Record(EXTRAS_SPECS[extras])
    state = sharded_fill(replay, specs, mesh, record)

    # Storage: global arrays [N, ...] whose rows are the envs, each device holding its own.
    frames, steps, extras_ = record.storage()
    assert_tree_equal((state.frames, state.steps, state.extras), (frames, steps, extras_))
    for array in jax.tree.leaves((state.frames, state.steps, state.extras)):
        assert array.sharding.spec == P(AXIS)
        for shard in array.addressable_shards:
            rows = shard.index[0]
            assert (rows.start, rows.stop) in {(0, N_LOCAL), (N_LOCAL, N)}
            np.testing.assert_array_equal(shard.data, np.asarray(array)[rows])
    assert state.write_slot.sharding.is_fully_replicated
    assert int(state.write_slot) == NUM_ADDS % C and int(state.count) == C

    drawn = sharded_sample(replay, specs, mesh)(state, jax.random.key(0))
    env, slot = global_env(drawn.info), np.asarray(drawn.info.slot)
    valid_slots = {k % C for k in range(NUM_ADDS - C, NUM_ADDS - 1)}  # frame_stack 1, wrapped
    assert set(slot.tolist()) == valid_slots
    assert set(env[:BATCH].tolist()) == {0, 1} and set(env[BATCH:].tolist()) == {2, 3}
    assert_tree_equal(drawn.traces, record.traces(env, slot))
    # Each device draws uniformly from its own N_LOCAL * 3 valid pairs.
    np.testing.assert_allclose(np.asarray(drawn.info.probability), 1.0 / (N_LOCAL * 3))


@pytest.mark.parametrize("axis_name", [AXIS, None])
def test_prioritized_replay_keeps_a_sum_tree_per_device(mesh, axis_name):
    replay = make("lstm", "prioritized")
    specs = replay.partition_specs(AXIS)
    record = Record(EXTRAS_SPECS["lstm"])
    state = sharded_fill(replay, specs, mesh, record)
    assert state.tree.shape == (DEVICES * 2 * 8,)  # 8 leaves per device: L = 8, tree 2L

    # Every device sets a priority on each of its valid (env, slot) pairs.
    valid = [k % C for k in range(NUM_ADDS - C, NUM_ADDS - 1)]
    local_env, local_slot = (a.reshape(-1) for a in np.meshgrid(range(N_LOCAL), valid))
    pairs = len(local_env)
    values = np.random.default_rng(1).uniform(0.5, 10.0, (DEVICES, pairs)).astype(np.float32)
    set_priorities = jax.jit(
        jax.shard_map(
            replay.set_priorities,
            mesh=mesh,
            in_specs=(specs, P(AXIS), P(AXIS), P(AXIS)),
            out_specs=specs,
        ),
        donate_argnums=0,
    )
    state = set_priorities(
        state,
        np.tile(local_env, DEVICES).astype(np.int32),
        np.tile(local_slot, DEVICES).astype(np.int32),
        values.reshape(-1),
    )

    stored = np.zeros((N, C), np.float32)  # what each device's valid pairs must hold
    for d in range(DEVICES):
        stored[d * N_LOCAL + local_env, local_slot] = values[d]
    np.testing.assert_array_equal(np.asarray(state.priorities)[:, valid], stored[:, valid])
    np.testing.assert_array_equal(np.asarray(state.assigned)[:, valid], True)
    trees = np.asarray(state.tree).reshape(DEVICES, 16)
    for d in range(DEVICES):
        leaves = stored[d * N_LOCAL : (d + 1) * N_LOCAL].reshape(-1)  # leaf env * C + slot
        np.testing.assert_array_equal(trees[d, 8:], leaves)
        np.testing.assert_allclose(trees[d, 1], leaves.sum(), rtol=1e-6)

    drawn = sharded_sample(replay, specs, mesh, axis_name)(state, jax.random.key(2))
    env, slot = global_env(drawn.info), np.asarray(drawn.info.slot)
    assert_tree_equal(drawn.traces, record.traces(env, slot))
    # epsilon = 0: P(i) = p_i / (sum of the drawing device's priorities).
    device = np.arange(DEVICES * BATCH) // BATCH
    device_total = stored.reshape(DEVICES, -1).sum(axis=1)
    probability = stored[env, slot] / device_total[device]
    np.testing.assert_allclose(np.asarray(drawn.info.probability), probability, rtol=1e-5)
    weight = (1.0 / (N_LOCAL * len(valid) * probability)).reshape(DEVICES, BATCH)
    if axis_name is None:  # each device knows only its own draws
        expected_weight = weight / weight.max(axis=1, keepdims=True)
    else:  # the whole batch's maximum, as on one device (replay/prioritized.py)
        expected_weight = weight / weight.max()
        assert weight.max(axis=1).min() < weight.max() * 0.99  # the two rules differ here
    np.testing.assert_allclose(
        np.asarray(drawn.info.is_weight), expected_weight.reshape(-1), rtol=1e-5
    )
