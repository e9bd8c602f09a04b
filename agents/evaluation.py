"""Policy evaluation over full episodes (no life loss, no reward clipping)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np


def episode_quotas(num_episodes: int, num_envs: int) -> np.ndarray:
    """Episodes each env must finish. Fixed up front, so short episodes are not favoured."""
    base, extra = divmod(num_episodes, num_envs)
    return np.array([base + (i < extra) for i in range(num_envs)], np.int64)


def evaluate(
    act: Callable,
    params,
    env,
    num_episodes: int,
    key,
    initial_core=(),
    max_steps: int = 1_000_000,
    on_step: Callable | None = None,
    feedback: Callable | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Play until every env has finished its quota of games; return (returns, lengths).

    Args:
      act: `act(params, obs, first, core, key) -> (action, core)`, jitted.
      env: a `VecEnv` built with `train=False`.
      on_step: optional `on_step(ts)` callback (e.g. to record video frames).
      feedback: the agent's `core_feedback(core, action, reward) -> core`, or None.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    n = env.spec.num_envs
    quota = episode_quotas(num_episodes, n)
    done = np.zeros(n, np.int64)
    ret = np.zeros(n, np.float64)
    length = np.zeros(n, np.int64)
    returns, lengths = [], []
    ts = env.reset()
    core = initial_core
    for _ in range(max_steps):
        if np.all(done >= quota):
            break
        key, sub = jax.random.split(key)
        action, core = act(params, ts.obs, ts.first, core, sub)
        ts = env.step(np.asarray(action))
        if feedback is not None:
            core = feedback(core, action, jnp.asarray(ts.reward, jnp.float32))
        if on_step is not None:
            on_step(ts)
        ret += ts.raw_reward
        length += ~ts.first
        for i in np.flatnonzero(ts.game_over):
            if done[i] < quota[i]:
                returns.append(ret[i])
                lengths.append(length[i])
                done[i] += 1
            ret[i], length[i] = 0.0, 0
    else:
        raise RuntimeError(
            f"evaluation did not finish {num_episodes} episodes in {max_steps} steps"
        )
    return np.asarray(returns), np.asarray(lengths)
