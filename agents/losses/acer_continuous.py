r"""Continuous ACER (Wang et al. 2017, "Sample Efficient Actor-Critic with Experience Replay",
arXiv:1611.01224, §5 and Algorithm 3 of the appendix): diagonal Gaussian policies, the
stochastic dueling network (SDN) critic, Retrace and Q_opc targets with the 1/d-th-root
truncation, the SDN value target, truncated importance sampling with a sampled
bias-correction action, and the efficient trust region on the Gaussian's statistics.

A policy is f(·|φ) = N(mean, diag(σ²)) with σ = exp(log_std); its statistics are
φ = (mean, log_std), both `[..., D]`. Log-densities of an action under the behaviour policy μ
are computed from the behaviour statistics the actor stored (`mu_mean_t`, `mu_log_std_t`),
so μ can be evaluated at any action, including a fresh sample a' ~ π. Ratios are formed
from log-densities, ρ = exp(log π − log μ), with no ε (a Gaussian density is never 0).

Conventions (time-major `[T, B, ...]`, `discount_t`, `mask_t`) are those of `agents.losses`:
at a masked step (the fake auto-reset transition) every target equals its own estimate
and every loss is zero, so nothing crosses an episode boundary.

Nothing here reshapes or broadcasts silently: a state-independent log-std must be broadcast
to the mean's shape by the caller (`jnp.broadcast_to` keeps its gradient).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.losses import _checks as C
from agents.losses.policy import TrustRegionOutput, _projection_scale
from agents.losses.retrace import _retrace_core

sg = jax.lax.stop_gradient

_LOG_2PI = float(np.log(2.0 * np.pi))
_MAX_LOG_RATIO = 80.0  # exp(80) ≈ 5.5e34: finite in float32; every use truncates far below


def _check_same(names_values, ref_name, ref):
    for name, x in names_values:
        C.check_float(name, x)
        C.check_shape(name, x, jnp.shape(ref), f"like {ref_name}")


def _check_gaussian(a_name, a, mean, log_std, *, mean_name="mean_t", std_name="log_std_t"):
    C.check_float(a_name, a)
    if jnp.ndim(a) < 1:
        raise ValueError(f"{a_name} must have a trailing action axis [..., D], got shape ()")
    _check_same(((mean_name, mean), (std_name, log_std)), a_name, a)


# --------------------------------------------------------------------------- Gaussians


def gaussian_log_prob(a_t, mean_t, log_std_t):
    r"""log f(a|φ) of a diagonal Gaussian, summed over the last (action) axis:

        log f(a|φ) = Σ_i [ −½ ((a_i − mean_i)/σ_i)² − log σ_i − ½ log 2π ],  σ = exp(log_std)

    Args:
      a_t: `[..., D]`.
      mean_t: `[..., D]`, the shape of `a_t`.
      log_std_t: `[..., D]`, the shape of `a_t`.

    Returns `[...]`. Differentiable in all three (the caller stops what must not move).
    """
    _check_gaussian("a_t", a_t, mean_t, log_std_t)
    z = (a_t - mean_t) * jnp.exp(-log_std_t)
    return jnp.sum(-0.5 * jnp.square(z) - log_std_t - 0.5 * _LOG_2PI, axis=-1)


def gaussian_entropy(log_std_t):
    r"""Differential entropy of a diagonal Gaussian, Σ_i (log σ_i + ½ (1 + log 2π)), `[...]`
    from `log_std_t` `[..., D]` (it does not depend on the mean)."""
    C.check_float("log_std_t", log_std_t)
    if jnp.ndim(log_std_t) < 1:
        raise ValueError("log_std_t must have a trailing action axis [..., D], got shape ()")
    return jnp.sum(log_std_t + 0.5 * (1.0 + _LOG_2PI), axis=-1)


def gaussian_kl(mean_p, log_std_p, mean_q, log_std_q):
    r"""KL(p ‖ q) of two diagonal Gaussians, summed over the last axis:

        KL = Σ_i [ log(σ_q,i/σ_p,i) + (σ_p,i² + (mean_p,i − mean_q,i)²) / (2 σ_q,i²) − ½ ]

    All four `[..., D]` of one shape; returns `[...]`.
    """
    _check_gaussian("mean_p", mean_p, mean_p, log_std_p, mean_name="mean_p", std_name="log_std_p")
    _check_same((("mean_q", mean_q), ("log_std_q", log_std_q)), "mean_p", mean_p)
    var_ratio = jnp.exp(2.0 * (log_std_p - log_std_q))
    diff = (mean_p - mean_q) * jnp.exp(-log_std_q)
    return jnp.sum(log_std_q - log_std_p + 0.5 * (var_ratio + jnp.square(diff)) - 0.5, axis=-1)


# --------------------------------------------------------------------------- SDN critic


def sdn_q_values(v_t, adv_t, adv_samples_t):
    r"""The stochastic dueling network's estimate of Q (ACER §5.1):

        Q̃(x_t, a_t) = V(x_t) + A(x_t, a_t) − (1/n) Σ_{i=1}^{n} A(x_t, u_i),   u_i ~ π(·|x_t)

    Args:
      v_t: `[T, B]` V(x_t).
      adv_t: `[T, B]` A(x_t, a) at the action whose value is wanted.
      adv_samples_t: `[T, B, n]` A(x_t, u_i) at n ≥ 1 actions sampled from the current policy.

    Returns `[T, B]`. Plain arithmetic: gradient flows into all three inputs (the SDN trains
    V and A together through Q̃; the samples u_i themselves are the caller's constants).
    """
    T, B = C.time_batch("v_t", v_t, 2, "[T, B]")
    C.check_float("v_t", v_t)
    C.check_float("adv_t", adv_t)
    C.check_shape("adv_t", adv_t, (T, B))
    C.check_float("adv_samples_t", adv_samples_t)
    shape = C.check_rank("adv_samples_t", adv_samples_t, 3, "[T, B, n] advantages of samples")
    if shape[:2] != (T, B) or shape[2] < 1:
        raise ValueError(f"adv_samples_t has shape {shape}, expected ({T}, {B}, n) with n >= 1")
    return v_t + adv_t - jnp.mean(adv_samples_t, axis=-1)


class ContinuousRetraceOutput(NamedTuple):
    """What `continuous_retrace_targets` returns (ACER §5.1): both `[T, B]`, stop_gradient'ed."""

    q_ret: jax.Array  # [T, B] Retrace targets with c_t = λ·min(c_max, ρ_t^{1/d}) (critic)
    q_opc: jax.Array  # [T, B] the same recursion with c_t = 1 (policy gradient)
    c: jax.Array  # [T, B] the Retrace trace coefficients (0 at masked steps)


def continuous_retrace_targets(
    q_t, v_t, log_pi_t, log_mu_t, r_t, discount_t, bootstrap_value, action_dim,
    lambda_=1.0, c_max=1.0, *, mask_t=None,
):  # fmt: skip
    r"""Q_ret and Q_opc of continuous ACER (§5.1–5.2, Algorithm 3).

    With Q̃ the SDN estimate and V the SDN state value, both recursions run backwards from
    the bootstrap V(x_T):

        Q_ret(t) = r_t + d_t · [ c_{t+1} · (Q_ret(t+1) − Q̃(x_{t+1}, a_{t+1})) + V(x_{t+1}) ]
        Q_opc(t) = r_t + d_t · [          (Q_opc(t+1) − Q̃(x_{t+1}, a_{t+1})) + V(x_{t+1}) ]

    where Q(T−1) = r_{T−1} + d_{T−1}·V(x_T), and the trace coefficient is the paper's
    1/d-th-root truncation of the importance ratio ρ_t = π(a_t|x_t)/μ(a_t|x_t), d the action
    dimension:

        c_t = λ · min(c_max, ρ_t^{1/d})          (ACER: λ = 1, c_max = 1)

    Q_opc is "Retrace with the truncated importance ratio replaced with 1" (§5.2): no λ, no
    ratio. At a masked step both targets equal Q̃ there (see `agents.losses`).

    Args:
      q_t: `[T, B]` Q̃(x_t, a_t).
      v_t: `[T, B]` V(x_t).
      log_pi_t: `[T, B]` log π(a_t|x_t).
      log_mu_t: `[T, B]` log μ(a_t|x_t).
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]` γ·(1 − terminated_{t+1}).
      bootstrap_value: `[B]` V(x_T).
      action_dim: d, a Python int ≥ 1.
      lambda_: as `retrace_targets`.
      c_max: as `retrace_targets`.
      mask_t: optional `[T, B]`.

    Returns `ContinuousRetraceOutput`; all of it wrapped in `jax.lax.stop_gradient`.
    """
    T, B = C.time_batch("q_t", q_t, 2, "[T, B] Q̃(x_t, a_t)")
    for name, x in (("q_t", q_t), ("v_t", v_t), ("log_pi_t", log_pi_t), ("log_mu_t", log_mu_t),
                    ("r_t", r_t), ("discount_t", discount_t)):  # fmt: skip
        C.check_float(name, x)
        C.check_shape(name, x, (T, B))
    C.check_float("bootstrap_value", bootstrap_value)
    C.check_shape("bootstrap_value", bootstrap_value, (B,), "V(x_T) per trace")
    if isinstance(action_dim, bool) or not isinstance(action_dim, (int, np.integer)):
        raise ValueError(f"action_dim must be a Python int >= 1, got {action_dim!r}")
    if action_dim < 1:
        raise ValueError(f"action_dim must be >= 1, got {action_dim}")
    C.check_unit_interval("lambda_", lambda_)
    C.check_nonnegative("c_max", c_max)
    C.check_unit_interval("discount_t", discount_t)
    mask = C.optional_mask(mask_t, (T, B), q_t.dtype)

    log_rho = jnp.minimum(log_pi_t - log_mu_t, _MAX_LOG_RATIO)
    c = lambda_ * jnp.minimum(c_max, jnp.exp(log_rho / action_dim)) * mask
    core = jax.vmap(_retrace_core, in_axes=(1, 1, 1, 1, 1, 1, 0), out_axes=1)
    q_ret = core(q_t, v_t, c, r_t, discount_t, mask, bootstrap_value)
    q_opc = core(q_t, v_t, mask, r_t, discount_t, mask, bootstrap_value)
    return jax.lax.stop_gradient(ContinuousRetraceOutput(q_ret, q_opc, c))


def sdn_value_targets(q_t, v_t, q_ret_t, log_pi_t, log_mu_t, *, mask_t=None):
    r"""The SDN's state-value target (ACER §5.1):

        V_target(x_t) = min(1, π(a_t|x_t)/μ(a_t|x_t)) · (Q_ret(x_t, a_t) − Q̃(x_t, a_t)) + V(x_t)

    All inputs `[T, B]`. Returns `[T, B]`, wrapped in `jax.lax.stop_gradient`; V(x_t) at
    masked steps.
    """
    T, B = C.time_batch("q_t", q_t, 2, "[T, B] Q̃(x_t, a_t)")
    for name, x in (("v_t", v_t), ("q_ret_t", q_ret_t), ("log_pi_t", log_pi_t),
                    ("log_mu_t", log_mu_t)):  # fmt: skip
        C.check_float(name, x)
        C.check_shape(name, x, (T, B))
    mask = C.optional_mask(mask_t, (T, B), q_t.dtype)
    rho_bar = jnp.exp(jnp.minimum(log_pi_t - log_mu_t, 0.0))  # min(1, ρ)
    return sg(v_t + mask * rho_bar * (q_ret_t - q_t))


def sdn_value_loss(q_t, v_t, q_ret_t, log_pi_t, log_mu_t, *, mask_t=None):
    r"""The SDN critic loss of continuous ACER, per step `[T, B]`:

        ½ (Q_ret(x_t, a_t) − Q̃(x_t, a_t))² + ½ (V_target(x_t) − V(x_t))²

    with Q_ret and V_target (`sdn_value_targets`) constants. Its negative gradient is the
    paper's critic update (Algorithm 3):

        (Q_ret − Q̃) ∇Q̃ + min(1, ρ_t) (Q_ret − Q̃) ∇V

    Gradient flows into `q_t` (Q̃(x_t, a_t)) and `v_t` (V(x_t)) only; the target, the
    log-densities and the ratio are stopped. Masked steps give 0.
    """
    T, B = C.time_batch("q_t", q_t, 2, "[T, B] Q̃(x_t, a_t)")
    C.check_float("q_t", q_t)
    v_target = sdn_value_targets(q_t, v_t, q_ret_t, log_pi_t, log_mu_t, mask_t=mask_t)
    mask = C.optional_mask(mask_t, (T, B), q_t.dtype)
    return 0.5 * mask * (jnp.square(sg(q_ret_t) - q_t) + jnp.square(v_target - v_t))


# --------------------------------------------------------------------------- policy


def acer_continuous_policy_loss(
    mean_t, log_std_t, a_t, mu_mean_t, mu_log_std_t, q_opc_t, v_t, a_prime_t, q_prime_t,
    c=10.0, *, mask_t=None,
):  # fmt: skip
    r"""Continuous ACER's policy loss: truncated importance sampling with a sampled bias
    correction (§5.2). With ρ_t(a) = f(a|φ_t)/μ(a|x_t), a'_t ~ f(·|φ_t) and Q̃ the SDN
    estimate, the gradient of this loss with respect to the statistics φ_t = (mean_t,
    log_std_t) is minus

        ĝ_t = min(c, ρ_t(a_t)) ∇_φ log f(a_t|φ_t) (Q_opc(x_t, a_t) − V(x_t))
            + [1 − c/ρ_t(a'_t)]_+ (Q̃(x_t, a'_t) − V(x_t)) ∇_φ log f(a'_t|φ_t)

    The weights, Q_opc, Q̃, V and the actions (a' is a sample: a score-function estimate, not
    a reparameterised one) are constants; only mean_t and log_std_t carry gradient. The bias
    weight is computed as max(0, 1 − c·exp(log μ(a') − log f(a'))), never dividing by ρ.

    Args:
      mean_t: `[T, B, D]` the current policy's mean.
      log_std_t: `[T, B, D]` the current policy's log standard deviation.
      a_t: `[T, B, D]` the actions taken (the unclipped Gaussian samples).
      mu_mean_t: `[T, B, D]` the behaviour policy's mean.
      mu_log_std_t: `[T, B, D]` the behaviour policy's log standard deviation.
      q_opc_t: `[T, B]` Q_opc(x_t, a_t).
      v_t: `[T, B]` V(x_t).
      a_prime_t: `[T, B, D]` a' ~ f(·|φ_t).
      q_prime_t: `[T, B]` Q̃(x_t, a'_t).
      c: truncation constant.
      mask_t: optional `[T, B]`.

    Returns `[T, B]` per-step loss.
    """
    T, B = C.time_batch("mean_t", mean_t, 3, "[T, B, D]")
    D = jnp.shape(mean_t)[2]
    for name, x in (("log_std_t", log_std_t), ("a_t", a_t), ("mu_mean_t", mu_mean_t),
                    ("mu_log_std_t", mu_log_std_t), ("a_prime_t", a_prime_t)):  # fmt: skip
        C.check_float(name, x)
        C.check_shape(name, x, (T, B, D), "like mean_t")
    for name, x in (("q_opc_t", q_opc_t), ("v_t", v_t), ("q_prime_t", q_prime_t)):
        C.check_float(name, x)
        C.check_shape(name, x, (T, B))
    C.check_float("mean_t", mean_t)
    C.check_nonnegative("c", c)
    mask = C.optional_mask(mask_t, (T, B), mean_t.dtype)

    mu_mean, mu_log_std, v = sg(mu_mean_t), sg(mu_log_std_t), sg(v_t)
    a, a_prime = sg(a_t), sg(a_prime_t)
    log_f_a = gaussian_log_prob(a, mean_t, log_std_t)
    log_f_ap = gaussian_log_prob(a_prime, mean_t, log_std_t)
    log_mu_a = gaussian_log_prob(a, mu_mean, mu_log_std)
    log_mu_ap = gaussian_log_prob(a_prime, mu_mean, mu_log_std)
    # min(c, ρ) = exp(min(log c, log ρ)), computed without overflow.
    rho_a = jnp.exp(jnp.minimum(sg(log_f_a) - log_mu_a, _MAX_LOG_RATIO))
    term_a = sg(jnp.minimum(c, rho_a) * (q_opc_t - v)) * log_f_a
    # [1 − c/ρ']_+ with c/ρ' = c·μ(a')/f(a').
    inv_rho_ap = jnp.exp(jnp.minimum(log_mu_ap - sg(log_f_ap), _MAX_LOG_RATIO))
    bc_weight = jnp.maximum(0.0, 1.0 - c * inv_rho_ap)
    term_bc = sg(bc_weight * (q_prime_t - v)) * log_f_ap
    return -mask * (term_a + term_bc)


def gaussian_trust_region_policy_loss(
    policy_loss_fn: Callable[[jax.Array, jax.Array], jax.Array],
    mean_t, log_std_t, avg_mean_t, avg_log_std_t, delta,
) -> TrustRegionOutput:  # fmt: skip
    r"""ACER's efficient trust region (§3.3, eq. 12–13) on a Gaussian's statistics (§5.2).

    The statistics are φ = (mean, log_std), concatenated to `[..., 2D]`. With
    g = −∂ℓ/∂φ (the ascent direction of the per-sample loss ℓ = `policy_loss_fn`) and

        k = ∂ KL(f(·|φ_avg) ‖ f(·|φ)) / ∂φ:
            ∂/∂mean_i    = (mean_i − mean_avg,i) / σ_i²
            ∂/∂log σ_i   = 1 − (σ_avg,i² + (mean_i − mean_avg,i)²) / σ_i²

    it projects z* = g − max(0, (kᵀg − δ)/‖k‖²)·k (`trust_region_projection`) and returns
    the surrogate −stop_gradient(z*)ᵀφ, whose gradient with respect to the network's
    parameters back-propagates z* (eq. 13). φ_avg comes from the Polyak-averaged network
    and carries no gradient.

    Args:
      policy_loss_fn: `(mean, log_std) [..., D] -> [...]`; each sample's loss may depend only
        on its own statistics.
      mean_t: `[..., D]` the current mean (carries gradient).
      log_std_t: `[..., D]` the current log standard deviation (carries gradient).
      avg_mean_t: `[..., D]` the averaged policy's mean (no gradient).
      avg_log_std_t: `[..., D]` the averaged policy's log standard deviation (no gradient).
      delta: δ ≥ 0.

    Returns `TrustRegionOutput` with `g` and `k` over the concatenated `[..., 2D]`.
    """
    _check_gaussian("mean_t", mean_t, mean_t, log_std_t)
    _check_same((("avg_mean_t", avg_mean_t), ("avg_log_std_t", avg_log_std_t)), "mean_t", mean_t)
    C.check_nonnegative("delta", delta)
    mean, log_std = sg(mean_t), sg(log_std_t)
    g_mean, g_log_std = jax.grad(lambda m, s: -jnp.sum(policy_loss_fn(m, s)), argnums=(0, 1))(
        mean, log_std
    )
    g = jnp.concatenate([g_mean, g_log_std], axis=-1)
    avg_mean, avg_log_std = sg(avg_mean_t), sg(avg_log_std_t)
    inv_var = jnp.exp(-2.0 * log_std)
    diff = mean - avg_mean
    k_mean = diff * inv_var
    k_log_std = 1.0 - (jnp.exp(2.0 * avg_log_std) + jnp.square(diff)) * inv_var
    k = jnp.concatenate([k_mean, k_log_std], axis=-1)
    scale = _projection_scale(g, k, delta)
    z = sg(g - scale[..., None] * k)
    phi = jnp.concatenate([mean_t, log_std_t], axis=-1)
    return TrustRegionOutput(loss=-jnp.sum(z * phi, axis=-1), g=g, k=k, scale=scale)
