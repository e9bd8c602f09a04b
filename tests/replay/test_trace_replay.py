"""Tests for replay.TraceReplay against numpy references.

Every step carries a unique id (``global_step * num_envs + env + 1``), so a zero id means an
unwritten position and ids tell exactly which env and step a sampled value came from.
"""

import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay import (
    ReplayCapacityError,
    ReplaySample,
    SampleInfo,
    StoredTraces,
    TraceReplay,
    TraceReplayState,
)

SDS = jax.ShapeDtypeStruct
FRAME = (3, 5)
NUM_ACTIONS = 3


def make_replay(num_envs, trace_len, traces_per_env, frame_stack, extras=True, **kwargs):
    step_spec = {
        "id": SDS((), jnp.int32),
        "mu": SDS((NUM_ACTIONS,), jnp.float32),
        "first": SDS((), jnp.bool_),
    }
    if frame_stack > 1:
        step_spec["frame_reset"] = SDS((), jnp.bool_)
        obs_shape = (frame_stack, *FRAME)
    else:
        obs_shape = (4,)
    return TraceReplay(
        num_envs=num_envs,
        trace_len=trace_len,
        capacity=traces_per_env * num_envs * trace_len + trace_len - 1,  # rounds down
        obs_shape=obs_shape,
        obs_dtype=np.uint8 if frame_stack > 1 else np.float32,
        frame_stack=frame_stack,
        step_spec=step_spec,
        extras_spec={"h": SDS((2,), jnp.float32)} if extras else None,
        **kwargs,
    )


def envpool_like_stacks(frames, resets, initial_stack):
    """What envpool returns: a reset refills the stack with its frame, else shift and append.

    frames [S, N, *frame], resets [S, N] bool, initial_stack [N, F, *frame] (the stack before
    step 0, used only when step 0 is not a reset). Returns [S, N, F, *frame].
    """
    stack = initial_stack.copy()
    out = np.empty((frames.shape[0], *initial_stack.shape), frames.dtype)
    for s in range(frames.shape[0]):
        for e in range(frames.shape[1]):
            if resets[s, e]:
                stack[e] = frames[s, e][None]
            else:
                stack[e] = np.concatenate([stack[e, 1:], frames[s, e][None]], axis=0)
        out[s] = stack
    return out


class Rollouts:
    """Synthetic actor output plus the numpy record needed to check samples."""

    def __init__(self, replay, rng, reset_prob=0.2, first_is_reset=True, forced_resets=()):
        self.replay = replay
        self.rng = rng
        self.reset_prob = reset_prob
        self.first_is_reset = first_is_reset
        self.forced_resets = set(forced_resets)  # global step numbers with a reset
        n, f = replay.num_envs, replay.frame_stack
        if f > 1:
            self.stack = rng.integers(0, 256, (n, f, *FRAME), dtype=np.uint8)
        self.obs_history = []  # per global step: [N, *obs_shape]
        self.num_adds = 0

    @property
    def obs_by_step(self):
        return np.stack(self.obs_history)

    def next_add(self):
        r, rng = self.replay, self.rng
        n, t, f = r.num_envs, r.trace_len, r.frame_stack
        step0 = self.num_adds * t
        steps_idx = step0 + np.arange(t)
        ids = (steps_idx[:, None] * n + np.arange(n)[None, :] + 1).astype(np.int32)
        if f > 1:
            frames = rng.integers(0, 256, (t, n, *FRAME), dtype=np.uint8)
            resets = rng.random((t, n)) < self.reset_prob
            for i, s in enumerate(steps_idx):
                if s in self.forced_resets:
                    resets[i] = True
            if step0 == 0:
                resets[0] = self.first_is_reset
            obs = envpool_like_stacks(frames, resets, self.stack)
            self.stack = obs[-1].copy()
        else:
            obs = rng.standard_normal((t, n, 4)).astype(np.float32)
            resets = rng.random((t, n)) < self.reset_prob
        self.obs_history.extend(obs)
        steps = {
            "id": ids,
            "mu": np.repeat(ids[..., None].astype(np.float32), NUM_ACTIONS, axis=-1),
            "first": resets,
        }
        if f > 1:
            steps["frame_reset"] = resets
        extras = None
        if r.extras_spec:
            trace_id = self.num_adds * n + np.arange(n) + 1
            extras = {"h": np.stack([trace_id, -trace_id], axis=-1).astype(np.float32)}
        self.num_adds += 1
        return obs, steps, extras

    def valid_traces(self):
        """Trace numbers (per env) the replay may return: a numpy reference of the rule."""
        # Trace j (global steps j*T .. j*T + T) is valid once the next one is written, and
        # while the ring, which holds the last c*T steps written (before it wraps, also the
        # F - 1 frames before step 0, at its tail), still holds its first context frame,
        # global step j*T - (F - 1).
        c, t, k = self.replay.traces_per_env, self.replay.trace_len, self.replay.frame_stack - 1
        n_written = self.num_adds
        alive_from = (n_written - c) * t  # the oldest global step still in the ring
        return [j for j in range(n_written - 1) if j * t - k >= alive_from]


@functools.cache
def jitted(replay):
    return (
        jax.jit(replay.add, donate_argnums=0),
        jax.jit(replay.sample, static_argnames="batch_size"),
        jax.jit(replay.gather),
    )


def fill(replay, rollouts, num_adds, state=None):
    add, _, _ = jitted(replay)
    state = replay.init() if state is None else state
    for _ in range(num_adds):
        obs, steps, extras = rollouts.next_add()
        state = add(state, obs, steps, extras)
    return state


def check_sample(replay, rollouts, sample):
    """A uniform sample: its traces pass `check_batch`, and its info reports the uniform
    probability ``1 / num_valid`` (from the numpy reference of the validity rule) and unit
    importance weights."""
    assert isinstance(sample, ReplaySample)
    assert isinstance(sample.traces, StoredTraces) and isinstance(sample.info, SampleInfo)
    info = sample.info
    batch_size = info.env_index.shape[0]
    for x, dtype in zip(info, (jnp.int32, jnp.int32, jnp.float32, jnp.float32), strict=True):
        assert x.shape == (batch_size,) and x.dtype == dtype
    num_valid = replay.num_envs * len(rollouts.valid_traces())
    np.testing.assert_allclose(np.asarray(info.probability), 1.0 / num_valid, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(info.is_weight), 1.0)
    return check_batch(replay, rollouts, sample.traces, info.env_index, info.slot)


def check_batch(replay, rollouts, batch, env_index, slot):
    """Every trace ``(env_index[i], slot[i])`` is written, valid, consistent, and rebuilt
    bit-for-bit."""
    n, t, c = replay.num_envs, replay.trace_len, replay.traces_per_env
    assert isinstance(batch, StoredTraces)
    ids = np.asarray(batch.steps["id"])
    env = np.asarray(env_index)
    slot = np.asarray(slot)
    batch_size = env.shape[0]
    assert ids.shape == (t + 1, batch_size)
    assert batch.obs.shape == (t + 1, batch_size, *replay.obs_shape)
    assert batch.obs.dtype == replay.obs_dtype
    assert (ids > 0).all(), "sampled an unwritten position"
    assert ((ids - 1) % n == env[None]).all(), "ids from another env"
    step = (ids - 1) // n
    np.testing.assert_array_equal(step, step[:1] + np.arange(t + 1)[:, None])
    assert (step[0] % t == 0).all()
    trace = step[0] // t
    np.testing.assert_array_equal(trace % c, slot)
    valid = rollouts.valid_traces()
    assert np.isin(trace, valid).all(), (trace, valid)
    np.testing.assert_array_equal(np.asarray(batch.steps["mu"])[..., 0], ids.astype(np.float32))
    if replay.extras_spec:
        np.testing.assert_array_equal(np.asarray(batch.extras["h"])[:, 0], trace * n + env + 1)
    expected_obs = rollouts.obs_by_step[step, env[None]]
    np.testing.assert_array_equal(np.asarray(batch.obs), expected_obs)
    return set(zip(env.tolist(), trace.tolist(), strict=True))


def gather_all_valid(replay, state, rollouts):
    """Gathers every valid (env, slot) pair and checks it; returns the batch."""
    _, _, gather = jitted(replay)
    valid = rollouts.valid_traces()
    pairs = [(e, k % replay.traces_per_env) for e in range(replay.num_envs) for k in valid]
    env, slot = (np.array(x, np.int32) for x in zip(*pairs, strict=True))
    batch = gather(state, env, slot)
    check_batch(replay, rollouts, batch, env, slot)
    assert int(replay.num_valid(state)) == len(pairs)
    mask = np.asarray(replay.valid_mask(state))
    np.testing.assert_array_equal(np.flatnonzero(mask), np.sort(np.unique(slot)))
    return batch


# --------------------------------------------------------------------- property tests

configs = st.fixed_dictionaries(
    {
        "num_envs": st.integers(1, 3),
        "trace_len": st.integers(1, 5),  # shorter than 3 context frames too (DER's T = 1)
        "traces_per_env": st.integers(3, 5),
        "frame_stack": st.sampled_from([1, 2, 4]),
        "num_adds": st.integers(2, 13),
        "reset_prob": st.sampled_from([0.0, 0.15, 0.5]),
        "first_is_reset": st.booleans(),
        "seed": st.integers(0, 2**31 - 1),
    }
)


@settings(max_examples=15, deadline=None)
@given(cfg=configs)
def test_sample_returns_only_written_valid_traces_rebuilt_exactly(cfg):
    t, k = cfg["trace_len"], cfg["frame_stack"] - 1
    lost = -(-k // t)  # slots a full ring's context reaches into
    replay = make_replay(
        cfg["num_envs"], t, cfg["traces_per_env"] + max(lost - 1, 0), cfg["frame_stack"]
    )
    rng = np.random.default_rng(cfg["seed"])
    rollouts = Rollouts(replay, rng, cfg["reset_prob"], cfg["first_is_reset"])
    state = fill(replay, rollouts, cfg["num_adds"])
    assert int(state.count) == min(cfg["num_adds"], replay.traces_per_env)
    assert int(state.write_slot) == cfg["num_adds"] % replay.traces_per_env
    assert bool(replay.can_sample(state))
    _, sample, _ = jitted(replay)
    batch = sample(state, jax.random.key(cfg["seed"]), batch_size=512)
    seen = check_sample(replay, rollouts, batch)
    gather_all_valid(replay, state, rollouts)
    # 512 draws over at most 12 pairs: every valid pair shows up (miss prob < 1e-18)
    expected = {(e, k) for e in range(replay.num_envs) for k in rollouts.valid_traces()}
    assert seen == expected


@pytest.mark.parametrize("t, frame_stack", [(4, 1), (4, 4), (1, 4)])
def test_ring_wraps_and_every_valid_slot_is_sampled(t, frame_stack):
    """Through several wraps of the ring; with 1-step traces and 4 stacked frames (DER's
    replay) a trace's 3 context frames lie in the 3 slots before it."""
    n, c = 2, 5
    replay = make_replay(n, t, c, frame_stack)
    rollouts = Rollouts(replay, np.random.default_rng(0))
    _, sample, _ = jitted(replay)
    state = replay.init()
    assert not bool(replay.can_sample(state))
    state = fill(replay, rollouts, 1, state)
    assert not bool(replay.can_sample(state))
    seen = set()
    for i in range(1, 4 * c + 3):
        if i > 1:
            state = fill(replay, rollouts, 1, state)
        assert bool(replay.can_sample(state)) == (i >= 2)
        if i < 2:
            continue
        valid = rollouts.valid_traces()
        full_valid = c - 1 - -(-(frame_stack - 1) // t)  # the newest, and the context's
        assert len(valid) == min(i - 1, full_valid)
        assert valid[-1] == i - 2  # the newest complete trace
        batch = sample(state, jax.random.key(i), batch_size=256)
        got = check_sample(replay, rollouts, batch)
        assert got == {(e, k) for e in range(n) for k in valid}
        seen |= got
    # over the whole run, every trace except the last one written was valid at some point
    assert {k for _, k in seen} == set(range(4 * c + 1))


def test_frames_rebuild_across_slot_boundaries_and_resets():
    """Resets right before, at and after trace starts, so contexts span slots and resets."""
    n, t, c, f = 2, 5, 4, 4
    replay = make_replay(n, t, c, f)
    # trace k starts at global step 5k; place resets at 5k-3, 5k-1, 5k, 5k+1, 5k+2 for some k
    forced = {2, 4, 10, 11, 13, 14, 22, 25, 26, 31, 39, 40}
    rollouts = Rollouts(replay, np.random.default_rng(1), reset_prob=0.0, forced_resets=forced)
    state = replay.init()
    for _ in range(9):  # wraps the ring twice
        state = fill(replay, rollouts, 1, state)
        if bool(replay.can_sample(state)):
            gather_all_valid(replay, state, rollouts)
    # the reference must really contain the interesting stacks
    stacks = rollouts.obs_by_step
    assert (stacks[10] == stacks[10][:, -1:]).all()  # a reset at a trace's first step
    assert (stacks[15][:, 0] == stacks[14][:, -1]).all()  # stack at 15 is [r14, r14, r14, f15]


def test_first_observation_need_not_be_a_reset():
    replay = make_replay(1, 3, 3, 4)
    rollouts = Rollouts(replay, np.random.default_rng(2), reset_prob=0.0, first_is_reset=False)
    state = fill(replay, rollouts, 2)
    obs0 = rollouts.obs_by_step[0, 0]
    assert not (obs0 == obs0[-1:]).all()  # four different frames
    batch = gather_all_valid(replay, state, rollouts)
    np.testing.assert_array_equal(np.asarray(batch.obs[0, 0]), obs0)


# --------------------------------------------------------------------- jit, state, errors


def test_add_and_sample_under_jit_with_donation_match_eager():
    replay = make_replay(2, 3, 4, 4)
    add_jit, sample_jit, _ = jitted(replay)
    rollouts = Rollouts(replay, np.random.default_rng(3))
    eager = jitted_state = replay.init()
    for _ in range(6):
        obs, steps, extras = rollouts.next_add()
        eager = replay.add(eager, obs, steps, extras)
        old = jitted_state
        jitted_state = add_jit(jitted_state, jnp.asarray(obs), steps, extras)
        assert old.frames.is_deleted()  # donated: the buffer was reused in place
    jax.tree.map(np.testing.assert_array_equal, eager, jitted_state)
    assert isinstance(jitted_state, TraceReplayState)
    key = jax.random.key(7)
    a = replay.sample(eager, key, 16)
    b = sample_jit(jitted_state, key, batch_size=16)
    jax.tree.map(np.testing.assert_array_equal, a, b)
    check_sample(replay, rollouts, b)


def test_init_state_layout():
    n, t, c = 3, 4, 5
    replay = make_replay(n, t, c, 4)
    assert replay.traces_per_env == c
    state = replay.init()
    assert state.frames.shape == (n, c * t, *FRAME) and state.frames.dtype == jnp.uint8
    assert state.steps["mu"].shape == (n, c * t, NUM_ACTIONS)
    assert state.extras["h"].shape == (n, c, 2)
    assert state.write_slot.dtype == jnp.int32 and state.count.dtype == jnp.int32
    assert not np.asarray(state.frames).any()
    # the uniform buffer keeps no priorities
    assert [f.name for f in dataclasses.fields(state)] == [
        "frames",
        "steps",
        "extras",
        "write_slot",
        "count",
    ]
    state = fill(replay, Rollouts(replay, np.random.default_rng(4)), 2, state)
    assert int(replay.num_valid(state)) == n


def test_device_argument():
    device = jax.devices()[-1]
    replay = make_replay(1, 2, 3, 1, device=device)
    state = replay.init()
    assert state.frames.devices() == {device}
    assert state.count.devices() == {device}


def test_add_rejects_bad_shapes_and_dtypes():
    replay = make_replay(2, 3, 3, 4)
    state = replay.init()
    obs, steps, extras = Rollouts(replay, np.random.default_rng(5)).next_add()

    with pytest.raises(ValueError, match=r"obs has shape \(3, 2, 4, 5, 3\).*\(3, 2, 4, 3, 5\)"):
        replay.add(state, np.swapaxes(obs, -1, -2), steps, extras)
    with pytest.raises(ValueError, match=r"obs .*dtype float32.*dtype uint8"):
        replay.add(state, obs.astype(np.float32), steps, extras)
    bad = dict(steps, mu=steps["mu"][..., :2])
    with pytest.raises(ValueError, match=r"steps\['mu'\] has shape \(3, 2, 2\).*\(3, 2, 3\)"):
        replay.add(state, obs, bad, extras)
    bad = dict(steps, id=steps["id"].astype(np.float32))
    with pytest.raises(ValueError, match=r"steps\['id'\].*float32.*int32"):
        replay.add(state, obs, bad, extras)
    bad = {k: v for k, v in steps.items() if k != "first"}
    with pytest.raises(ValueError, match=r"missing steps\['first'\]; unexpected nothing"):
        replay.add(state, obs, bad, extras)
    with pytest.raises(ValueError, match=r"missing nothing; unexpected steps\['oops'\]"):
        replay.add(state, obs, dict(steps, oops=steps["id"]), extras)
    with pytest.raises(ValueError, match=r"extras\['h'\] has shape \(2, 3\).*\(2, 2\)"):
        replay.add(state, obs, steps, {"h": np.zeros((2, 3), np.float32)})
    with pytest.raises(ValueError, match=r"extras does not match its spec: missing extras\['h'\]"):
        replay.add(state, obs, steps)
    # also at trace time under jit
    with pytest.raises(ValueError, match=r"obs has shape"):
        jax.jit(replay.add)(state, obs[:2], steps, extras)


def test_constructor_validation():
    with pytest.raises(ValueError, match="needs a 'frame_reset' field"):
        TraceReplay(
            num_envs=2,
            trace_len=5,
            capacity=1000,
            obs_shape=(4, 8, 8),
            obs_dtype=np.uint8,
            frame_stack=4,
            step_spec={"action": SDS((), jnp.int32)},
        )
    with pytest.raises(ValueError, match="frame_stack=4 needs obs_shape"):
        TraceReplay(
            num_envs=2,
            trace_len=5,
            capacity=1000,
            obs_shape=(8, 8, 4),
            obs_dtype=np.uint8,
            frame_stack=4,
            step_spec={"frame_reset": SDS((), jnp.bool_)},
        )
    # 2 envs x 5 steps x 3 traces = 30 transitions is the minimum; 29 holds 2 per env
    msg = "capacity 29 holds only 2 traces per env; need at least 3"
    with pytest.raises(ValueError, match=re.escape(msg)):
        TraceReplay(
            num_envs=2,
            trace_len=5,
            capacity=29,
            obs_shape=(3,),
            obs_dtype=np.float32,
            frame_stack=1,
            step_spec={},
        )
    replay = TraceReplay(
        num_envs=2,
        trace_len=5,
        capacity=39,
        obs_shape=(3,),
        obs_dtype=np.float32,
        frame_stack=1,
        step_spec={},
    )
    assert replay.traces_per_env == 3 and replay.num_transitions == 30


def pong_replay(capacity, **kwargs):
    return TraceReplay(
        num_envs=16,
        trace_len=20,
        capacity=capacity,
        obs_shape=(4, 84, 84),
        obs_dtype=np.uint8,
        frame_stack=4,
        step_spec={
            "action": SDS((), jnp.int32),
            "reward": SDS((), jnp.float32),
            "discount": SDS((), jnp.float32),
            "mask": SDS((), jnp.float32),
            "first": SDS((), jnp.bool_),
            "frame_reset": SDS((), jnp.bool_),
            "mu": SDS((6,), jnp.float32),
        },
        **kwargs,
    )


def test_bytes_per_transition_pong():
    replay = pong_replay(100_000)
    stacked = 4 * 84 * 84 * 1 + 4 * 4 + 2 + 6 * 4
    assert 84 * 84 < replay.bytes_per_transition < 7_200
    assert replay.bytes_per_transition < stacked / 3.9
    assert replay.total_bytes == pytest.approx(replay.bytes_per_transition * replay.num_transitions)


def test_capacity_beyond_memory_raises_before_allocating(monkeypatch):
    def no_alloc(*args, **kwargs):
        raise AssertionError("allocated before the memory check")

    monkeypatch.setattr(jnp, "zeros", no_alloc)
    pattern = (
        r"^replay capacity 1,000,000 transitions needs 6\.6 GiB \(7,098 B/transition\) "
        r"but only 2\.0 GiB is available; lower --buffer-size$"
    )
    with pytest.raises(ReplayCapacityError, match=pattern) as info:
        pong_replay(1_000_000, memory_limit_bytes=2 * 1024**3)
    assert isinstance(info.value, ValueError)
    # default limit: 80% of what the host has left; a petabyte of replay never fits
    with pytest.raises(ReplayCapacityError, match="lower --buffer-size"):
        pong_replay(10**14)
    # fits: constructing is fine, nothing is allocated until init()
    pong_replay(1_000_000, memory_limit_bytes=8 * 1024**3)
