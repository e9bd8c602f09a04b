"""The interface both buffers share: pytree step fields and extras, one sample type, and
``set_priorities``.

Expected values come from a NumPy record of everything written, indexed by the trace that the
ring rule (written independently here) says a slot holds; never from the replay itself.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from replay import (
    PrioritizedTraceReplay,
    ReplaySample,
    SampleInfo,
    StoredTraces,
    TraceReplay,
)

SDS = jax.ShapeDtypeStruct
N, T, C = 2, 3, 4  # envs, trace length, traces per env
NUM_ADDS = 6  # wraps the ring of 4
OBS = (4,)


class Core(NamedTuple):
    c: jax.ShapeDtypeStruct
    h: jax.ShapeDtypeStruct


STEP_SPEC = {
    "id": SDS((), jnp.int32),
    "first": SDS((), jnp.bool_),
    "action": SDS((6,), jnp.float32),  # a continuous action vector
    "mu": {"mean": SDS((6,), jnp.float32), "log_std": SDS((6,), jnp.float32)},  # Gaussian μ
}
EXTRAS_SPECS = {
    "none": None,
    "lstm": ((SDS((5,), jnp.float32), SDS((5,), jnp.float32)),),  # ((c, h),)
    "namedtuple": Core(c=SDS((5,), jnp.float32), h=SDS((2, 3), jnp.float32)),
}


@functools.cache
def make(kind, extras):
    """(replay, jitted add, jitted sample) for a buffer kind and an EXTRAS_SPECS key."""
    replay = TraceReplay(
        num_envs=N,
        trace_len=T,
        capacity=N * T * C,
        obs_shape=OBS,
        obs_dtype=np.float32,
        frame_stack=1,
        step_spec=STEP_SPEC,
        extras_spec=EXTRAS_SPECS[extras],
    )
    if kind == "prioritized":
        replay = PrioritizedTraceReplay(replay, epsilon=0.5)
    add = jax.jit(replay.add, donate_argnums=0)
    sample = jax.jit(replay.sample, static_argnames="batch_size")
    return replay, add, sample


def random_leaf(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


class Record:
    """Random add() inputs shaped by the specs, and everything written, in NumPy."""

    def __init__(self, extras_spec, seed):
        self.rng = np.random.default_rng(seed)
        self.extras_spec = extras_spec
        self.obs, self.steps, self.extras = [], [], []

    def next(self):
        obs = self.rng.standard_normal((T, N, *OBS)).astype(np.float32)
        steps = jax.tree.map(lambda s: random_leaf(self.rng, (T, N, *s.shape), s.dtype), STEP_SPEC)
        extras = jax.tree.map(
            lambda s: random_leaf(self.rng, (N, *s.shape), s.dtype), self.extras_spec
        )
        self.obs.append(obs)
        self.steps.append(steps)
        self.extras.append(extras)
        return obs, steps, extras

    def expected(self, env, slot):
        """The traces at (env[i], slot[i]): obs, steps and extras from the record."""
        num_adds = len(self.obs)
        trace = slot + C * ((num_adds - 1 - slot) // C)  # the newest trace written to the slot
        assert (trace <= num_adds - 2).all()  # complete: its last step has been written
        time = trace[None, :] * T + np.arange(T + 1)[:, None]  # [T+1, B] global steps

        def steps_of(*leaves):  # leaves: one [T, N, ...] per add
            whole = np.concatenate(leaves, axis=0)  # [adds * T, N, ...]
            return whole[time, env[None, :]]

        obs = steps_of(*self.obs)
        steps = jax.tree.map(steps_of, *self.steps)
        extras = jax.tree.map(
            lambda *leaves: np.stack(leaves)[trace, env], *self.extras
        )  # [adds, N, ...] -> [B, ...]
        return StoredTraces(obs, steps, extras)


def valid_slots(num_adds):
    """Slots a frame_stack=1 ring may return after num_adds adds (the rule, from scratch)."""
    first = max(0, num_adds - C)
    return {k % C for k in range(first, num_adds - 1)}


def filled(kind, extras, seed=0):
    replay, add, _ = make(kind, extras)
    record = Record(EXTRAS_SPECS[extras], seed)
    state = replay.init()
    for _ in range(NUM_ADDS):
        state = add(state, *record.next())
    return replay, state, record


def assert_tree_equal(got, want):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    jax.tree.map(np.testing.assert_array_equal, got, want)


@pytest.mark.parametrize("extras", sorted(EXTRAS_SPECS))
@pytest.mark.parametrize("kind", ["uniform", "prioritized"])
def test_pytree_steps_and_extras_round_trip_exactly(kind, extras):
    _, state, record = filled(kind, extras)
    _, _, sample = make(kind, extras)
    drawn = sample(state, jax.random.key(1), batch_size=64)
    assert isinstance(drawn, ReplaySample)
    env, slot = np.asarray(drawn.info.env_index), np.asarray(drawn.info.slot)
    assert set(slot.tolist()) <= valid_slots(NUM_ADDS)
    assert set(slot.tolist()) == valid_slots(NUM_ADDS)  # 64 draws over 6 pairs: all show up
    assert set(env.tolist()) == set(range(N))
    expected = record.expected(env, slot)
    assert_tree_equal(drawn.traces, expected)
    # The nested leaves keep their shapes and dtypes: [T+1, B, 6] float32.
    assert drawn.traces.steps["mu"]["log_std"].shape == (T + 1, 64, 6)
    assert drawn.traces.steps["action"].dtype == jnp.float32
    if extras == "namedtuple":
        assert isinstance(drawn.traces.extras, Core)
        assert drawn.traces.extras.h.shape == (64, 2, 3)


def expected_sample_structure(extras):
    """The structure a sample must have, built by hand from the specs."""
    leaf = np.zeros(())
    steps = jax.tree.map(lambda _: leaf, STEP_SPEC)
    extras_tree = jax.tree.map(lambda _: leaf, EXTRAS_SPECS[extras])
    return jax.tree.structure(
        ReplaySample(StoredTraces(leaf, steps, extras_tree), SampleInfo(leaf, leaf, leaf, leaf))
    )


@pytest.mark.parametrize("extras", sorted(EXTRAS_SPECS))
def test_both_buffers_return_the_same_sample_type(extras):
    samples = {}
    for kind in ("uniform", "prioritized"):
        _, state, _ = filled(kind, extras)
        samples[kind] = make(kind, extras)[2](state, jax.random.key(0), batch_size=5)
    uniform, prioritized = samples["uniform"], samples["prioritized"]
    assert jax.tree.structure(uniform) == jax.tree.structure(prioritized)
    assert jax.tree.structure(uniform) == expected_sample_structure(extras)
    shapes = jax.tree.map(lambda x: (x.shape, x.dtype), uniform)
    assert shapes == jax.tree.map(lambda x: (x.shape, x.dtype), prioritized)
    assert shapes.info == SampleInfo(*[((5,), t) for t in ("int32", "int32", "float32", "float32")])


def test_uniform_sample_info():
    _, state, _ = filled("uniform", "none")
    info = make("uniform", "none")[2](state, jax.random.key(2), batch_size=16).info
    num_valid = N * len(valid_slots(NUM_ADDS))
    np.testing.assert_allclose(np.asarray(info.probability), np.full(16, 1 / num_valid))
    np.testing.assert_array_equal(np.asarray(info.is_weight), np.ones(16))


def test_uniform_set_priorities_returns_the_state_unchanged():
    replay, state, _ = filled("uniform", "lstm")
    env = np.array([0, 1, 1], np.int32)
    slot = np.array([0, 2, 3], np.int32)
    priorities = np.array([5.0, 0.1, 3.0], np.float32)
    assert replay.set_priorities(state, env, slot, priorities) is state
    before = jax.tree.map(np.array, state)
    after = jax.jit(replay.set_priorities)(state, env, slot, priorities)
    assert_tree_equal(after, before)
    # Sampling is still uniform afterwards: same draws as without the call.
    sample = make("uniform", "lstm")[2]
    assert_tree_equal(
        sample(after, jax.random.key(3), batch_size=8),
        sample(state, jax.random.key(3), batch_size=8),
    )


@pytest.mark.parametrize("kind", ["uniform", "prioritized"])
def test_set_priorities_rejects_bad_arguments_in_both_buffers(kind):
    replay, state, _ = filled(kind, "none")
    ok_index = np.zeros(4, np.int32)
    ok_values = np.ones(4, np.float32)
    cases = [
        ("env_index", (np.zeros((4, 1), np.int32), ok_index, ok_values)),
        ("env_index", (np.zeros(4, np.float32), ok_index, ok_values)),
        ("slot", (ok_index, np.zeros(3, np.int32), ok_values)),
        ("slot", (ok_index, np.zeros(4, np.float32), ok_values)),
        ("priorities", (ok_index, ok_index, np.ones(4, np.int32))),
        ("priorities", (ok_index, ok_index, np.ones(5, np.float32))),
        ("priorities", (ok_index, ok_index, np.ones((4, 1), np.float32))),
    ]
    for name, args in cases:
        with pytest.raises(ValueError, match=rf"^{name} must be a 1-D"):
            replay.set_priorities(state, *args)


def test_add_names_the_path_of_a_structure_mismatch():
    replay = make("uniform", "namedtuple")[0]
    lstm = make("uniform", "lstm")[0]
    state, lstm_state = replay.init(), lstm.init()
    record = Record(EXTRAS_SPECS["namedtuple"], 0)
    obs, steps, extras = record.next()
    mu = steps["mu"]

    bad = dict(steps, mu={"mean": mu["mean"]})
    with pytest.raises(ValueError, match=r"missing steps\['mu'\]\['log_std'\]; unexpected nothing"):
        replay.add(state, obs, bad, extras)
    bad = dict(steps, mu=dict(mu, scale=mu["mean"]))
    with pytest.raises(ValueError, match=r"missing nothing; unexpected steps\['mu'\]\['scale'\]"):
        replay.add(state, obs, bad, extras)
    bad = dict(steps, mu=(mu["mean"], mu["log_std"]))
    with pytest.raises(ValueError, match=r"missing steps\['mu'\]\['log_std'\], .*unexpected "):
        replay.add(state, obs, bad, extras)
    # A NamedTuple spec wants the NamedTuple: a plain tuple has other paths.
    with pytest.raises(ValueError, match=r"missing extras\.c, extras\.h; unexpected extras\[0\]"):
        replay.add(state, obs, steps, tuple(extras))
    with pytest.raises(ValueError, match=r"missing extras\.c, extras\.h; unexpected nothing"):
        replay.add(state, obs, steps)
    # ((c, h),) given as ((c,),)
    c, h = Record(EXTRAS_SPECS["lstm"], 0).next()[2][0]
    with pytest.raises(ValueError, match=r"missing extras\[0\]\[1\]"):
        lstm.add(lstm_state, obs, steps, ((c,),))
    # Shapes and dtypes of nested leaves are named by path too, also under jit.
    bad = dict(steps, mu=dict(mu, log_std=mu["log_std"][..., :5]))
    with pytest.raises(ValueError, match=r"steps\['mu'\]\['log_std'\] has shape \(3, 2, 5\)"):
        jax.jit(replay.add)(state, obs, bad, extras)
    with pytest.raises(ValueError, match=r"extras\.h has shape \(2, 2, 3\) and dtype int32"):
        replay.add(state, obs, steps, extras._replace(h=extras.h.astype(np.int32)))
    # Containers that flatten to the same paths are accepted: a list for the (c, h) tuple.
    as_list = lstm.add(lstm_state, obs, steps, ([c, h],))
    as_tuple = lstm.add(lstm.init(), obs, steps, ((c, h),))
    assert_tree_equal(as_list, as_tuple)


def test_spec_errors_name_the_field():
    kwargs = dict(num_envs=1, trace_len=2, capacity=6, obs_shape=(2,), obs_dtype=np.float32)
    with pytest.raises(TypeError, match=r"spec for step_spec\['mu'\]\['mean'\] must have"):
        TraceReplay(**kwargs, frame_stack=1, step_spec={"mu": {"mean": 6}})
    with pytest.raises(TypeError, match=r"spec for extras_spec\[0\]\[1\] must have"):
        TraceReplay(**kwargs, frame_stack=1, step_spec={}, extras_spec=((SDS((), "f4"), 3),))
    with pytest.raises(ValueError, match="step_spec must be a mapping"):
        TraceReplay(**kwargs, frame_stack=1, step_spec=(SDS((), "f4"),))


def test_the_old_name_of_stored_traces_still_works_with_a_warning():
    import replay

    with pytest.warns(DeprecationWarning, match="replay.StoredTraces"):
        assert replay.TraceBatch is StoredTraces
    with pytest.raises(AttributeError, match="no attribute 'TraceBtch'"):
        replay.TraceBtch  # noqa: B018
