"""Pure actors: `select_action(params, obs, first, core, key) -> ActorOutput` for rollouts and
`act(greedy) -> ActFn` for evaluation, built from an agent's network.

`ActorOutput.mu` decides what a trace stores for the learner (agents/rollout.py): the
categorical actor records the probability vector μ(·|x); the Gaussian actor records the
distribution's statistics `{"mean", "log_std"}`. An agent that needs more at acting time (a
value estimate, a log-probability) writes its own actor with the same two signatures.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from agents.rollout import ActorOutput


def categorical_actor(policy_logits):
    """The actor of a categorical policy.

    `policy_logits(params, obs, first, core) -> (logits [B, A], core)` is the network's
    policy. Returns `select_action` (samples a ~ π, records μ = π) and `act(greedy)`."""

    def select_action(params, obs, first, core, key) -> ActorOutput:
        logits, core = policy_logits(params, obs, first, core)
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        return ActorOutput(action, jax.nn.softmax(logits), core)

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            logits, core = policy_logits(params, obs, first, core)
            action = jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)
            return action.astype(jnp.int32), core

        return jax.jit(act_fn)

    return select_action, act


def clip_to_bounds(action, low, high):
    """Clip a continuous action to the env's bounds (None: unbounded, returned as is)."""
    if low is None or high is None:
        return action
    low, high = np.asarray(low, np.float32), np.asarray(high, np.float32)
    return jnp.clip(action, jnp.asarray(low), jnp.asarray(high))


def gaussian_actor(policy_gaussian, low=None, high=None):
    """The actor of a diagonal Gaussian policy (PPO, continuous ACER).

    `policy_gaussian(params, obs, first, core) -> ((mean, log_std) [B, D] each, core)`.
    `select_action` samples a ~ N(mean, exp(log_std)²) and stores the unclipped sample (the
    one whose log-probability the learner evaluates) with μ = {"mean", "log_std"}; the env
    receives it clipped to [low, high] (`ActorOutput.env_action`), as CleanRL's
    `ppo_continuous_action` clips in a wrapper. `act(greedy)` returns the clipped mean when
    greedy, else a clipped sample."""

    def select_action(params, obs, first, core, key) -> ActorOutput:
        (mean, log_std), core = policy_gaussian(params, obs, first, core)
        log_std = jnp.broadcast_to(log_std, mean.shape)
        action = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
        mu = {"mean": mean, "log_std": log_std}
        return ActorOutput(action, mu, core, clip_to_bounds(action, low, high))

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            (mean, log_std), core = policy_gaussian(params, obs, first, core)
            if greedy:
                return clip_to_bounds(mean, low, high), core
            noise = jax.random.normal(key, mean.shape, mean.dtype)
            return clip_to_bounds(mean + jnp.exp(log_std) * noise, low, high), core

        return jax.jit(act_fn)

    return select_action, act
