"""Random network distillation (RND, Burda et al. 2018, arXiv:1810.12894) as an intrinsic
reward for the off-policy actor-critics (SAC, discrete SAC, TD3/DDPG: `--rnd-coef`).

Pure functions over `RNDState` (a field of the learner state, so checkpointed):

- `observe` (each iteration, on the fresh rollout x_0..x_{T−1}): the running mean and
  variance of the observations RND sees (its inputs are whitened by them and clipped to
  [−5, 5], §2.4), then the running variance of the prediction errors of those observations
  (the intrinsic-reward scale);
- `rewards` (each update, on the sampled windows): r^i_t = e(x_{t+1}) / σ_e, the predictor's
  error on the next observation with the current predictor (`losses.rnd_prediction_error`,
  `losses.rnd_intrinsic_reward`). The agent adds coef·r^i_t to the extrinsic reward of
  every step of the window before the critic targets (agents/core/offpolicy.py);
- `update` (each update): one Adam step of the predictor on the sampled next observations
  (gradients averaged over devices); `bonus` is `rewards` then `update`.

The paper learns the intrinsic return with a separate, non-episodic value head (§2.3); here
one critic learns the sum of the rewards under the episodic discounts (a termination ends the
intrinsic return too), the usual choice for off-policy RND.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.core.learning import apply, grads_and_aux
from agents.core.normalization import RunningStats, normalize
from networks.curiosity import rnd_networks

OBS_CLIP = 5.0  # arXiv:1810.12894 §2.4: whitened observations clipped to [−5, 5]


class RNDState(NamedTuple):
    predictor: Any  # the trained predictor's params
    target: Any  # the fixed random target network's params (never updated)
    opt_state: Any
    obs_stats: RunningStats  # of the raw observations: RND's input normalisation
    error_stats: RunningStats  # scalar: of the prediction errors (the reward scale)


class RND:
    """RND's networks and pure functions (module docstring), with the interface the
    off-policy agents call for either curiosity (agents/core/icm.py: `init`,
    `observe_rollout`, `bonus`, `metric_names`)."""

    metric_names = ("rnd_loss", "intrinsic_reward")

    def __init__(self, hidden, features: int, lr: float):
        self.target_net, self.predictor_net = rnd_networks(hidden, features)
        self.optimizer = optax.adam(lr)

    def init(self, key, sample_obs) -> RNDState:
        k_target, k_predictor = jax.random.split(key)
        predictor = self.predictor_net.init(k_predictor, sample_obs)
        return RNDState(
            predictor=predictor,
            target=self.target_net.init(k_target, sample_obs),
            opt_state=self.optimizer.init(predictor),
            obs_stats=RunningStats.zeros(sample_obs.shape[1:]),
            error_stats=RunningStats.zeros(),
        )

    def errors(self, state: RNDState, obs, mask=None, predictor=None):
        """Prediction errors `[T, B]` of raw observations `[T, B, D]`."""
        x = normalize(obs, state.obs_stats, OBS_CLIP)
        params = state.predictor if predictor is None else predictor
        pred = self.predictor_net.apply(params, x)
        target = self.target_net.apply(state.target, x)
        return losses.rnd_prediction_error(pred, target, mask_t=mask)

    def observe(self, state: RNDState, obs, axis_name=None) -> RNDState:
        """Take in a rollout's observations `[T, B, D]` (statistics over all devices)."""
        state = state._replace(obs_stats=state.obs_stats.update(obs, 2, axis_name))
        error_stats = state.error_stats.update(self.errors(state, obs), 2, axis_name)
        return state._replace(error_stats=error_stats)

    def rewards(self, state: RNDState, next_obs):
        """Intrinsic rewards `[T, B]` of the transitions into `next_obs` `[T, B, D]`."""
        return losses.rnd_intrinsic_reward(self.errors(state, next_obs), state.error_stats.var)

    def update(self, state: RNDState, obs, mask, axis_name=None):
        """One predictor step on observations `[T, B, D]` (masked mean of the errors):
        (state, loss)."""

        def loss_fn(predictor):
            err = self.errors(state, obs, mask, predictor)
            loss = jnp.sum(err) / jnp.maximum(jnp.sum(mask), 1.0)
            return loss, loss

        loss, grads, _ = grads_and_aux(loss_fn, state.predictor, axis_name)
        if axis_name is not None:
            loss = jax.lax.pmean(loss, axis_name)
        predictor, opt_state = apply(self.optimizer, grads, state.opt_state, state.predictor)
        return state._replace(predictor=predictor, opt_state=opt_state), loss

    def observe_rollout(self, state: RNDState, rollout, axis_name=None) -> RNDState:
        """`observe` of a rollout's observations x_0..x_{T−1}."""
        return self.observe(state, rollout.obs, axis_name)

    def bonus(self, state: RNDState, batch, axis_name=None):
        """The intrinsic rewards `[n, B]` of a batch of n-step windows (a
        `agents.core.learning.TraceBatch`, raw observations: RND normalises its own input),
        e(x_{t+1}) / σ_e under the current predictor, then one predictor step on the
        windows' first next observations: (state, rewards, metrics)."""
        n = batch.reward.shape[0]
        next_obs = batch.obs[1 : n + 1]
        rewards = self.rewards(state, next_obs)  # [n, B]
        state, loss = self.update(state, next_obs[:1], batch.mask[:1], axis_name)
        mask0 = batch.mask[0]
        mean = jnp.sum(mask0 * rewards[0]) / jnp.maximum(jnp.sum(mask0), 1.0)
        if axis_name is not None:
            mean = jax.lax.pmean(mean, axis_name)
        return state, rewards, {"rnd_loss": loss, "intrinsic_reward": mean}
