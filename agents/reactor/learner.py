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
- the target network is copied from the online one every `target_update_period` updates.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.base import slice_batch
from agents.reactor.config import ReactorConfig

Array = jax.Array
sg = jax.lax.stop_gradient


class ReactorLearnerState(NamedTuple):
    params: Any
    target_params: Any
    opt_state: Any
    step: Array
    key: Array


class SequenceBatch(NamedTuple):
    obs: Array  # [T+1, B, ...]
    first: Array  # [T+1, B]
    action: Array  # [T, B]
    mu: Array  # [T, B, A]
    reward: Array  # [T, B]
    discount: Array  # [T, B]
    mask: Array  # [T, B]
    core_state: Any  # ReactorState at x_0, [B, ...]
    is_weight: Array  # [B]


def _take(x, a):
    return jnp.take_along_axis(x, a[..., None], axis=-1)[..., 0]


class ReactorLearner:
    def __init__(self, config: ReactorConfig, network):
        self.config = config
        self.network = network
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm),
            optax.adam(config.lr, b1=config.adam_b1, b2=config.adam_b2, eps=config.adam_eps),
        )

    def init(self, key, sample_obs) -> ReactorLearnerState:
        init_key, key = jax.random.split(key)
        b = sample_obs.shape[0]
        params = self.network.init(
            init_key, sample_obs[None], jnp.ones((1, b), bool), self.network.initial_state(b)
        )
        return ReactorLearnerState(
            params=params,
            target_params=jax.tree.map(jnp.copy, params),
            opt_state=self.optimizer.init(params),
            step=jnp.zeros((), jnp.int32),
            key=key,
        )

    def loss(self, params, target_params, batch: SequenceBatch, normaliser=None):
        """Loss summed over the batch ÷ `normaliser` (default T·B), its summed statistics and
        the new per-sequence priorities `[B]`."""
        cfg = self.config
        T, B = batch.action.shape
        normaliser = T * B if normaliser is None else normaliser
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
            ret = jnp.sum(target * atoms, axis=-1)
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
            "critic_loss": jnp.sum(critic),
            "actor_loss": jnp.sum(actor),
            "entropy": jnp.sum(entropy),
            "td_abs": jnp.sum(mask * td),
            "return_mean": jnp.sum(mask * sg(ret)),
            "valid": jnp.sum(mask),
        }
        return total, (stats, priorities)

    def update(self, state: ReactorLearnerState, batch: SequenceBatch, axis_name=None):
        """One gradient step. Pure. Data parallel like ACER: local gradients of the
        device-varying params, averaged with `lax.pmean` over `axis_name`."""
        cfg = self.config
        T, B = batch.action.shape
        params = state.params
        if axis_name is not None:
            params = jax.tree.map(lambda x: jax.lax.pcast(x, (axis_name,), to="varying"), params)
        # Chunks of sequences, gradients summed inside this jit (unrolled Python loop): on CPU
        # several small batches are faster than one big one (PERF-NOTES.md). Same maths.
        chunk = cfg.microbatch_sequences or B
        if B % chunk:
            raise ValueError(f"batch of {B} sequences is not divisible by {chunk} per chunk")
        grads, stats, priorities = None, None, []
        for start in range(0, B, chunk):
            part = slice_batch(batch, start, chunk, ("core_state", "is_weight"))
            g, (s, p) = jax.grad(self.loss, has_aux=True)(params, state.target_params, part, T * B)
            grads = g if grads is None else jax.tree.map(jnp.add, grads, g)
            stats = s if stats is None else jax.tree.map(jnp.add, stats, s)
            priorities.append(p)
        priorities = jnp.concatenate(priorities)
        if axis_name is not None:
            grads = jax.lax.pmean(grads, axis_name)
            stats = jax.lax.psum(stats, axis_name)
            B = B * jax.lax.psum(1, axis_name)
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        new_params = optax.apply_updates(state.params, updates)
        step = state.step + 1
        refresh = step % cfg.target_update_period == 0
        target = jax.tree.map(
            lambda t, p: jnp.where(refresh, p, t), state.target_params, new_params
        )
        valid = jnp.maximum(stats.pop("valid"), 1.0)
        metrics = {
            "loss": (stats["critic_loss"] * cfg.value_weight + stats["actor_loss"]) / (T * B),
            "value_loss": stats["critic_loss"] / (T * B),
            "policy_loss": stats["actor_loss"] / (T * B),
            "entropy": stats["entropy"] / valid,
            "td_abs": stats["td_abs"] / valid,
            "q_ret_mean": stats["return_mean"] / valid,
            "grad_norm": grad_norm,
        }
        new_state = ReactorLearnerState(new_params, target, opt_state, step, state.key)
        return new_state, metrics, priorities
