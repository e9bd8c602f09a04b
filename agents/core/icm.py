"""The intrinsic curiosity module (ICM, Pathak et al. 2017, arXiv:1705.05363) as an intrinsic
reward, beside RND (agents/core/rnd.py): `--icm-coef`.

An encoder φ embeds (whitened) observations; an inverse model predicts the action a_t from
(φ(s_t), φ(s_{t+1})); a forward model predicts φ(s_{t+1}) from (φ(s_t), a_t)
(networks.curiosity.ICMNetworks). All three are trained together on

    (1 − β)·L_I + β·L_F                 (eq. 7; β = --icm-beta, the paper's 0.2)

with L_I the inverse model's loss (`losses.icm_inverse_loss`: cross-entropy for discrete
actions; `losses.icm_inverse_loss_continuous`: ½‖â − a‖² for continuous ones, which the paper
does not treat) and L_F the forward model's (`losses.icm_forward_loss`, ½‖f − φ(s_{t+1})‖²),
averaged over the valid transitions. The curiosity of a transition is its forward error
L_F,t (eq. 6 up to η/2). As RND's, it is divided by a running standard deviation of the
errors before it is added to the reward (`losses.rnd_intrinsic_reward`; the statistics take
in every rollout's valid transitions), so that `--icm-coef` is a weight on a unit-scale
bonus, as `--rnd-coef` is, rather than the paper's η on a raw error whose scale drifts with
the learned features. The encoder's inputs are whitened by running observation statistics
and clipped to [−5, 5], as RND's (§2.4 of arXiv:1810.12894): the paper's inputs are pixels
in a fixed range; vector observations are not.

Pure functions over `ICMState` (a field of the learner state, so checkpointed), with the
interface the off-policy agents call for either curiosity (agents/core/offpolicy.py):
`init`, `observe_rollout` (each iteration: the statistics), `bonus` (each update: the
intrinsic rewards of the sampled windows under the current networks, then one Adam step on
the windows' first transitions) and `metric_names`. The on-policy agents (PPO, A2C:
agents/ppo/learner.py) call `observe_rollout`, `rewards` and `train` on each whole rollout
before its advantages.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.core.config import ConfigError, check, check_positive_int
from agents.core.learning import apply, grads_and_aux
from agents.core.normalization import RunningStats, normalize
from networks.curiosity import ICMNetworks

OBS_CLIP = 5.0  # the encoder's whitened inputs clipped to [−5, 5], as RND's


class ICMState(NamedTuple):
    params: Any  # the encoder's, inverse and forward models' params
    opt_state: Any
    obs_stats: RunningStats  # of the raw observations: the encoder's input normalisation
    error_stats: RunningStats  # scalar: of the forward errors (the reward scale)


def masked_mean(x, mask, axis_name=None):
    """Masked mean of `[T, B]` values over the valid entries of every device."""
    sums = jnp.stack([jnp.sum(mask * x), jnp.sum(mask)])
    if axis_name is not None:
        sums = jax.lax.psum(sums, axis_name)
    return sums[0] / jnp.maximum(sums[1], 1.0)


class ICM:
    """ICM's networks and pure functions (module docstring). `action_size`: the number of
    discrete actions, or the continuous action's dimension."""

    metric_names = ("icm_forward_loss", "icm_inverse_loss", "intrinsic_reward")

    def __init__(self, hidden, features: int, lr: float, beta: float, *, discrete: bool,
                 action_size: int):  # fmt: skip
        self.net = ICMNetworks(action_size, discrete, tuple(hidden), features)
        self.discrete, self.beta = discrete, beta
        self.optimizer = optax.adam(lr)

    def init(self, key, sample_obs) -> ICMState:
        b = sample_obs.shape[0]
        action = jnp.zeros((b,), jnp.int32) if self.discrete else jnp.zeros(
            (b, self.net.action_size), jnp.float32
        )  # fmt: skip
        params = self.net.init(key, sample_obs.astype(jnp.float32), action)
        return ICMState(
            params=params,
            opt_state=self.optimizer.init(params),
            obs_stats=RunningStats.zeros(sample_obs.shape[1:]),
            error_stats=RunningStats.zeros(),
        )

    def transition_losses(self, state: ICMState, obs, action, next_obs, mask, params=None):
        """(L_F `[T, B]`, L_I `[T, B]`) of the transitions (obs, action, next_obs), time-major,
        with the current networks (or `params`)."""
        params = state.params if params is None else params
        x, x_next = (normalize(o, state.obs_stats, OBS_CLIP) for o in (obs, next_obs))
        phi = self.net.apply(params, x, method=ICMNetworks.encode)
        next_phi = self.net.apply(params, x_next, method=ICMNetworks.encode)
        predicted = self.net.apply(params, phi, action, method=ICMNetworks.forward)
        forward = losses.icm_forward_loss(predicted, next_phi, mask_t=mask)
        guess = self.net.apply(params, phi, next_phi, method=ICMNetworks.inverse)
        if self.discrete:
            inverse = losses.icm_inverse_loss(guess, action.astype(jnp.int32), mask_t=mask)
        else:
            inverse = losses.icm_inverse_loss_continuous(guess, action, mask_t=mask)
        return forward, inverse

    def observe_rollout(self, state: ICMState, rollout, axis_name=None) -> ICMState:
        """Take in a rollout's observations and its valid transitions' forward errors
        (statistics over all devices)."""
        mask = rollout.steps["mask"]
        state = state._replace(obs_stats=state.obs_stats.update(rollout.obs, 2, axis_name))
        next_obs = jnp.concatenate([rollout.obs[1:], rollout.last_obs[None]], axis=0)
        action = rollout.steps["action"]
        forward, _ = self.transition_losses(state, rollout.obs, action, next_obs, mask)
        errors = state.error_stats.update(forward, 2, axis_name, weights=mask)
        return state._replace(error_stats=errors)

    def rewards(self, state: ICMState, obs, action, next_obs, mask=None):
        """The intrinsic rewards `[T, B]` of transitions, time-major: their forward errors
        under the current networks over the running standard deviation of the errors."""
        forward, _ = self.transition_losses(state, obs, action, next_obs, mask)
        return losses.rnd_intrinsic_reward(forward, state.error_stats.var)

    def train(self, state: ICMState, obs, action, next_obs, mask, axis_name=None):
        """One Adam step of the three networks on (1 − β)·L_I + β·L_F averaged over the
        valid transitions (gradients averaged over devices): (state, the two losses' means
        before the step)."""

        def loss_fn(params):
            fwd, inv = self.transition_losses(state, obs, action, next_obs, mask, params)
            total = (1.0 - self.beta) * inv + self.beta * fwd
            return jnp.sum(total) / jnp.maximum(jnp.sum(mask), 1.0), (fwd, inv)

        (fwd, inv), grads, _ = grads_and_aux(loss_fn, state.params, axis_name)
        params, opt_state = apply(self.optimizer, grads, state.opt_state, state.params)
        metrics = {
            "icm_forward_loss": masked_mean(fwd, mask, axis_name),
            "icm_inverse_loss": masked_mean(inv, mask, axis_name),
        }
        return state._replace(params=params, opt_state=opt_state), metrics

    def bonus(self, state: ICMState, batch, axis_name=None, learned: int = 1):
        """The intrinsic rewards `[n, B]` of a batch of n-step windows (a
        `agents.core.learning.TraceBatch`, raw observations), then one `train` step on the
        `learned` first transitions of each (the sampled ones: SAC's window has one, DQN's
        trace `--trace-len`): (state, rewards, metrics)."""
        n, k = batch.reward.shape[0], learned
        obs, next_obs = batch.obs[:n], batch.obs[1 : n + 1]
        rewards = self.rewards(state, obs, batch.action, next_obs, batch.mask)
        mask = batch.mask[:k]
        state, metrics = self.train(state, obs[:k], batch.action[:k], next_obs[:k], mask, axis_name)
        metrics["intrinsic_reward"] = masked_mean(rewards[:k], mask, axis_name)
        return state, rewards, metrics


def icm_of(config, spec) -> ICM | None:
    """The ICM of a config with `--icm-coef` > 0 for an env of `spec` (None when off); a
    one-line error unless the env's observations are vectors."""
    if config.icm_coef == 0:
        return None
    if spec.obs_shape is None or len(spec.obs_shape) != 1:
        shape = "a dict" if spec.obs_shape is None else f"shape {spec.obs_shape}"
        raise ConfigError(
            f"--icm-coef takes vector observations; {spec.env_id} has observations of {shape}"
        )
    size = spec.num_actions if spec.discrete else int(math.prod(spec.action_shape))
    return ICM(config.hidden, config.icm_features, config.icm_lr, config.icm_beta,
               discrete=spec.discrete, action_size=size)  # fmt: skip


# The flags every config with ICM declares (with docstrings of their own) and their switch.
ICM_ONLY_WITH = dict.fromkeys(("icm_beta", "icm_lr", "icm_features"), "icm_coef>0")


def check_icm(config) -> None:
    """ICM's flag ranges, each a one-line `ConfigError` naming the flag."""
    check(config.icm_coef >= 0, "icm_coef", config.icm_coef, ">= 0")
    check(0.0 <= config.icm_beta <= 1.0, "icm_beta", config.icm_beta, "in [0, 1]")
    check(config.icm_lr > 0, "icm_lr", config.icm_lr, "> 0")
    check_positive_int(config, "icm_features")
