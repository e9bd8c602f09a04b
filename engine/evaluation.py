"""Policy evaluation over full episodes (no life loss, no reward clipping)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

# The most episodes one evaluation plays (experiments.evaluate --episodes, train's
# --eval-episodes): more is never meant, and would run for days.
MAX_EPISODES = 1_000_000


class EvaluationError(RuntimeError):
    """An evaluation that cannot finish: an episode that never ends."""


def episode_quotas(num_episodes: int, num_envs: int) -> np.ndarray:
    """Episodes each env must finish. Fixed up front, so short episodes are not favoured."""
    base, extra = divmod(num_episodes, num_envs)
    return np.array([base + (i < extra) for i in range(num_envs)], np.int64)


def eval_feedback(feedback: Callable | None, reward_clip: bool) -> Callable | None:
    """An agent's `core_feedback` for evaluation envs (or None without one). Evaluation
    envs do not clip rewards (returns are game scores), but a core fed the previous reward
    (R2D1, PPO --prev-action-reward) was trained on the training env's rewards: where that
    env clipped them to [−1, 1] (`reward_clip`: Atari by default), the reward fed back is
    clipped the same way."""
    if feedback is None or not reward_clip:
        return feedback

    def clipped(core, action, reward):
        return feedback(core, action, jnp.clip(reward, -1.0, 1.0))

    return clipped


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
      env: a `VecEnv` built by `envs.make_eval_env` (raw rewards, training's life handling).
      max_steps: the most steps one episode may take: an episode still running after them
        (an env that never ends one) raises `EvaluationError`, one line.
      on_step: optional `on_step(ts)` callback (e.g. to record video frames).
      feedback: `eval_feedback(core_feedback, reward_clip)`: `(core, action, reward) ->
        core`, or None.
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
    while not np.all(done >= quota):
        if length.max() >= max_steps:
            raise EvaluationError(
                f"evaluation did not finish {num_episodes} episodes: an episode ran "
                f"{max_steps:,} steps without ending"
            )
        key, sub = jax.random.split(key)
        action, core = act(params, ts.obs, ts.first, core, sub)
        ts = env.step(np.asarray(action))
        if feedback is not None:
            core = feedback(core, action, jnp.asarray(ts.reward, jnp.float32))
        if on_step is not None:
            on_step(ts)
        ret += np.where(ts.first, 0.0, ts.raw_reward)  # a reset step is in no episode
        length += ~ts.first
        for i in np.flatnonzero(ts.game_over):
            if done[i] < quota[i]:
                returns.append(ret[i])
                lengths.append(length[i])
                done[i] += 1
            ret[i], length[i] = 0.0, 0
    return np.asarray(returns), np.asarray(lengths)
