"""What an agent's acting and learning exchange with the engine's rollouts
(engine/rollout.py, which records them): `ActorOutput`, one policy step's result; `ActorState`,
what the actor carries between rollouts; `Rollout`, a time-major `[T, B, ...]` record.

`select_action(params, obs, first, core_state, key) -> ActorOutput` is the agent's policy
step (agents/core/actors.py builds it for categorical and Gaussian policies). Its output
decides what a trace stores: the action (int32 index or float vector) and the behaviour
statistics `mu` the learner needs for off-policy corrections (a probability vector, or any
pytree: Gaussian mean and log-std, a log-prob).

Observations may be arrays or pytrees (a dict for MiniGrid, `EnvSpec.obs_spec`): every
observation field below is then a pytree of that structure whose leaves carry the axes shown.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

Array = jax.Array


class ActorOutput(NamedTuple):
    action: Array  # [B] int32 index, or [B, *action_shape] float for continuous actions
    mu: Any  # behaviour statistics, leaves [B, ...]: μ(·|x) [B, A] for a categorical policy
    core_state: Any  # recurrent state after this step (() for feed-forward networks)
    env_action: Any = None  # what the env receives, if not `action` (e.g. clipped to bounds)


class ActorState(NamedTuple):
    env_state: Any  # envs.XlaEnvState in XLA mode, None in host mode
    obs: Any  # [B, *obs_shape] current observation x_t (pytree obs: leaves [B, ...])
    first: Array  # [B] bool
    frame_reset: Array  # [B] bool
    core_state: Any  # recurrent state before x_t
    episode_return: Array  # [B] running unclipped return of the current game
    episode_length: Array  # [B] int32
    key: Array


class Rollout(NamedTuple):
    """Time-major `[T, B, ...]` record of one rollout, plus what the learner needs at x_T."""

    obs: Any  # x_0..x_{T-1}, leaves [T, B, ...]
    steps: dict  # first, frame_reset (of x_t); action, mu, reward, discount, mask (of step t)
    core_state: Any  # recurrent state before x_0 (stored with the trace)
    last_obs: Any  # x_T, leaves [B, ...]
    last_first: Array  # [B]
    finished_return: Array  # [T, B] return of a game that ended at this step, else 0
    finished_length: Array  # [T, B]
    game_over: Array  # [T, B] bool


def time_major(obs):
    """One batched step `[B, ...]` as a time-major sequence of one step `[1, B, ...]`: for an
    observation array or pytree (every leaf gets the time axis)."""
    return jax.tree.map(lambda x: x[None], obs)
