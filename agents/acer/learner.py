"""ACER learner: the loss and a pure `update(state, batch) -> (state, metrics, priorities)`.

One update on a batch of traces (Wang et al. 2017, Algorithm 2, discrete actions): Retrace
targets for the critic, truncated importance sampling with bias correction for the policy,
an entropy bonus, and optionally the efficient trust region against a Polyak-averaged policy
network. The shared steps (microbatches, data-parallel averaging, clipping, Adam) are
`agents.core.learning.gradient_step`. Every loss term is a per-step sum divided by the full T·B.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.core.learning import (
    Hyper,
    TraceBatch,
    actor_critic_metrics,
    adam_with_clipping,
    gradient_step,
    member_optimizer,
    restart,
)
from agents.core.rollout import time_major
from envs.core import batch_size_of

Array = jax.Array
sg = jax.lax.stop_gradient

METRICS = (
    "loss", "policy_loss", "value_loss", "entropy", "grad_norm", "q_ret_mean", "td_abs",
    "rho_mean", "tr_active", "tr_scale",
)  # fmt: skip


class LearnerState(NamedTuple):
    params: Any
    avg_params: Any  # Polyak average θ_a ← τ·θ_a + (1 − τ)·θ (only the policy part is used)
    opt_state: Any
    step: Array  # int32 count of updates
    key: Array  # for replay sampling


class ACERLearner:
    """Pure functions of the ACER learner, closed over the config and the network."""

    def __init__(self, config, network):
        self.config, self.network = config, network
        self.optimizer = acer_optimizer(config)

    def init_params(self, key, sample_obs):
        """The network's parameters, for one observation batch `[B, *obs_shape]`."""
        if self.config.lstm_size:
            b = batch_size_of(sample_obs)
            first = jnp.zeros((1, b), bool)
            return self.network.init(
                key, time_major(sample_obs), first, self.network.initial_state(b)
            )
        return self.network.init(key, sample_obs)

    def init(self, key, sample_obs) -> LearnerState:
        """sample_obs: one observation batch `[B, *obs_shape]`."""
        return init_state(self, key, sample_obs)

    def reset_params(self, state: LearnerState, params, hparams=None) -> LearnerState:
        return reset_state(self, state, params, hparams)

    def _forward(self, params, obs, first, core_state):
        if self.config.lstm_size:
            (logits, q), _ = self.network.apply(params, obs, first, core_state)
            return logits, q
        return self.network.apply(params, obs)

    def loss(self, params, batch: TraceBatch, normaliser, avg_params, hparams=None):
        """Sum of the ACER loss over a chunk of traces ÷ `normaliser` (= T·B), its summed
        statistics and the per-trace priority signal mean |Q_ret − Q(x_t, a_t)|."""
        cfg = Hyper(self.config, hparams)
        T = batch.action.shape[0]
        a, mask = batch.action, batch.mask
        logits, q = self._forward(params, batch.obs, batch.first, batch.core_state)
        pi = jax.nn.softmax(logits)
        bootstrap = jnp.sum(pi[T] * q[T], axis=-1)
        q_ret = losses.retrace_targets(
            q[:T], sg(pi[:T]), batch.mu, a, batch.reward, batch.discount, bootstrap,
            lambda_=cfg.retrace_lambda, c_max=cfg.retrace_c_max, mask_t=mask,
        )  # fmt: skip
        value_loss = losses.acer_value_loss(q[:T], a, q_ret, mask_t=mask)

        def pg_loss(lg):
            return losses.acer_policy_loss(lg, q[:T], batch.mu, a, q_ret, c=cfg.c, mask_t=mask)

        def policy_loss_fn(lg):
            return pg_loss(lg) - cfg.entropy_weight * mask * losses.entropy(lg)

        entropy = mask * losses.entropy(logits[:T])
        if cfg.trust_region:
            avg_logits, _ = self._forward(avg_params, batch.obs, batch.first, batch.core_state)
            tr = losses.trust_region_policy_loss(
                policy_loss_fn, logits[:T], sg(avg_logits[:T]), cfg.trust_region_delta
            )
            surrogate, tr_scale = tr.loss, tr.scale
        else:
            surrogate, tr_scale = policy_loss_fn(logits[:T]), jnp.zeros_like(value_loss)
        total = jnp.sum(surrogate + cfg.value_weight * value_loss) / normaliser

        # Diagnostics (sums). policy_loss is the policy-gradient term alone (no entropy; under
        # the trust region the surrogate's value is not a loss, its gradient is).
        q_a = jnp.take_along_axis(q[:T], a[..., None], -1)[..., 0]
        td = sg(jnp.abs(q_ret - q_a)) * mask
        rho = jnp.take_along_axis(pi[:T] / batch.mu, a[..., None], -1)[..., 0]
        terms = (pg_loss(sg(logits[:T])), value_loss, entropy, q_ret)
        return total, trace_stats(mask, *terms, td, rho, tr_scale)

    def update(self, state: LearnerState, batch: TraceBatch, axis_name=None, hparams=None):
        """One gradient step on a batch of traces. Pure; jit it with the state donated.
        Under `shard_map` each device passes its shard of the traces (see
        `agents.core.learning.gradient_step`). Returns (state, metrics, priorities [B])."""
        return step_and_average(self, state, batch, axis_name, hparams, state.key)


# What the discrete and the continuous learner (agents/acer/continuous.py) share: each has
# `config`, `optimizer`, `init_params(key, sample_obs)` and `loss(params, batch, normaliser,
# avg_params, hparams)`.


def acer_optimizer(cfg) -> optax.GradientTransformation:
    """Adam with clipping, from the config or a `Hyper` view of it."""
    return adam_with_clipping(cfg.lr, cfg.max_grad_norm, eps=cfg.adam_eps)


def init_state(learner, key, sample_obs) -> LearnerState:
    """A fresh learner state, the Polyak average equal to the initial params."""
    init_key, key = jax.random.split(key)
    params = learner.init_params(init_key, sample_obs)
    return LearnerState(
        params=params,
        avg_params=jax.tree.map(jnp.copy, params),  # distinct buffers: both are donated
        opt_state=learner.optimizer.init(params),
        step=jnp.zeros((), jnp.int32),
        key=key,
    )


def reset_state(learner, state: LearnerState, params, hparams=None) -> LearnerState:
    """`state` from new weights (`agents.core.learning.restart`), the average equal."""
    optimizer = member_optimizer(acer_optimizer, learner.config, learner.optimizer, hparams)
    return restart(state, params, optimizer, "avg_params")


def step_and_average(learner, state: LearnerState, batch, axis_name, hparams, key):
    """The gradient step on `learner.loss`, then the Polyak average θ_a ← τ·θ_a + (1 − τ)·θ;
    `key` is the new state's. Returns (state, metrics, priorities [B])."""
    cfg = Hyper(learner.config, hparams)
    step = gradient_step(
        partial(learner.loss, hparams=hparams, avg_params=state.avg_params),
        member_optimizer(acer_optimizer, learner.config, learner.optimizer, hparams),
        state.params, state.opt_state, batch, chunk=learner.config.microbatch_traces,
        axis_name=axis_name,
    )  # fmt: skip
    avg_params = optax.incremental_update(step.params, state.avg_params, 1.0 - cfg.tau)
    new_state = LearnerState(step.params, avg_params, step.opt_state, state.step + 1, key)
    metrics = actor_critic_metrics(
        step, value_weight=cfg.value_weight, entropy_weight=cfg.entropy_weight
    )
    return new_state, metrics, step.per_sequence


def trace_stats(mask, policy_loss, value_loss, entropy, q_ret, td, rho, tr_scale):
    """An ACER loss's summed statistics (policy_loss: the policy-gradient term alone; entropy:
    masked already; rho: the importance weight of the taken actions) and each trace's priority
    signal, its mean |TD| over valid steps."""
    stats = {
        "policy_loss": jnp.sum(policy_loss),
        "value_loss": jnp.sum(value_loss),
        "entropy": jnp.sum(entropy),
        "q_ret_mean": jnp.sum(mask * q_ret),
        "td_abs": jnp.sum(td),
        "rho_mean": jnp.sum(mask * sg(rho)),
        "tr_active": jnp.sum(mask * (tr_scale > 0)),
        "tr_scale": jnp.sum(mask * tr_scale),
        "valid": jnp.sum(mask),
    }
    return stats, jnp.sum(td, axis=0) / jnp.maximum(jnp.sum(mask, axis=0), 1.0)
