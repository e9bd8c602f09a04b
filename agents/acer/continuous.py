"""Continuous ACER's learner (Wang et al. 2017, arXiv:1611.01224, §5; Algorithm 3 of the
appendix): the loss and a pure `update(state, batch) -> (state, metrics, priorities)`.

One update on a batch of traces of T steps, x_0..x_T (networks.sdn.GaussianSDNNetwork):
1. the current policy's statistics φ_t = (mean_t, log_std) at x_0..x_{T−1}; n + 1 fresh
   actions per step drawn from it: u_1..u_n for the SDN's baseline and a'_t for the bias
   correction (the noise is drawn once per update, before the batch is split into
   microbatches, so a split update equals the whole one);
2. the SDN at the taken action, the u_i and a': Q̃(x_t, a_t) and Q̃(x_t, a'_t), and V(x_t) for
   t = 0..T (`losses.sdn_q_values`);
3. Q_ret (trace c_t = λ·min(c_max, ρ_t^{1/d})) and Q_opc (trace 1) from V(x_T)
   (`losses.continuous_retrace_targets`);
4. the critic loss ½(Q_ret − Q̃)² + ½(V_target − V)² (`losses.sdn_value_loss`);
5. the policy: truncated IS on a_t with Q_opc plus the bias correction on a'_t
   (`losses.acer_continuous_policy_loss`), minus the entropy bonus, through the efficient
   trust region on (mean, log_std) against the Polyak-averaged network
   (`losses.gaussian_trust_region_policy_loss`).

Actions: the Gaussian is over normalised actions; the stored action a_t is the unclipped
sample (its density is the one the ratios need). The env saw it clipped to [−1, 1] and
scaled to its bounds, so Q(x, a) = Q(x, clip(a, −1, 1)) exactly; the critic is given the
clipped action, for a_t, the u_i and a' alike.

The shared steps (microbatches, data-parallel averaging, clipping, Adam, the metrics) are
`agents.core.learning`'s, as in the discrete learner (agents/acer/learner.py), whose
`LearnerState` this one uses too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agents import losses
from agents.acer.config import ACERConfig
from agents.acer.learner import (
    LearnerState,
    acer_optimizer,
    init_state,
    reset_state,
    step_and_average,
    trace_stats,
)
from agents.core.learning import Hyper, TraceBatch

sg = jax.lax.stop_gradient


class ACERGaussianLearner:
    """Pure functions of the continuous ACER learner, closed over the config and network
    (the discrete learner's state, optimiser, statistics and Polyak average, through the
    functions agents/acer/learner.py shares; its own loss)."""

    def __init__(self, config: ACERConfig, network, action_dim: int):
        self.config, self.network = config, network
        self.optimizer = acer_optimizer(config)
        self.action_dim = action_dim
        self.num_samples = config.sdn_n

    def init(self, key, sample_obs) -> LearnerState:
        return init_state(self, key, sample_obs)

    def reset_params(self, state: LearnerState, params, hparams=None) -> LearnerState:
        return reset_state(self, state, params, hparams)

    def init_params(self, key, sample_obs):
        """The network's parameters, for one observation batch `[B, obs_dim]`."""
        actions = jnp.zeros((1, sample_obs.shape[0], self.action_dim), jnp.float32)
        return self.network.init(key, sample_obs, actions)

    def policy(self, params, obs):
        """(mean `[..., D]`, log_std `[..., D]`) of the policy at observations `[..., obs]`."""
        mean, log_std = self.network.apply(params, obs, method=self.network.policy)
        return mean, jnp.broadcast_to(log_std, mean.shape)

    def loss(self, params, batch: TraceBatch, normaliser, avg_params, hparams=None):
        """Sum of the continuous ACER loss over a chunk of traces ÷ `normaliser` (= T·B), its
        summed statistics and the per-trace priority signal mean |Q_ret − Q̃(x_t, a_t)|.
        `batch.mu` holds the behaviour statistics and the update's standard-normal noise
        `"noise"` `[T, B, n + 1, D]` (see `update`)."""
        cfg, n, d = Hyper(self.config, hparams), self.num_samples, self.action_dim
        T = batch.action.shape[0]
        a, mask = batch.action, batch.mask
        mu_mean, mu_log_std, noise = batch.mu["mean"], batch.mu["log_std"], batch.mu["noise"]
        obs_t = batch.obs[:T]
        mean, log_std = self.policy(params, obs_t)  # [T, B, D] each

        # Fresh actions from the current policy: constants (a score-function estimator).
        samples = sg(mean[:, :, None] + jnp.exp(log_std)[:, :, None] * noise)  # [T, B, n+1, D]
        candidates = jnp.concatenate([a[:, :, None], samples], axis=2)  # a_t, u_1..u_n, a'_t
        candidates = jnp.moveaxis(jnp.clip(candidates, -1.0, 1.0), 2, 0)  # [n+2, T, B, D]
        pad = jnp.zeros((n + 2, 1, *candidates.shape[2:]), candidates.dtype)  # x_T: V only
        v_all, adv = self.network.apply(
            params, batch.obs, jnp.concatenate([candidates, pad], axis=1),
            method=self.network.critic,
        )  # fmt: skip
        v, adv = v_all[:T], adv[:, :T]
        adv_u = jnp.moveaxis(adv[1 : n + 1], 0, -1)  # [T, B, n]
        q = losses.sdn_q_values(v, adv[0], adv_u)  # Q̃(x_t, a_t)
        q_prime = losses.sdn_q_values(v, adv[n + 1], adv_u)  # Q̃(x_t, a'_t)

        log_pi = losses.gaussian_log_prob(a, sg(mean), sg(log_std))
        log_mu = losses.gaussian_log_prob(a, mu_mean, mu_log_std)
        targets = losses.continuous_retrace_targets(
            q, v, log_pi, log_mu, batch.reward, batch.discount, v_all[T], d,
            lambda_=cfg.retrace_lambda, c_max=cfg.retrace_c_max, mask_t=mask,
        )  # fmt: skip
        value_loss = losses.sdn_value_loss(q, v, targets.q_ret, log_pi, log_mu, mask_t=mask)

        def pg_loss(m, s):
            return losses.acer_continuous_policy_loss(
                m, s, a, mu_mean, mu_log_std, targets.q_opc, v, samples[:, :, n], q_prime,
                c=cfg.c, mask_t=mask,
            )  # fmt: skip

        def policy_loss_fn(m, s):
            return pg_loss(m, s) - cfg.entropy_weight * mask * losses.gaussian_entropy(s)

        if cfg.trust_region:
            avg_mean, avg_log_std = self.policy(avg_params, obs_t)
            tr = losses.gaussian_trust_region_policy_loss(
                policy_loss_fn, mean, log_std, sg(avg_mean), sg(avg_log_std),
                cfg.trust_region_delta,
            )  # fmt: skip
            surrogate, tr_scale = tr.loss, tr.scale
        else:
            surrogate, tr_scale = policy_loss_fn(mean, log_std), jnp.zeros_like(value_loss)
        total = jnp.sum(surrogate + cfg.value_weight * value_loss) / normaliser

        td = sg(jnp.abs(targets.q_ret - q)) * mask
        # The truncated weight min(c, ρ): raw Gaussian ratios are unbounded.
        rho_bar = jnp.exp(jnp.minimum(log_pi - log_mu, jnp.log(cfg.c)))
        entropy = mask * losses.gaussian_entropy(sg(log_std))
        terms = (pg_loss(sg(mean), sg(log_std)), value_loss, entropy, targets.q_ret)
        return total, trace_stats(mask, *terms, td, rho_bar, tr_scale)

    def update(self, state: LearnerState, batch: TraceBatch, axis_name=None, hparams=None):
        """One gradient step on a batch of traces. Pure; jit it with the state donated.
        Returns (state, metrics, priorities [B])."""
        key, noise_key = jax.random.split(state.key)
        if axis_name is not None:  # each device draws its own noise for its own traces
            noise_key = jax.random.fold_in(noise_key, jax.lax.axis_index(axis_name))
        T, B, D = batch.action.shape
        noise = jax.random.normal(noise_key, (T, B, self.num_samples + 1, D), jnp.float32)
        batch = batch._replace(mu={**batch.mu, "noise": noise})
        return step_and_average(self, state, batch, axis_name, hparams, key)
