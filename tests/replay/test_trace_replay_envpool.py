"""Rebuilt frame stacks match what envpool's Pong-v5 actually returned."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from replay import TraceReplay

envpool = pytest.importorskip("envpool")

SDS = jax.ShapeDtypeStruct


def test_rebuilt_stacks_match_envpool_pong():
    num_envs, t, num_adds = 2, 5, 5
    # Short episodes so that auto-resets land inside traces and inside a trace's context:
    # with 7 steps per episode the reset observations are at global steps 0, 8, 16.
    env = envpool.make(
        "Pong-v5", env_type="gymnasium", num_envs=num_envs, seed=3, max_episode_steps=7
    )
    replay = TraceReplay(
        num_envs=num_envs,
        trace_len=t,
        capacity=6 * num_envs * t,
        obs_shape=(4, 84, 84),
        obs_dtype=np.uint8,
        frame_stack=4,
        step_spec={
            "id": SDS((), jnp.int32),
            "action": SDS((), jnp.int32),
            "frame_reset": SDS((), jnp.bool_),
        },
    )
    add = jax.jit(replay.add, donate_argnums=0)
    rng = np.random.default_rng(0)
    state = replay.init()
    history = []  # per global step: [num_envs, 4, 84, 84] as envpool returned it
    obs, info = env.reset()
    # envpool returns the episode's last obs with terminated|truncated set and the reset obs
    # from the following step() call, so frame_reset[t] is the done flag of obs t-1.
    previous_done = np.ones(num_envs, bool)  # the first obs is a reset
    done = np.zeros(num_envs, bool)
    for a in range(num_adds):
        rollout = {"obs": [], "id": [], "action": [], "frame_reset": []}
        for i in range(t):
            frame_reset = info["elapsed_step"] == 0
            np.testing.assert_array_equal(frame_reset, previous_done)
            action = rng.integers(0, 6, num_envs).astype(np.int32)
            step = a * t + i
            rollout["obs"].append(obs)
            rollout["id"].append(step * num_envs + np.arange(num_envs, dtype=np.int32) + 1)
            rollout["action"].append(action)
            rollout["frame_reset"].append(frame_reset)
            history.append(obs)
            previous_done = done
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated | truncated
        batch = {k: np.stack(v) for k, v in rollout.items()}
        obs_rollout = batch.pop("obs")
        state = add(state, obs_rollout, batch)
    env.close()
    history = np.stack(history)
    resets = np.flatnonzero(
        [(h == h[:, -1:]).all(axis=(1, 2, 3)).any() for h in history]
    )  # steps whose stack is 4 copies of one frame
    assert {0, 8, 16} <= set(resets.tolist())

    # every valid trace: traces 0..3 of both envs (trace 1 holds a reset, trace 2 has it in
    # its context, trace 3 has one at its second step)
    env_index = np.repeat(np.arange(num_envs, dtype=np.int32), 4)
    slot = np.tile(np.arange(4, dtype=np.int32), num_envs)
    out = jax.jit(replay.gather)(state, env_index, slot)
    ids = np.asarray(out.steps["id"])
    step = (ids - 1) // num_envs
    np.testing.assert_array_equal(step, slot[None] * t + np.arange(t + 1)[:, None])
    np.testing.assert_array_equal((ids - 1) % num_envs, np.broadcast_to(env_index, ids.shape))
    np.testing.assert_array_equal(np.asarray(out.obs), history[step, env_index[None]])

    sampled = replay.sample(state, jax.random.key(0), 32)
    assert int(replay.num_valid(state)) == 8
    np.testing.assert_allclose(np.asarray(sampled.info.probability), 1 / 8)
    ids = np.asarray(sampled.traces.steps["id"])
    step, env_of = (ids - 1) // num_envs, (ids - 1) % num_envs
    np.testing.assert_array_equal(np.asarray(sampled.traces.obs), history[step, env_of])
