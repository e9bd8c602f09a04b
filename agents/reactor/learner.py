"""Reactor learner: distributional Retrace critic, β-LOO actor, target network.

One update on B replayed sequences (Gruslys et al. 2018, §3):
- the online network is unrolled over the T+1 observations from the LSTM states stored with
  each sequence (resetting at episode starts), and so is the target network;
- critic: the distributional Retrace target (λ = 1) computed from the target network's
  Z(x, ·), the current policy π and the stored behaviour μ, projected on the fixed support,
  and a cross-entropy loss on the online Z(x_t, a_t). With `distributional=False`
  ("Reactor ND") the critic is scalar Retrace with a squared loss;
- actor: β-LOO with β = min(c, 1/μ(A)) and R = the Retrace return, plus an entropy bonus;
- every sequence's loss is weighted by its importance weight from prioritized replay
  (exponent 1), and the new priority of a sequence is its mean |R − Q(x_t, a_t)|;
- the target network is copied from the online one every `target_update_period` updates
  (`optax.periodic_update`).
The shared steps (microbatches, data-parallel averaging, clipping, Adam) are
`agents.core.learning.gradient_step`.
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
    linear_decay,
    member_optimizer,
    restart,
)
from agents.core.rollout import time_major
from envs.core import batch_size_of

Array = jax.Array
sg = jax.lax.stop_gradient

METRICS = ("loss", "policy_loss", "value_loss", "entropy", "grad_norm", "q_ret_mean", "td_abs")


class ReactorLearnerState(NamedTuple):
    params: Any
    target_params: Any
    opt_state: Any
    step: Array
    key: Array


def _take(x, a):
    return jnp.take_along_axis(x, a[..., None], axis=-1)[..., 0]


def reactor_optimizer(cfg) -> optax.GradientTransformation:
    """Adam with clipping, its rate annealed to 0 by env step `anneal_steps` where set; from
    the config or a `Hyper` view of it."""
    lr = linear_decay(cfg.lr, cfg.anneal_steps, cfg.start_train_at, 1.0 / cfg.env_steps_per_update)
    return adam_with_clipping(
        lr, cfg.max_grad_norm, b1=cfg.adam_b1, b2=cfg.adam_b2, eps=cfg.adam_eps
    )


class ReactorLearner:
    """Pure functions of the Reactor's learner, closed over the config and the network."""

    def __init__(self, config, network):
        self.config, self.network = config, network
        self.optimizer = reactor_optimizer(config)

    def optimizer_for(self, hparams: dict | None) -> optax.GradientTransformation:
        return member_optimizer(reactor_optimizer, self.config, self.optimizer, hparams)

    def reset_params(self, state, params, hparams: dict | None = None):
        """`state` from new weights (`agents.core.learning.restart`), the target equal."""
        return restart(state, params, self.optimizer_for(hparams), "target_params")

    def init(self, key, sample_obs) -> ReactorLearnerState:
        init_key, key = jax.random.split(key)
        b = batch_size_of(sample_obs)
        params = self.network.init(
            init_key, time_major(sample_obs), jnp.ones((1, b), bool), self.network.initial_state(b)
        )
        return ReactorLearnerState(
            params=params,
            target_params=jax.tree.map(jnp.copy, params),
            opt_state=self.optimizer.init(params),
            step=jnp.zeros((), jnp.int32),
            key=key,
        )

    def loss(self, params, batch: TraceBatch, normaliser, target_params, hparams=None):
        """Loss summed over the batch ÷ `normaliser` (T·B), its summed statistics and the new
        per-sequence priorities `[B]`."""
        cfg = Hyper(self.config, hparams)
        T = batch.action.shape[0]
        a, mask = batch.action, batch.mask
        out, _ = self.network.apply(params, batch.obs, batch.first, batch.core_state)
        tgt, _ = self.network.apply(target_params, batch.obs, batch.first, batch.core_state)
        tgt = jax.tree.map(sg, tgt)
        pi = sg(out.policy_probs)  # the target policy of Retrace is the current π
        q_online_a = _take(out.q_values[:T], a)

        if cfg.distributional:
            atoms = self.network.atoms
            boot = jnp.einsum("ba,bak->bk", pi[T], tgt.q_probs[T])
            target = losses.distributional_retrace_targets(
                tgt.q_probs[:T], pi[:T], batch.mu, a, batch.reward, batch.discount, boot,
                atoms, lambda_=cfg.retrace_lambda, mask_t=mask,
            )  # fmt: skip
            q_logits_a = jnp.take_along_axis(out.q_logits[:T], a[..., None, None], axis=2)[:, :, 0]
            critic = losses.categorical_cross_entropy(target, q_logits_a, mask_t=mask)
            ret = jnp.einsum("tbk,k->tb", target, atoms)
        else:
            boot = jnp.sum(pi[T] * tgt.q_values[T], axis=-1)
            ret = losses.retrace_targets(
                tgt.q_values[:T], pi[:T], batch.mu, a, batch.reward, batch.discount, boot,
                lambda_=cfg.retrace_lambda, c_max=1.0, mask_t=mask,
            )  # fmt: skip
            critic = losses.acer_value_loss(out.q_values[:T], a, ret, mask_t=mask)

        mu_a = _take(batch.mu, a)
        actor = losses.beta_loo_policy_loss(
            out.policy_logits[:T], out.q_values[:T], a, mu_a, ret, c=cfg.beta_loo_c, mask_t=mask
        )
        entropy = mask * losses.entropy(out.policy_logits[:T])
        per_step = cfg.value_weight * critic + actor - cfg.entropy_weight * entropy
        w = sg(batch.is_weight)[None, :]
        total = jnp.sum(w * per_step) / normaliser

        valid = jnp.maximum(jnp.sum(mask, axis=0), 1.0)
        td = sg(jnp.abs(ret - q_online_a))
        priorities = jnp.sum(mask * td, axis=0) / valid
        stats = {
            "value_loss": jnp.sum(critic),
            "policy_loss": jnp.sum(actor),
            "entropy": jnp.sum(entropy),
            "td_abs": jnp.sum(mask * td),
            "q_ret_mean": jnp.sum(mask * sg(ret)),
            "valid": jnp.sum(mask),
        }
        return total, (stats, priorities)

    def update(self, state: ReactorLearnerState, batch: TraceBatch, axis_name=None, hparams=None):
        """One gradient step. Pure. Data parallel like every learner here (see
        `agents.core.learning.gradient_step`). Returns (state, metrics, priorities [B])."""
        cfg = Hyper(self.config, hparams)
        step = gradient_step(
            partial(self.loss, hparams=hparams, target_params=state.target_params),
            self.optimizer_for(hparams), state.params, state.opt_state, batch,
            chunk=self.config.microbatch_traces, axis_name=axis_name,
        )  # fmt: skip
        count = state.step + 1
        period = self.config.target_update_period
        target = optax.periodic_update(step.params, state.target_params, count, period)
        metrics = actor_critic_metrics(
            step, value_weight=cfg.value_weight, entropy_weight=cfg.entropy_weight
        )
        new_state = ReactorLearnerState(step.params, target, step.opt_state, count, state.key)
        return new_state, metrics, step.per_sequence
