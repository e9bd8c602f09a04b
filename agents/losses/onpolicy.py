"""On-policy losses for PPO: the clipped surrogate, the clipped value loss and advantage
normalisation.

Every per-step input is `[T, B]`, and so is every per-step output: the caller reduces (a mean
over the valid steps, usually). At a masked step (mask_t = 0, see `agents.losses`) every loss
and diagnostic is zero, whatever the inputs there (even ±inf log-probabilities).

References:
  Schulman et al. (2017), "Proximal Policy Optimization Algorithms", arXiv:1707.06347, eq. 7
  (the clipped surrogate); the clipped value loss and advantage normalisation are those of
  the authors' implementation (OpenAI baselines `ppo2`) and of CleanRL's `ppo*.py`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from agents.losses import _checks as C

sg = jax.lax.stop_gradient


def _check_step(name: str, x, shape: tuple[int, int], what: str = "") -> None:
    C.check_float(name, x)
    C.check_shape(name, x, shape, what)


def _check_epsilon(epsilon) -> None:
    C.check_scalar("epsilon", epsilon, "the clipping range ε")
    C.check_nonnegative("epsilon", epsilon)


class PPOClipOutput(NamedTuple):
    """What `ppo_clip_loss` returns: the per-step loss and two diagnostics, all `[T, B]`."""

    loss: jax.Array  # [T, B] −min(ρ_t Â_t, clip(ρ_t, 1 − ε, 1 + ε) Â_t); 0 at masked steps
    clipped: jax.Array  # [T, B] 1.0 where |ρ_t − 1| > ε, else 0.0 (and 0 at masked steps)
    approx_kl: jax.Array  # [T, B] (ρ_t − 1) − log ρ_t ≥ 0; 0 at masked steps


def ppo_clip_loss(logp_t, old_logp_t, adv_t, epsilon, *, mask_t=None) -> PPOClipOutput:
    r"""PPO's clipped surrogate objective, negated to be minimised (arXiv:1707.06347, eq. 7).

    With the probability ratio ρ_t = π_θ(a_t|x_t) / π_old(a_t|x_t) = exp(log π_θ − log π_old):

        loss_t = −min( ρ_t Â_t, clip(ρ_t, 1 − ε, 1 + ε) Â_t )

    The paper's L^CLIP(θ) is minus the mean of loss_t over the valid steps. Two diagnostics
    come with it, per step, as in CleanRL:

        clipped_t   = 1{ |ρ_t − 1| > ε }        (its mean over valid steps: the clip fraction)
        approx_kl_t = (ρ_t − 1) − log ρ_t ≥ 0   (its mean: an unbiased estimate of
                                                 KL(π_old ‖ π_θ) on samples from π_old)

    `clipped_t` marks a ratio outside the trust range, whatever the sign of Â_t; the gradient
    of loss_t is zero only where clipping is active for that sign (ρ_t > 1 + ε with Â_t > 0,
    or ρ_t < 1 − ε with Â_t < 0).

    Args:
      logp_t: `[T, B]` log π_θ(a_t|x_t) under the parameters being learnt.
      old_logp_t: `[T, B]` log π_old(a_t|x_t) of the policy that collected the data.
      adv_t: `[T, B]` advantage estimates Â_t (e.g. `gae`, maybe `normalize_advantages`).
      epsilon: the clipping range ε ≥ 0, a scalar (0.1 or 0.2 in the paper).
      mask_t: optional `[T, B]`; masked steps give a zero loss and zero diagnostics. Their
        log-ratio is replaced by 0 before the exponential, so garbage there (±inf) is harmless.

    Returns:
      `PPOClipOutput(loss, clipped, approx_kl)`, each `[T, B]`.

    Gradients: only `logp_t` carries gradient. `old_logp_t` and `adv_t` are constants
    (stop_gradient), and the two diagnostics are stop_gradient'ed.

    Checks: shapes and dtypes always; ε a scalar, and ε ≥ 0 when it is a Python or NumPy value
    (under `agents.losses.checked`, also for jax Arrays).
    """
    T, B = C.time_batch("logp_t", logp_t, 2, "[T, B]")
    C.check_float("logp_t", logp_t)
    _check_step("old_logp_t", old_logp_t, (T, B), "log π_old(a_t|x_t)")
    _check_step("adv_t", adv_t, (T, B), "advantage estimates")
    _check_epsilon(epsilon)
    mask = C.optional_mask(mask_t, (T, B), logp_t.dtype)

    valid = mask > 0
    log_ratio = jnp.where(valid, logp_t - sg(old_logp_t), 0.0)
    ratio = jnp.exp(log_ratio)
    adv = jnp.where(valid, sg(adv_t), 0.0)
    surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - epsilon, 1.0 + epsilon) * adv)
    loss = -mask * surrogate
    clipped = mask * (jnp.abs(ratio - 1.0) > epsilon).astype(logp_t.dtype)
    approx_kl = mask * ((ratio - 1.0) - log_ratio)
    return PPOClipOutput(loss=loss, clipped=sg(clipped), approx_kl=sg(approx_kl))


def clipped_value_loss(v_t, old_v_t, return_t, epsilon, *, mask_t=None):
    r"""PPO's clipped value loss (OpenAI baselines `ppo2`, CleanRL's `clip_vloss`), per step.

    The new value may move at most ε away from the value that collected the data; the loss is
    the larger of the clipped and the unclipped squared error:

        V^clip_t = V_old(x_t) + clip(V(x_t) − V_old(x_t), −ε, ε)
        loss_t   = ½ · max( (V(x_t) − R_t)², (V^clip_t − R_t)² )

    The ½ follows baselines and CleanRL; torch-ac leaves it out (the same loss with twice the
    weight). To train without clipping, use ½(V − R)² instead (ε = ∞ gives the same value).

    Args:
      v_t: `[T, B]` V(x_t) under the parameters being learnt.
      old_v_t: `[T, B]` V_old(x_t) from the rollout.
      return_t: `[T, B]` the target R_t (e.g. `gae` + V_old, or `lambda_returns`).
      epsilon: the clipping range ε ≥ 0, a scalar, in the units of the value.
      mask_t: optional `[T, B]`; masked steps give zero loss.

    Returns:
      `[T, B]` per-step loss.

    Gradients: only `v_t` carries gradient (through both branches, through the clipped one
    only while |V − V_old| < ε). `old_v_t` and `return_t` are constants (stop_gradient).

    Checks: shapes and dtypes always; ε a scalar, and ε ≥ 0 when it is a Python or NumPy value
    (under `agents.losses.checked`, also for jax Arrays).
    """
    T, B = C.time_batch("v_t", v_t, 2, "[T, B]")
    C.check_float("v_t", v_t)
    _check_step("old_v_t", old_v_t, (T, B), "V_old(x_t) from the rollout")
    _check_step("return_t", return_t, (T, B), "value targets")
    _check_epsilon(epsilon)
    mask = C.optional_mask(mask_t, (T, B), v_t.dtype)

    old_v, ret = sg(old_v_t), sg(return_t)
    v_clipped = old_v + jnp.clip(v_t - old_v, -epsilon, epsilon)
    loss = 0.5 * jnp.maximum(jnp.square(v_t - ret), jnp.square(v_clipped - ret))
    return jnp.where(mask > 0, loss, 0.0)


def normalize_advantages(adv_t, *, mask_t=None, axis_name=None, eps=1e-8):
    r"""Advantages shifted to mean 0 and scaled to standard deviation 1 over the valid steps.

        Â'_t = (Â_t − m) / (s + eps),   m = Σ_v Â_v / N,   s² = Σ_v (Â_v − m)² / N

    where v runs over the N steps with mask_v = 1, over the whole `[T, B]` batch (PPO's
    minibatch normalisation, as baselines `ppo2` and CleanRL). s is the population standard
    deviation (ddof = 0; CleanRL's `torch.std` uses N − 1, a relative difference of 1/(2N)).
    Masked steps come out 0. With no valid step at all every output is 0.

    Data parallel: inside `jax.shard_map` (or `pmap`), pass the batch axis name as
    `axis_name`: the sums above are then taken over every device (`jax.lax.psum`), so each
    shard is normalised with the statistics of the global batch. Without it each shard uses
    its own statistics.

    Args:
      adv_t: `[T, B]` advantages.
      mask_t: optional `[T, B]`, 1 for the steps that count.
      axis_name: optional name (or tuple of names) of the mapped batch axis.
      eps: added to s, ≥ 0.

    Returns:
      `[T, B]` normalised advantages, stop_gradient'ed (advantages are targets).

    Checks: shapes and dtypes always; eps a scalar, and eps ≥ 0 when it is a Python or NumPy
    value.
    """
    T, B = C.time_batch("adv_t", adv_t, 2, "[T, B]")
    C.check_float("adv_t", adv_t)
    C.check_scalar("eps", eps, "added to the standard deviation")
    C.check_nonnegative("eps", eps)
    mask = C.optional_mask(mask_t, (T, B), adv_t.dtype)

    def total(x):
        s = jnp.sum(x)
        return s if axis_name is None else jax.lax.psum(s, axis_name)

    valid = mask > 0
    adv = jnp.where(valid, adv_t, 0.0)
    count = jnp.maximum(total(mask), 1.0)
    mean = total(adv) / count
    centred = jnp.where(valid, adv - mean, 0.0)
    std = jnp.sqrt(total(jnp.square(centred)) / count)
    return sg(centred / (std + eps))
