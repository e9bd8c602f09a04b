"""TraceReplay with pytree (dict) observations: each leaf stored once per step and sampled
back exactly; sizes, partition specs and errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from envs import ArraySpec
from replay import PrioritizedTraceReplay, TraceReplay

N, T, C = 3, 4, 5
OBS_SPEC = {
    "image": ArraySpec((3, 3, 2), np.uint8),
    "direction": ArraySpec((), np.int32, num_values=4),
    "mission": ArraySpec((6,), np.int32, num_values=50, tokens=True),
}
STEP_SPEC = {"action": jax.ShapeDtypeStruct((), jnp.int32)}


def _replay(**kw) -> TraceReplay:
    return TraceReplay(
        num_envs=N, trace_len=T, capacity=N * T * C, obs_spec=OBS_SPEC, step_spec=STEP_SPEC, **kw
    )


REPLAY = _replay()
ADD = jax.jit(REPLAY.add)  # one compilation, shared by the tests


def _stream(seed: int, steps: int) -> dict:
    """Random observations of `steps` steps of every env, time-major `[steps, N, ...]`."""
    rng = np.random.default_rng(seed)
    return {
        "image": rng.integers(0, 256, (steps, N, 3, 3, 2)).astype(np.uint8),
        "direction": rng.integers(0, 4, (steps, N)).astype(np.int32),
        "mission": rng.integers(0, 50, (steps, N, 6)).astype(np.int32),
    }


def test_round_trip_every_trace():
    """Write 7 rollouts into a ring of 5 slots; every valid (env, slot) gives back the T+1
    observations of that stretch of the stream, leaf by leaf, with the spec's dtypes."""
    replay, add, gather = REPLAY, ADD, jax.jit(REPLAY.gather)
    stream = _stream(0, 7 * T)
    actions = np.arange(7 * T * N, dtype=np.int32).reshape(7 * T, N)
    state = replay.init()
    for k in range(7):
        chunk = jax.tree.map(lambda x, k=k: x[k * T : (k + 1) * T], stream)
        state = add(state, chunk, {"action": actions[k * T : (k + 1) * T]})
    valid = np.asarray(replay.valid_mask(state))
    assert valid.sum() == C - 1
    for slot in np.flatnonzero(valid):
        # Slot s was last written by rollout k = s + 5j, the largest such k < 7.
        k = max(k for k in range(7) if k % C == slot)
        env = np.arange(N, dtype=np.int32)
        batch = gather(state, env, np.full(N, slot, np.int32))
        for key, leaf in batch.obs.items():
            want = stream[key][k * T : k * T + T + 1]
            assert leaf.dtype == OBS_SPEC[key].dtype and leaf.shape == want.shape
            np.testing.assert_array_equal(leaf, want)
        np.testing.assert_array_equal(batch.steps["action"][:T], actions[k * T : (k + 1) * T])


def test_sample_is_consistent_with_its_info():
    replay = REPLAY
    state = replay.init()
    stream = _stream(1, 3 * T)
    for k in range(3):
        chunk = jax.tree.map(lambda x, k=k: x[k * T : (k + 1) * T], stream)
        state = ADD(state, chunk, {"action": np.zeros((T, N), np.int32)})
    sample = jax.jit(replay.sample, static_argnums=2)(state, jax.random.PRNGKey(0), 8)
    for b in range(8):
        e, s = int(sample.info.env_index[b]), int(sample.info.slot[b])
        assert s in (0, 1)
        for key in OBS_SPEC:
            np.testing.assert_array_equal(
                sample.traces.obs[key][:, b], stream[key][s * T : s * T + T + 1, e]
            )


def test_sizes_and_partition_specs():
    replay = REPLAY
    per_step = 3 * 3 * 2 + 4 + 6 * 4 + 4  # image, direction, mission, action
    assert replay.total_bytes == N * C * T * per_step + 8  # + write_slot and count
    specs = replay.partition_specs("data")
    assert specs.frames == {"image": P("data"), "direction": P("data"), "mission": P("data")}
    assert replay.pytree_obs and replay.obs_shape is None
    # The prioritized buffer wraps the same storage.
    prio = PrioritizedTraceReplay(REPLAY)
    abstract = jax.eval_shape(prio.init)
    state = jax.eval_shape(
        prio.add, abstract, _stream(2, T), {"action": np.zeros((T, N), np.int32)}
    )
    assert state.base.frames["mission"].shape == (N, C * T, 6)


def test_bad_observations_name_the_leaf():
    replay = REPLAY
    state = jax.eval_shape(replay.init)
    good = _stream(0, T)
    steps = {"action": np.zeros((T, N), np.int32)}
    bad = {**good, "colour": good["direction"]}
    del bad["direction"]
    with pytest.raises(ValueError, match=r"missing obs\['direction'\]; unexpected obs\['colour'\]"):
        replay.add(state, bad, steps)
    wrong = {**good, "image": good["image"][..., :1]}
    with pytest.raises(ValueError, match=r"obs\['image'\] has shape \(4, 3, 3, 3, 1\)"):
        replay.add(state, wrong, steps)
    with pytest.raises(ValueError, match="frame_stack=4 needs an array observation"):
        _replay(frame_stack=4)
    with pytest.raises(ValueError, match="either obs_spec or obs_shape"):
        _replay(obs_shape=(2,), obs_dtype=np.float32)
