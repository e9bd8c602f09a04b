"""ACER learner: the loss and a pure `update(state, batch) -> (state, metrics)`.

One update on a batch of traces (Wang et al. 2017, Algorithm 2, discrete actions):
Retrace targets for the critic, truncated importance sampling with bias correction for the
policy, an entropy bonus, and optionally the efficient trust region against a Polyak-averaged
policy network. Gradients are clipped by global norm and applied with Adam (optax).

On these CPUs one big batch is slower per sample than several small ones (see
PERF-NOTES.md), so `microbatch_traces` splits the batch into chunks whose gradients are
summed inside the same jit (a Python loop, unrolled: no conv backward pass inside a rolled
loop). The maths is unchanged: every loss term is a per-step sum divided by the full T·B.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.acer.config import ACERConfig
from agents.base import slice_batch

Array = jax.Array


class LearnerState(NamedTuple):
    params: Any
    avg_params: Any  # Polyak average θ_a ← τ·θ_a + (1 − τ)·θ (only the policy part is used)
    opt_state: Any
    step: Array  # int32 count of updates
    key: Array  # for replay sampling


class TraceBatch(NamedTuple):
    """Time-major batch of B traces. obs/first have T+1 steps, the rest T."""

    obs: Array  # [T+1, B, ...]
    first: Array  # [T+1, B]
    action: Array  # [T, B]
    mu: Array  # [T, B, A]
    reward: Array  # [T, B]
    discount: Array  # [T, B]
    mask: Array  # [T, B]
    core_state: Any  # recurrent state before x_0, or ()


METRIC_NAMES = (
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "grad_norm",
    "q_ret_mean",
    "rho_mean",
    "tr_active",
    "tr_scale",
)


def make_optimizer(config: ACERConfig) -> optax.GradientTransformation:
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adam(config.lr, eps=config.adam_eps),
    )


class ACERLearner:
    """Pure functions of the ACER learner, closed over the config and the network."""

    def __init__(self, config: ACERConfig, network):
        self.config = config
        self.network = network
        self.optimizer = make_optimizer(config)

    def init(self, key, sample_obs) -> LearnerState:
        """sample_obs: one observation batch `[B, *obs_shape]`."""
        init_key, key = jax.random.split(key)
        if self.config.lstm_size:
            b = sample_obs.shape[0]
            params = self.network.init(
                init_key,
                sample_obs[None],
                jnp.zeros((1, b), bool),
                self.network.initial_state(b),
            )
        else:
            params = self.network.init(init_key, sample_obs)
        return LearnerState(
            params=params,
            avg_params=jax.tree.map(jnp.copy, params),  # distinct buffers: both are donated
            opt_state=self.optimizer.init(params),
            step=jnp.zeros((), jnp.int32),
            key=key,
        )

    def _forward(self, params, obs, first, core_state):
        if self.config.lstm_size:
            (logits, q), _ = self.network.apply(params, obs, first, core_state)
            return logits, q
        return self.network.apply(params, obs)

    def chunk_loss(self, params, avg_params, batch: TraceBatch, normaliser):
        """Sum of the ACER loss over a chunk of traces, divided by `normaliser` (= T·B)."""
        cfg = self.config
        T = batch.action.shape[0]
        logits, q = self._forward(params, batch.obs, batch.first, batch.core_state)
        pi = jax.nn.softmax(logits)
        bootstrap = jnp.sum(pi[T] * q[T], axis=-1)
        q_ret = losses.retrace_targets(
            q[:T],
            jax.lax.stop_gradient(pi[:T]),
            batch.mu,
            batch.action,
            batch.reward,
            batch.discount,
            bootstrap,
            lambda_=cfg.retrace_lambda,
            c_max=cfg.retrace_c_max,
            mask_t=batch.mask,
        )
        value_loss = losses.acer_value_loss(q[:T], batch.action, q_ret, mask_t=batch.mask)

        def policy_loss_fn(lg):
            pg = losses.acer_policy_loss(
                lg, q[:T], batch.mu, batch.action, q_ret, c=cfg.c, mask_t=batch.mask
            )
            return pg - cfg.entropy_weight * batch.mask * losses.entropy(lg)

        if cfg.trust_region:
            avg_logits, _ = self._forward(avg_params, batch.obs, batch.first, batch.core_state)
            tr = losses.trust_region_policy_loss(
                policy_loss_fn,
                logits[:T],
                jax.lax.stop_gradient(avg_logits[:T]),
                cfg.trust_region_delta,
            )
            policy_loss, tr_scale = tr.loss, tr.scale
        else:
            policy_loss, tr_scale = policy_loss_fn(logits[:T]), jnp.zeros_like(value_loss)
        total = jnp.sum(policy_loss + cfg.value_weight * value_loss) / normaliser

        # Diagnostics (sums; divided by the normaliser like the loss).
        mask = batch.mask
        rho = jnp.take_along_axis(pi[:T] / batch.mu, batch.action[..., None], -1)[..., 0]
        stats = {
            "policy_loss": jnp.sum(policy_loss),
            "value_loss": jnp.sum(value_loss),
            "entropy": jnp.sum(mask * losses.entropy(logits[:T])),
            "q_ret_mean": jnp.sum(mask * q_ret),
            "rho_mean": jnp.sum(mask * jax.lax.stop_gradient(rho)),
            "tr_active": jnp.sum(mask * (tr_scale > 0)),
            "tr_scale": jnp.sum(mask * tr_scale),
            "valid": jnp.sum(mask),
        }
        return total, stats

    def update(self, state: LearnerState, batch: TraceBatch, axis_name: str | None = None):
        """One gradient step on a batch of traces. Pure; jit it with the state donated.

        Data parallel: inside `shard_map` over a mesh axis `axis_name`, each device passes its
        own shard of the traces; gradients are averaged with `lax.pmean` (equal shards, so the
        result is the gradient of the global mean) and the statistics summed with `lax.psum`,
        so every device applies the same update to its replica of the parameters.
        """
        cfg = self.config
        T, B = batch.action.shape
        chunk = cfg.microbatch_traces or B
        if B % chunk:
            raise ValueError(f"batch of {B} traces is not divisible by microbatch_traces={chunk}")
        grad_fn = jax.grad(self.chunk_loss, has_aux=True)
        params = state.params
        if axis_name is not None:
            # Mark the replicated params as device-varying before differentiating: otherwise
            # shard_map's autodiff psums the cotangent of a replicated input itself, and the
            # gradients would come out summed over devices instead of local. With this, each
            # device holds its local gradient and the pmean below does the averaging.
            params = jax.tree.map(lambda x: jax.lax.pcast(x, (axis_name,), to="varying"), params)
        grads, stats = None, None
        for start in range(0, B, chunk):
            part = slice_batch(batch, start, chunk)
            g, s = grad_fn(params, state.avg_params, part, T * B)
            grads = g if grads is None else jax.tree.map(jnp.add, grads, g)
            stats = s if stats is None else jax.tree.map(jnp.add, stats, s)

        if axis_name is not None:
            grads = jax.lax.pmean(grads, axis_name)
            stats = jax.lax.psum(stats, axis_name)
            B = B * jax.lax.psum(1, axis_name)  # the global batch, for the metrics
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        avg_params = jax.tree.map(
            lambda a, p: cfg.tau * a + (1.0 - cfg.tau) * p, state.avg_params, params
        )
        valid = jnp.maximum(stats.pop("valid"), 1.0)
        metrics = {
            "policy_loss": stats["policy_loss"] / (T * B),
            "value_loss": stats["value_loss"] / (T * B),
            "entropy": stats["entropy"] / valid,
            "q_ret_mean": stats["q_ret_mean"] / valid,
            "rho_mean": stats["rho_mean"] / valid,
            "tr_active": stats["tr_active"] / valid,
            "tr_scale": stats["tr_scale"] / valid,
            "grad_norm": grad_norm,
        }
        metrics["loss"] = metrics["policy_loss"] + cfg.value_weight * metrics["value_loss"]
        new_state = LearnerState(params, avg_params, opt_state, state.step + 1, state.key)
        return new_state, metrics
