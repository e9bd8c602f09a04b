"""Policy-gradient losses: ACER truncated IS with bias correction, Reactor's β-LOO, entropy,
and ACER's efficient trust region.

Each loss is a surrogate: a per-step scalar whose gradient with respect to the policy logits
is minus the paper's gradient estimate. All coefficients (importance weights, advantages,
Q values) are wrapped in `jax.lax.stop_gradient`, so only the policy carries gradient.

References:
  Wang et al. (2017), ACER, arXiv:1611.01224, eq. 9 (bias correction), eq. 12–13 (trust region).
  Gruslys et al. (2018), The Reactor, arXiv:1704.04651, §3.1 eq. 8 (β-LOO).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from agents.losses import _checks as C
from agents.losses.retrace import MU_EPSILON, _importance_ratio, _take

sg = jax.lax.stop_gradient


def _check_logits_q(logits_t, q_t):
    T, B = C.time_batch("logits_t", logits_t, 3, "[T, B, A]")
    A = logits_t.shape[2]
    C.check_float("logits_t", logits_t)
    C.check_float("q_t", q_t)
    C.check_shape("q_t", q_t, (T, B, A), "Q(x_t, ·) matching logits_t")
    return T, B, A


def entropy(logits_t):
    """Entropy −Σ_a π(a|x) log π(a|x) of softmax policies, shape `logits_t.shape[:-1]`.

    Logits may be −inf (masked actions); they contribute 0·log 0 = 0 to the value and 0 to
    the gradient (which stays finite).
    """
    C.check_float("logits_t", logits_t)
    log_pi = jax.nn.log_softmax(logits_t, axis=-1)
    pi = jnp.exp(log_pi)
    # log π replaced by 0 where π = 0 before the product: 0·(−inf) would be NaN in the value,
    # and a `where` after the product would still put NaN into the gradient.
    return -jnp.sum(pi * jnp.where(pi > 0, log_pi, 0.0), axis=-1)


def acer_policy_loss(logits_t, q_t, mu_t, a_t, q_ret_t, c=10.0, *, mask_t=None):
    r"""ACER policy loss: truncated importance sampling with bias correction (eq. 9).

    With ρ_t(a) = π(a|x_t)/(μ(a|x_t) + ε) (ε = `MU_EPSILON`) and V(x_t) = Σ_a π(a|x_t) Q(x_t, a),
    the gradient of this loss with respect to the logits is minus

        ĝ_t = min(c, ρ_t(a_t)) · ∇ log π(a_t|x_t) · [Q_ret(x_t, a_t) − V(x_t)]
            + Σ_a [1 − c/ρ_t(a)]_+ · π(a|x_t) · ∇ log π(a|x_t) · [Q(x_t, a) − V(x_t)].

    π, ρ, V, Q and Q_ret inside the coefficients are constants (stop_gradient). The
    bias-correction weight is computed without dividing by ρ, as
    [1 − c/ρ]_+ · π = [π − c·(μ + ε)]_+ (equal for ρ > 0, and the ρ → 0 limit 0 at π = 0).
    Actions with π(a|x_t) = 0 (logits −inf, e.g. masked actions) contribute 0, not 0·(−inf).

    Args:
      logits_t: `[T, B, A]` policy logits (the only input that carries gradient).
      q_t: `[T, B, A]` Q(x_t, ·).
      mu_t: `[T, B, A]` behaviour probabilities.
      a_t: `[T, B]` actions.
      q_ret_t: `[T, B]` Retrace targets.
      c: truncation constant (10 in ACER's Atari experiments).
      mask_t: optional `[T, B]`; masked steps give zero loss.

    Returns:
      `[T, B]` per-step loss.

    Checks: shapes and dtypes always; c ≥ 0 when it is a Python or NumPy value. The caller's
    duty, checked only under `agents.losses.checked`: a_t ∈ [0, A), μ finite, non-negative
    and summing to 1.
    """
    T, B, A = _check_logits_q(logits_t, q_t)
    C.check_prob("mu_t", mu_t, (T, B, A))
    C.check_int("a_t", a_t)
    C.check_shape("a_t", a_t, (T, B))
    C.check_float("q_ret_t", q_ret_t)
    C.check_shape("q_ret_t", q_ret_t, (T, B))
    C.check_nonnegative("c", c)
    C.debug_check_actions("a_t", a_t, A)
    C.debug_check_probs("mu_t", mu_t)
    mask = C.optional_mask(mask_t, (T, B), logits_t.dtype)

    log_pi = jax.nn.log_softmax(logits_t, axis=-1)
    pi = sg(jnp.exp(log_pi))
    mu = sg(mu_t)
    # log π where π > 0, else 0: its coefficient is 0 there, and 0·(−inf) would be NaN.
    log_pi = jnp.where(pi > 0, log_pi, 0.0)
    q = sg(q_t)
    v = jnp.sum(pi * q, axis=-1)
    rho_a = _take(_importance_ratio(pi, mu), a_t)
    # Truncated importance-sampling term on the sampled action.
    adv_a = sg(q_ret_t) - v
    term_a = sg(jnp.minimum(c, rho_a) * adv_a) * _take(log_pi, a_t)
    # Bias correction: an expectation under π over all actions, active where ρ(a) > c.
    # [1 − c/ρ]_+ · π = [π − c·(μ + ε)]_+, written without a division by ρ.
    bc_weight = jnp.maximum(0.0, pi - c * (mu + MU_EPSILON)) * (q - v[..., None])
    term_bc = jnp.sum(sg(bc_weight) * log_pi, axis=-1)
    return -mask * (term_a + term_bc)


def beta_loo_policy_loss(logits_t, q_t, a_t, mu_a_t, return_t, c=1.0, *, mask_t=None):
    r"""Reactor's β-leave-one-out policy loss (Gruslys et al. 2018, eq. 8).

    With A = a_t the sampled action, R = return_t (e.g. a Retrace target) and
    β = min(c, 1/(μ(A|x_t) + ε)) (ε = `MU_EPSILON`), the gradient of this loss with respect to
    the logits is minus

        G_β = β · (R − Q(x_t, A)) · ∇π(A|x_t) + Σ_a Q(x_t, a) · ∇π(a|x_t).

    Note ∇π (not ∇log π). β, R and Q are constants (stop_gradient). β = 1/μ gives an unbiased
    estimate; c = 1 gives plain leave-one-out.

    Args:
      logits_t: `[T, B, A]`.
      q_t: `[T, B, A]`.
      a_t: `[T, B]`.
      mu_a_t: `[T, B]` μ(a_t|x_t).
      return_t: `[T, B]`.
      c: truncation of β = min(c, 1/(μ(A|x_t) + ε)).
      mask_t: optional `[T, B]`.

    Returns:
      `[T, B]` per-step loss.

    Checks: shapes and dtypes always; c ≥ 0 when it is a Python or NumPy value. The caller's
    duty, checked only under `agents.losses.checked`: a_t ∈ [0, A), μ(a_t|x_t) finite in
    [0, 1].
    """
    T, B, A = _check_logits_q(logits_t, q_t)
    C.check_int("a_t", a_t)
    C.check_shape("a_t", a_t, (T, B))
    C.check_float("mu_a_t", mu_a_t)
    C.check_shape("mu_a_t", mu_a_t, (T, B), "μ(a_t|x_t) of the taken action")
    C.check_float("return_t", return_t)
    C.check_shape("return_t", return_t, (T, B))
    C.check_nonnegative("c", c)
    C.debug_check_actions("a_t", a_t, A)
    C.debug_check_probs("mu_a_t", mu_a_t, normalised=False)
    mask = C.optional_mask(mask_t, (T, B), logits_t.dtype)

    pi = jax.nn.softmax(logits_t, axis=-1)
    q = sg(q_t)
    beta = sg(jnp.minimum(c, 1.0 / (mu_a_t + MU_EPSILON)))
    advantage = sg(return_t) - _take(q, a_t)
    objective = beta * advantage * _take(pi, a_t) + jnp.sum(q * pi, axis=-1)
    return -mask * objective


def trust_region_projection(g, k, delta):
    r"""ACER's efficient trust-region projection (eq. 12–13), over the last axis.

        z* = g − max(0, (kᵀg − δ) / ‖k‖²) · k

    z* is the closest vector to g (in L2) that satisfies the linearised KL constraint kᵀz ≤ δ.
    Where k = 0 the constraint is void and z* = g. Checks: shapes and dtypes; δ ≥ 0 when it is
    a Python or NumPy value (under `agents.losses.checked`, also for jax Arrays).
    """
    C.check_float("g", g)
    C.check_float("k", k)
    if jnp.shape(g) != jnp.shape(k):
        raise ValueError(f"g has shape {jnp.shape(g)} but k has shape {jnp.shape(k)}")
    C.check_nonnegative("delta", delta)
    return g - _projection_scale(g, k, delta)[..., None] * k


def _projection_scale(g, k, delta):
    """max(0, (kᵀg − δ)/‖k‖²) over the last axis, and 0 where k = 0."""
    kg = jnp.sum(k * g, axis=-1)
    kk = jnp.sum(k * k, axis=-1)
    return jnp.where(kk > 0, jnp.maximum(0.0, (kg - delta) / jnp.where(kk > 0, kk, 1.0)), 0.0)


class TrustRegionOutput(NamedTuple):
    """What `trust_region_policy_loss` returns (ACER eq. 12-13), per sample."""

    loss: jax.Array  # per-sample surrogate loss; its gradient through the network is −z*
    g: jax.Array  # ascent direction −∂loss/∂logits, per sample
    k: jax.Array  # ∂KL(π_avg ‖ π)/∂logits = π − π_avg
    scale: jax.Array  # max(0, (kᵀg − δ)/‖k‖²): 0 where the constraint is inactive


def trust_region_policy_loss(
    policy_loss_fn: Callable[[jax.Array], jax.Array], logits_t, avg_logits_t, delta
) -> TrustRegionOutput:
    r"""Apply ACER's efficient trust region to a per-sample policy loss.

    ACER (§3.3) projects the policy gradient taken with respect to the distribution statistics
    φ, here the logits, before back-propagating it into the network. With
    g = −∂ℓ/∂φ (the ascent direction of the per-sample loss ℓ) and
    k = ∂ KL(π_avg ‖ π_φ)/∂φ = π_φ − π_avg, it computes z* = `trust_region_projection(g, k, δ)`
    and returns the surrogate −stop_gradient(z*)ᵀφ, whose gradient with respect to the
    network parameters θ is −z*ᵀ ∂φ/∂θ: z* back-propagated, as in ACER eq. 13. Logits at −inf
    (masked actions) are left out of the surrogate, so it stays finite.

    Args:
      policy_loss_fn: maps logits `[..., A]` to a per-sample loss `[...]`. Each sample's loss
        must depend only on its own logits (true of every loss in this module).
      logits_t: `[..., A]` current policy logits (carry gradient into the network).
      avg_logits_t: `[..., A]` logits of the Polyak-averaged policy network (no gradient).
      delta: the constraint δ (1 in ACER's Atari experiments).

    Checks: shapes and dtypes; δ ≥ 0 when it is a Python or NumPy value (under
    `agents.losses.checked`, also for jax Arrays); `policy_loss_fn` does its own checks.
    """
    C.check_float("logits_t", logits_t)
    C.check_float("avg_logits_t", avg_logits_t)
    if jnp.shape(logits_t) != jnp.shape(avg_logits_t):
        raise ValueError(
            f"avg_logits_t has shape {jnp.shape(avg_logits_t)}, expected {jnp.shape(logits_t)}"
        )
    C.check_nonnegative("delta", delta)
    phi = sg(logits_t)
    g = -jax.grad(lambda x: jnp.sum(policy_loss_fn(x)))(phi)
    k = jax.nn.softmax(phi, axis=-1) - jax.nn.softmax(sg(avg_logits_t), axis=-1)
    scale = _projection_scale(g, k, delta)
    z = g - scale[..., None] * k
    # Logits at −inf (masked actions) stay out of the surrogate: 0·(−inf) would be NaN, and a
    # finite step cannot move them anyway.
    loss = -jnp.sum(sg(z) * jnp.where(jnp.isneginf(logits_t), 0.0, logits_t), axis=-1)
    return TrustRegionOutput(loss=loss, g=g, k=k, scale=scale)
