"""Tests for replay.PrioritizedTraceReplay against a NumPy reference of its documented rules.

The reference keeps its own valid mask, stored priorities and assigned flags; after every
operation the device state must match it, and the sum tree must hold exactly the stored
priorities of the valid slots (0 elsewhere).
"""

import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay import (
    PrioritizedReplayState,
    PrioritizedTraceReplay,
    ReplaySample,
    StoredTraces,
    TraceReplay,
    sum_tree_total,
)

SDS = jax.ShapeDtypeStruct
SIGMAS = 5.0
UPDATE_BATCH = 6


def make_replay(num_envs, traces_per_env, frame_stack, trace_len=2, **kwargs):
    step_spec = {"id": SDS((), jnp.int32)}
    if frame_stack > 1:
        step_spec["frame_reset"] = SDS((), jnp.bool_)
    base = TraceReplay(
        num_envs=num_envs,
        trace_len=trace_len,
        capacity=traces_per_env * num_envs * trace_len,
        obs_shape=(frame_stack, 2) if frame_stack > 1 else (2,),
        obs_dtype=np.float32,
        frame_stack=frame_stack,
        step_spec=step_spec,
    )
    return PrioritizedTraceReplay(base, **kwargs)


class Writer:
    """Makes add() inputs whose step ids are ``global_step * num_envs + env + 1``."""

    def __init__(self, replay):
        self.replay = replay
        self.step = 0

    def next(self):
        base = self.replay.base
        n, t = base.num_envs, base.trace_len
        global_step = self.step + np.arange(t)[:, None]
        ids = (global_step * n + np.arange(n)[None, :] + 1).astype(np.int32)
        self.step += t
        obs = np.zeros((t, n, *base.obs_shape), np.float32)
        obs += ids.reshape(t, n, *[1] * len(base.obs_shape))
        steps = {"id": ids}
        if base.frame_stack > 1:
            steps["frame_reset"] = np.zeros((t, n), bool)
        return jnp.asarray(obs), steps


class Reference:
    """NumPy model of the documented priority rules (module docstring of replay.prioritized)."""

    def __init__(self, replay):
        self.n, self.c = replay.num_envs, replay.traces_per_env
        self.t, self.context = replay.base.trace_len, replay.base.frame_stack - 1
        self.adds = 0
        self.k = replay.neighbours
        self.decay = replay.decay
        self.at_max = replay.new_at_max
        self.lo, self.hi = replay.min_priority, replay.max_priority
        self.priorities = np.zeros((self.n, self.c), np.float64)
        self.assigned = np.zeros((self.n, self.c), bool)
        self.count = 0
        self.write_slot = 0

    def valid(self):
        """Trace j (the j-th add, in slot j mod c) is valid once the next one is written and
        while the ring, which holds the last c·T steps written, still holds its first context
        frame, global step j·T − (F − 1) (slot 0's sit at the ring's tail until overwritten)."""
        c, n = self.c, self.adds
        mask = np.zeros(c, bool)
        for j in range(max(n - c, 0), n - 1):
            mask[j % c] = j * self.t - self.context >= (n - c) * self.t
        return mask

    def lazy(self, env, s, valid):
        usable = valid[None, :] & self.assigned
        if self.at_max:  # the largest priority of any valid assigned slot, in any env
            value = self.priorities[usable].max() if usable.any() else 1.0
            return min(max(value, self.lo), self.hi)
        num = den = 0.0
        for d in range(1, min(self.k, self.c - 1) + 1):
            j = (s - d) % self.c
            if valid[j] and self.assigned[env, j]:
                num += self.decay ** (d - 1) * self.priorities[env, j]
                den += self.decay ** (d - 1)
        if den > 0:
            value = num / den
        else:
            usable = valid[None, :] & self.assigned
            value = self.priorities[usable].mean() if usable.any() else 1.0
        return min(max(value, self.lo), self.hi)

    def add(self):
        w = self.write_slot
        self.priorities[:, w] = 0.0
        self.assigned[:, w] = False
        wrote_before = self.count >= 1
        self.count = min(self.count + 1, self.c)
        self.adds += 1
        self.write_slot = (w + 1) % self.c
        if wrote_before:
            s = (w - 1) % self.c
            valid = self.valid()
            for env in range(self.n):
                self.priorities[env, s] = self.lazy(env, s, valid)

    def update(self, env_index, slot, values):
        valid = self.valid()
        for e, s, v in zip(env_index, slot, values, strict=True):  # in order: last wins
            if 0 <= e < self.n and 0 <= s < self.c and valid[s]:
                v = self.lo if math.isnan(v) else min(max(float(v), self.lo), self.hi)
                self.priorities[e, s] = np.float32(v)
                self.assigned[e, s] = True

    def leaves(self):
        return np.where(self.valid()[None, :], self.priorities, 0.0).reshape(-1)


def check_against_reference(replay, state, ref):
    np.testing.assert_array_equal(replay.valid_mask(state), ref.valid())
    np.testing.assert_array_equal(state.assigned, ref.assigned)
    np.testing.assert_allclose(state.priorities, ref.priorities, rtol=1e-5)
    tree = np.asarray(state.tree)
    capacity = tree.shape[0] // 2
    leaves = tree[capacity : capacity + replay.num_leaves]
    np.testing.assert_allclose(leaves, ref.leaves(), rtol=1e-5)
    assert not tree[capacity + replay.num_leaves :].any()
    # The tree holds exactly the stored priorities of valid slots, and is internally exact.
    stored = np.asarray(state.priorities).reshape(-1)
    valid = np.tile(ref.valid(), replay.num_envs)
    np.testing.assert_array_equal(leaves, np.where(valid, stored, 0.0))
    for j in range(1, capacity):
        assert tree[j] == np.float32(tree[2 * j] + tree[2 * j + 1])


def jitted(replay):
    return (
        jax.jit(replay.add, donate_argnums=0),
        jax.jit(replay.set_priorities, donate_argnums=0),
        jax.jit(replay.sample, static_argnames="batch_size"),
    )


# Compiling is the slow part of these tests, so they share a few configurations, each jitted
# once. ``epsilon`` is a traced argument of the jitted sample, so one compile serves all values.
CONFIGS = {
    "A": {"num_envs": 3, "traces_per_env": 6, "frame_stack": 2},  # neighbours 8, decay 0.9
    "B": {"num_envs": 1, "traces_per_env": 3, "frame_stack": 1, "neighbours": 0},
    "C": {"num_envs": 2, "traces_per_env": 7, "frame_stack": 1, "neighbours": 3, "decay": 0.5},
    "D": {"num_envs": 2, "traces_per_env": 5, "frame_stack": 2, "new_at_max": True},
    # DER's replay: 1-step traces, 4 stacked frames (3 context frames in the 3 slots before)
    "E": {"num_envs": 2, "traces_per_env": 6, "frame_stack": 4, "trace_len": 1, "new_at_max": True},
}


@functools.cache
def setup(name):
    """(replay, add, set_priorities, sample) of a configuration, the last three jitted."""
    replay = make_replay(**CONFIGS[name])
    return (replay, *jitted(replay))


@functools.cache
def gather_jit(name):
    return jax.jit(setup(name)[0].base.gather)


def fresh(name, num_adds):
    replay, add, _, _ = setup(name)
    writer = Writer(replay)
    state = replay.init()
    for _ in range(num_adds):
        state = add(state, *writer.next())
    return state, writer


# --------------------------------------------------------------------- reference model


PRIORITY_VALUES = st.one_of(
    st.floats(0.0, 50.0, width=32),
    st.sampled_from([0.0, -3.0, 1e-9, 1e7, math.inf, -math.inf, math.nan]),
)


@st.composite
def scenarios(draw):
    name = draw(st.sampled_from(sorted(CONFIGS)))
    n, c = CONFIGS[name]["num_envs"], CONFIGS[name]["traces_per_env"]
    batch = st.lists(st.integers(-1, n), min_size=UPDATE_BATCH, max_size=UPDATE_BATCH)
    slots = st.lists(st.integers(-1, c), min_size=UPDATE_BATCH, max_size=UPDATE_BATCH)
    values = st.lists(PRIORITY_VALUES, min_size=UPDATE_BATCH, max_size=UPDATE_BATCH)
    ops = []
    for _ in range(draw(st.integers(2, 3 * c))):
        if draw(st.booleans()):
            ops.append(None)  # an add
        else:  # random pairs: duplicates, invalid and out-of-range ones included
            ops.append((draw(batch), draw(slots), draw(values)))
    return name, ops


@settings(max_examples=15, deadline=None)
@given(scenarios())
def test_lazy_init_and_updates_follow_the_reference(scenario):
    name, ops = scenario
    replay, add, update, _ = setup(name)
    writer, ref = Writer(replay), Reference(replay)
    state = replay.init()
    check_against_reference(replay, state, ref)
    for op in ops:
        if op is None:
            state = add(state, *writer.next())
            ref.add()
        else:
            env, slot, values = np.array(op[0]), np.array(op[1]), np.array(op[2], np.float32)
            state = update(state, env.astype(np.int32), slot.astype(np.int32), values)
            ref.update(env, slot, values)
        check_against_reference(replay, state, ref)


def test_new_at_max_gives_a_new_slot_the_largest_assigned_priority():
    # Config D: C = 5, frame stack 2; after 4 adds slots 0..2 are valid (3 is the newest).
    _, add, update, _ = setup("D")
    state, writer = fresh("D", 4)
    np.testing.assert_array_equal(state.priorities[:, :3], 1.0)  # nothing assigned yet: 1
    env = jnp.array([0, 1, 1, 0, 0, 0], jnp.int32)
    slot = jnp.array([0, 1, 2, 2, 2, 2], jnp.int32)
    state = update(state, env, slot, jnp.array([3.0, 7.5, 0.5, 2.0, 2.0, 2.0]))
    state = add(state, *writer.next())  # slot 3 becomes valid: max over both envs, 7.5
    np.testing.assert_allclose(state.priorities[:, 3], [7.5, 7.5], rtol=1e-6)
    np.testing.assert_allclose(state.priorities[:, :3], [[3.0, 1.0, 2.0], [1.0, 7.5, 0.5]])


def test_lazy_priority_weights_by_temporal_distance_then_falls_back_to_the_mean():
    # Config C: C = 7, neighbours K = 3, decay 0.5, so weights 1, 0.5, 0.25 for d = 1, 2, 3.
    _, add, update, _ = setup("C")
    state, writer = fresh("C", 6)  # slots 0..5 written, 0..4 valid
    # Env 0 assigns slots 1 (d = 4 from slot 5: outside K), 2 (d = 3) and 3 (d = 2); slot 4
    # (d = 1) keeps its lazy priority. Env 1 assigns nothing.
    env = jnp.zeros(UPDATE_BATCH, jnp.int32)
    slot = jnp.array([1, 2, 3, 3, 3, 3], jnp.int32)
    state = update(state, env, slot, jnp.array([100.0, 2.0, 5.0, 5.0, 5.0, 8.0]))  # 3: last wins
    state = add(state, *writer.next())  # slot 5 becomes valid
    expected = [(0.5 * 8.0 + 0.25 * 2.0) / (0.5 + 0.25), (100.0 + 2.0 + 8.0) / 3.0]
    np.testing.assert_allclose(state.priorities[:, 5], expected, rtol=1e-6)
    assert not np.asarray(state.assigned[:, 5]).any()
    leaves = np.asarray(state.tree[state.tree.shape[0] // 2 :])
    np.testing.assert_allclose(leaves[[5, 7 + 5]], expected, rtol=1e-6)


def test_lazy_priority_is_one_until_something_is_assigned_then_the_mean():
    _, add, update, _ = setup("A")  # neighbours 8, decay 0.9
    state, writer = fresh("A", 3)  # slots 0, 1 valid, 2 newest
    np.testing.assert_array_equal(state.priorities[:, :3], [[1, 1, 0]] * 3)
    pad = (UPDATE_BATCH - 1) * [-1]  # ignored entries
    state = update(state, jnp.array([2, *pad]), jnp.array([0, *pad]), jnp.full(UPDATE_BATCH, 6.0))
    state = add(state, *writer.next())  # slot 2 becomes valid
    # Envs 0, 1: no assigned neighbour -> the mean of all assigned, 6. Env 2: slot 0 at d = 2.
    np.testing.assert_allclose(state.priorities[:, 2], [6.0, 6.0, 6.0])
    state = update(
        state,
        jnp.array([2, 2, 2, -1, -1, -1]),
        jnp.array([1, 2, 1, -1, -1, -1]),
        jnp.array([2.0, 4.0, 3.0, 0.0, 0.0, 0.0]),
    )
    state = add(state, *writer.next())  # slot 3 becomes valid
    weighted = (4.0 + 0.9 * 3.0 + 0.81 * 6.0) / (1.0 + 0.9 + 0.81)
    np.testing.assert_allclose(
        state.priorities[:, 3], [13.0 / 3.0, 13.0 / 3.0, weighted], rtol=1e-6
    )


# --------------------------------------------------------------------- sampling


def filled(name, num_adds, seed):
    """A wrapped ring with random learner priorities on most valid slots."""
    replay, _, update, _ = setup(name)
    state, _ = fresh(name, num_adds)
    rng = np.random.default_rng(seed)
    valid = np.flatnonzero(np.asarray(replay.valid_mask(state)))
    env, slot = np.meshgrid(np.arange(replay.num_envs), valid, indexing="ij")
    env, slot = env.reshape(-1), slot.reshape(-1)
    assigned = rng.random(env.size) < 0.8  # the rest keep their lazy priority
    values = (rng.random(env.size) * 10.0 ** rng.integers(-1, 2, env.size)).astype(np.float32)
    env = np.where(assigned, env, -1).astype(np.int32)  # -1: ignored
    return update(state, env, slot.astype(np.int32), values)


def draw_many(name, state, epsilon, rounds=5, batch=4096):
    sample = setup(name)[3]
    batches, infos = [], []
    for i in range(rounds):
        drawn = sample(state, jax.random.key(i), batch_size=batch, epsilon=epsilon)
        assert isinstance(drawn, ReplaySample)
        traces, info = drawn
        batches.append(traces)
        infos.append(jax.device_get(info))
    return batches, infos


def expected_probability(replay, state, epsilon):
    valid = np.asarray(replay.valid_mask(state))[None, :]
    p = np.where(valid, np.asarray(state.priorities, np.float64), 0.0)
    num_valid = valid.sum() * replay.num_envs
    return epsilon * valid / num_valid + (1 - epsilon) * p / p.sum(), num_valid


@pytest.mark.parametrize("epsilon", [0.0, 1.0, 0.3])
def test_sampling_frequencies_and_reported_probabilities(epsilon):
    replay = setup("A")[0]
    state = filled("A", 9, seed=int(10 * epsilon))
    batches, infos = draw_many("A", state, epsilon)
    expected, num_valid = expected_probability(replay, state, epsilon)
    valid = np.asarray(replay.valid_mask(state))
    assert valid.sum() == replay.traces_per_env - 2  # wrapped, with frame stacking

    env = np.concatenate([info.env_index for info in infos])
    slot = np.concatenate([info.slot for info in infos])
    assert valid[slot].all()  # invalid slots are never returned
    counts = np.zeros(expected.shape)
    np.add.at(counts, (env, slot), 1)
    draws = slot.size
    sigma = np.sqrt(draws * expected * (1 - expected))
    assert np.all(np.abs(counts - draws * expected) <= SIGMAS * sigma + 1e-9)
    assert counts[:, ~valid].sum() == 0

    for info in infos:
        p = expected[info.env_index, info.slot]
        np.testing.assert_allclose(info.probability, p, rtol=1e-5)
        weight = 1.0 / (num_valid * p)
        np.testing.assert_allclose(info.is_weight, weight / weight.max(), rtol=1e-5)
    if epsilon == 1.0:
        np.testing.assert_allclose(infos[0].probability, 1.0 / num_valid, rtol=1e-6)
        np.testing.assert_allclose(infos[0].is_weight, 1.0, rtol=1e-6)

    # The traces are the base replay's gather at the drawn pairs...
    traces = batches[0]
    assert isinstance(traces, StoredTraces)
    gathered = gather_jit("A")(state.base, infos[0].env_index, infos[0].slot)
    jax.tree.map(np.testing.assert_array_equal, traces, gathered)
    # ...and the step ids tell that they come from the right env and slot.
    ids = np.asarray(traces.steps["id"]) - 1  # [T+1, B]
    n, t, c = replay.num_envs, replay.base.trace_len, replay.traces_per_env
    np.testing.assert_array_equal(ids % n, np.broadcast_to(infos[0].env_index, ids.shape))
    np.testing.assert_array_equal((ids[0] // n) % (c * t), infos[0].slot * t)


@pytest.mark.parametrize("name", ["A", "C"], ids=["frame_stack2", "frame_stack1"])
def test_priorities_follow_the_ring_as_it_wraps(name):
    replay, add, update, sample = setup(name)
    n, c = replay.num_envs, replay.traces_per_env
    stacked = replay.base.frame_stack > 1
    state, writer = fresh(name, c)  # full: write_slot back to 0
    capacity = state.tree.shape[0] // 2
    for step in range(c + 2):
        w = int(state.base.write_slot)
        valid = np.asarray(replay.valid_mask(state))
        oldest = (w + 1) % c if stacked else w  # the valid slot that goes next
        assert valid[oldest] and not valid[(oldest - 1) % c]
        # Give the oldest valid slot a huge priority: it dominates sampling...
        env = np.arange(UPDATE_BATCH, dtype=np.int32) % n
        update_slot = np.full(UPDATE_BATCH, oldest, np.int32)
        state = update(state, env, update_slot, np.full(UPDATE_BATCH, 1e5, np.float32))
        _, info = sample(state, jax.random.key(step), batch_size=256, epsilon=0.0)
        assert (np.asarray(info.slot) == oldest).mean() > 0.99
        state = add(state, *writer.next())
        # ...until the ring overwrites it (frame_stack 1) or it loses its context (stacked).
        leaves = np.asarray(state.tree[capacity : capacity + n * c]).reshape(n, c)
        np.testing.assert_array_equal(leaves[:, oldest], 0.0)
        np.testing.assert_array_equal(leaves[:, w], 0.0)  # the newest slot is not valid yet
        assert np.all(leaves[:, np.asarray(replay.valid_mask(state))] > 0)
        _, info = sample(state, jax.random.key(100 + step), batch_size=256, epsilon=0.0)
        assert not (np.asarray(info.slot) == oldest).any()
        assert np.asarray(replay.valid_mask(state))[np.asarray(info.slot)].all()
        stored = np.where(np.asarray(replay.valid_mask(state)), state.priorities, 0.0)
        np.testing.assert_allclose(sum_tree_total(state.tree), stored.sum(), rtol=1e-5)


# --------------------------------------------------------------------- jit, errors


def test_donated_jit_reuses_buffers_and_matches_the_reference():
    replay, add, update, sample = setup("A")
    writer, ref = Writer(replay), Reference(replay)
    state = replay.init()
    for i in range(8):
        old = state
        state = add(state, *writer.next())
        ref.add()
        assert old.tree.is_deleted() and old.base.frames.is_deleted()
        if bool(replay.can_sample(state)):
            _, info = sample(state, jax.random.key(i), batch_size=UPDATE_BATCH, epsilon=0.5)
            values = np.arange(UPDATE_BATCH, dtype=np.float32) + i
            old = state
            state = update(state, info.env_index, info.slot, values)
            ref.update(np.asarray(info.env_index), np.asarray(info.slot), values)
            assert old.tree.is_deleted() and old.assigned.is_deleted()
        check_against_reference(replay, state, ref)
    assert isinstance(state, PrioritizedReplayState)


def test_fused_sample_and_update_updates_the_tree_in_place():
    # A learner step that samples, uses the traces and weights, and updates the priorities in
    # one donated jit must not make XLA copy the tree (see sum_tree_descend).
    replay = setup("A")[0]
    state, _ = fresh("A", 4)

    def step(state, key):
        traces, info = replay.sample(state, key, 8)
        new = replay.set_priorities(state, info.env_index, info.slot, traces.obs[0, :, 0, 0])
        return new, traces.obs, info.is_weight, info.probability

    hlo = jax.jit(step, donate_argnums=0).lower(state, jax.random.key(0)).compile().as_text()
    assert not re.search(rf"f32\[{state.tree.shape[0]}\]\{{0\}} copy\(", hlo)


def test_init_layout():
    replay = make_replay(3, 5, 1)
    state = replay.init()
    assert replay.num_leaves == 15
    assert state.tree.shape == (32,) and state.tree.dtype == jnp.float32
    assert state.assigned.shape == (3, 5) and state.assigned.dtype == jnp.bool_
    assert state.priorities.shape == (3, 5) and state.priorities.dtype == jnp.float32
    assert not np.asarray(state.tree).any() and not np.asarray(state.assigned).any()
    assert not np.asarray(state.priorities).any()


def test_errors_name_the_argument():
    replay = setup("C")[0]
    state, writer = fresh("C", 3)
    ok = jnp.zeros(4, jnp.int32)
    with pytest.raises(ValueError, match="env_index"):
        replay.set_priorities(state, jnp.zeros((4, 1), jnp.int32), ok, jnp.ones(4))
    with pytest.raises(ValueError, match="env_index"):
        replay.set_priorities(state, jnp.zeros(4), ok, jnp.ones(4))
    with pytest.raises(ValueError, match="slot"):
        replay.set_priorities(state, ok, jnp.zeros(3, jnp.int32), jnp.ones(4))
    with pytest.raises(ValueError, match="priorities"):
        replay.set_priorities(state, ok, ok, jnp.ones(4, jnp.int32))
    with pytest.raises(ValueError, match="priorities"):
        replay.set_priorities(state, ok, ok, jnp.ones(5))
    with pytest.raises(ValueError, match="batch_size"):
        replay.sample(state, jax.random.key(0), 0)
    with pytest.raises(ValueError, match="epsilon"):
        replay.sample(state, jax.random.key(0), 4, epsilon=1.5)
    with pytest.raises(ValueError, match="epsilon"):
        replay.sample(state, jax.random.key(0), 4, epsilon=jnp.zeros(2))
    with pytest.raises(ValueError, match="state"):
        replay.sample(state.base, jax.random.key(0), 4)
    with pytest.raises(ValueError, match=r"state\.tree"):
        make_replay(3, 7, 1).add(state, *writer.next())
    obs, steps = writer.next()
    with pytest.raises(ValueError, match="obs"):
        replay.add(state, obs[:1], steps)
    base = replay.base
    for kwargs, name in [
        ({"epsilon": -0.1}, "epsilon"),
        ({"neighbours": -1}, "neighbours"),
        ({"neighbours": 2.5}, "neighbours"),
        ({"decay": 0.0}, "decay"),
        ({"min_priority": 0.0}, "min_priority"),
        ({"min_priority": 2.0, "max_priority": 1.0}, "max_priority"),
    ]:
        with pytest.raises(ValueError, match=name):
            PrioritizedTraceReplay(base, **kwargs)
    with pytest.raises(ValueError, match="base"):
        PrioritizedTraceReplay(object())
