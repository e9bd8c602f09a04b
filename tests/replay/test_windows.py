"""Look-back and look-ahead windows of the trace replays (replay/trace_replay.py, "Windows").

Reference: the stream of steps each env wrote, kept in NumPy. A sample of slot k must be the
steps [k*T - lookback, k*T + T + lookahead] of its env's stream, and a slot must be valid
exactly when that whole window (and, with frame stacking, the frames before it) is still
stored: written, and not yet overwritten.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from replay import PrioritizedTraceReplay, TraceReplay

SDS = jax.ShapeDtypeStruct


def make(trace_len, slots, lookback, lookahead, frame_stack=1, num_envs=2):
    spec = {"id": SDS((), jnp.int32), "frame_reset": SDS((), jnp.bool_)}
    return TraceReplay(
        num_envs=num_envs,
        trace_len=trace_len,
        capacity=slots * num_envs * trace_len,
        obs_shape=(frame_stack, 1) if frame_stack > 1 else (1,),
        obs_dtype=np.float32,
        frame_stack=frame_stack,
        step_spec=spec,
        extras_spec=SDS((), jnp.int32),
        lookback=lookback,
        lookahead=lookahead,
    )


def rollout(replay, start):
    """Steps start..start+T-1 of every env: id = 1000 * env + step, obs the same number."""
    n, t, f = replay.num_envs, replay.trace_len, replay.frame_stack
    steps = np.arange(start, start + t)[:, None] + 1000 * np.arange(n)[None, :]
    ids = steps.astype(np.int32)
    if f > 1:  # no resets: the stack at step s holds s-f+1 .. s (clipped at the stream start)
        lag = np.arange(-f + 1, 1)
        obs = np.maximum(ids[..., None] + lag, 1000 * np.arange(n)[None, :, None])
        obs = obs[..., None].astype(np.float32)
    else:
        obs = ids[..., None].astype(np.float32)
    resets = np.zeros((t, n), bool)
    resets[0] = start == 0
    return obs, {"id": ids, "frame_reset": resets}, ids[0]  # extras: the slot's first id


@pytest.mark.parametrize(
    "trace_len,slots,lookback,lookahead,frame_stack",
    [(3, 6, 0, 2, 1), (2, 7, 0, 3, 1), (3, 8, 0, 4, 4), (2, 8, 2, 3, 1), (3, 9, 3, 5, 4)],
)
def test_windows_are_the_stream_and_validity_is_exact(
    trace_len, slots, lookback, lookahead, frame_stack
):
    replay = make(trace_len, slots, lookback, lookahead, frame_stack)
    prio = PrioritizedTraceReplay(replay, epsilon=0.0)
    state, pstate = replay.init(), prio.init()
    add, padd = jax.jit(replay.add), jax.jit(prio.add)
    gather, valid_mask = jax.jit(replay.gather), jax.jit(replay.valid_mask)
    sample = jax.jit(prio.sample, static_argnames="batch_size")
    t, w = trace_len, replay.window_len
    for k in range(2 * slots + 1):
        obs, steps, extras = rollout(replay, k * t)
        state = add(state, obs, steps, extras)
        pstate = padd(pstate, obs, steps, extras)
        written = (k + 1) * t  # steps 0 .. written-1 exist; the ring keeps the last C*T
        oldest = max(written - slots * t, 0)
        valid = np.asarray(valid_mask(state))
        for slot in range(slots):
            # The stream step stored in this slot now (the newest write wins).
            newest_k = max(j for j in range(k + 1) if j % slots == slot) if slot <= k else None
            if newest_k is None:
                assert not valid[slot]
                continue
            begin, end = newest_k * t - lookback, newest_k * t + t + lookahead  # inclusive
            # The frames before the window: stored, or (before the ring's tail was ever
            # overwritten) the context the first add keeps there.
            need_from = begin - (frame_stack - 1)
            context_ok = need_from >= oldest or (oldest == 0 and written < slots * t)
            ok = begin >= 0 and end < written and context_ok
            assert valid[slot] == ok, (k, slot)
            if not ok:
                continue
            batch = gather(state, jnp.array([0, 1]), jnp.array([slot, slot]))
            want = np.arange(begin, end + 1)[:, None] + 1000 * np.arange(2)[None, :]
            np.testing.assert_array_equal(batch.steps["id"], want)
            np.testing.assert_array_equal(batch.extras, want[0])
            last_frame = batch.obs[..., -1, 0] if frame_stack > 1 else batch.obs[..., 0]
            np.testing.assert_array_equal(last_frame, want)
            if frame_stack > 1:  # the whole stack, older frames included
                lag = np.arange(-frame_stack + 1, 1)
                stack = np.maximum(want[..., None] + lag, 1000 * np.arange(2)[None, :, None])
                np.testing.assert_array_equal(batch.obs[..., 0], stack)
        assert int(replay.num_valid_slots(state)) == valid.sum()
        # The prioritized tree holds mass exactly on the valid slots of every env.
        leaves = np.asarray(pstate.tree[pstate.tree.shape[0] // 2 :][: 2 * slots]).reshape(2, -1)
        np.testing.assert_array_equal(leaves > 0, np.broadcast_to(valid, leaves.shape))
        if valid.any():
            drawn = sample(pstate, jax.random.PRNGKey(k), batch_size=16)
            assert valid[np.asarray(drawn.info.slot)].all()
            assert drawn.traces.obs.shape[0] == w + 1


def test_window_options_are_checked():
    with pytest.raises(ValueError, match="lookback=3 must be a multiple of trace_len=2"):
        make(2, 8, 3, 0)
    with pytest.raises(ValueError, match="lookahead must be a non-negative integer"):
        make(2, 8, 0, -1)
    with pytest.raises(ValueError, match="need at least 5"):
        make(2, 4, 2, 2)
