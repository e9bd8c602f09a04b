"""State-value targets: V-trace, λ-returns, n-step returns and GAE.

All take `v_t` = V(x_t) for t = 0..T−1 `[T, B]` and `bootstrap_value` = V(x_T) `[B]`, and
follow the masking convention of `agents.losses`: at a step with mask_t = 0 the target equals
V(x_t), so nothing crosses the fake auto-reset transition.

Checks, in every function: shapes and dtypes always; discount_t ∈ [0, 1] and λ ∈ [0, 1] (and
V-trace's clipping levels ≥ 0) when they are Python or NumPy values, not traced ones. Under
`agents.losses.checked` the same ranges are checked for jax Arrays too, and V-trace's ρ_t must
be finite and ≥ 0; otherwise finite values are the caller's duty.

References:
  Espeholt et al. (2018), IMPALA, arXiv:1802.01561, eq. 1 (V-trace).
  Sutton & Barto (2018), Reinforcement Learning: An Introduction, §7.1 and §12.1.
  Schulman et al. (2016), GAE, arXiv:1506.02438, eq. 16.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp

from agents.losses import _checks as C


def _check_value_inputs(r_t, discount_t, v_t, bootstrap_value, mask_t):
    T, B = C.time_batch("r_t", r_t, 2, "[T, B]")
    C.check_float("r_t", r_t)
    C.check_float("discount_t", discount_t)
    C.check_shape("discount_t", discount_t, (T, B))
    C.check_float("v_t", v_t)
    C.check_shape("v_t", v_t, (T, B), "V(x_t) for t = 0..T-1")
    C.check_float("bootstrap_value", bootstrap_value)
    C.check_shape("bootstrap_value", bootstrap_value, (B,), "V(x_T) per trace")
    C.check_unit_interval("discount_t", discount_t)
    return C.optional_mask(mask_t, (T, B), v_t.dtype)


def _next_values(v_t, bootstrap_value):
    return jnp.concatenate([v_t[1:], bootstrap_value[None]], axis=0)


def _reverse_scan(step, init, xs):
    """Reverse-time scan over the leading axis (the batch rides along in the carry)."""
    _, ys = jax.lax.scan(step, init, xs, reverse=True)
    return ys


class VTraceOutput(NamedTuple):
    """What `vtrace` returns (IMPALA eq. 1 and §4.2): both `[T, B]`, stop_gradient'ed."""

    vs: jax.Array  # [T, B] V-trace targets v_s
    pg_advantages: jax.Array  # [T, B] ρ_pg,s · (r_s + γ_s v_{s+1} − V(x_s))


def vtrace(
    v_t,
    bootstrap_value,
    r_t,
    discount_t,
    rho_t,
    lambda_=1.0,
    clip_rho=1.0,
    clip_c=1.0,
    clip_pg_rho=1.0,
    *,
    mask_t=None,
):
    r"""V-trace targets and policy-gradient advantages (IMPALA eq. 1 and §4.2).

    With ρ̄_s = min(clip_rho, ρ_s), c_s = λ·min(clip_c, ρ_s) and
    δ_s = ρ̄_s (r_s + γ_s V(x_{s+1}) − V(x_s)):

        v_s − V(x_s) = δ_s + γ_s c_s (v_{s+1} − V(x_{s+1})),   v_T = V(x_T)
        A_s = min(clip_pg_rho, ρ_s) · (r_s + γ_s v_{s+1} − V(x_s))

    Args:
      v_t: `[T, B]` V(x_t).
      bootstrap_value: `[B]` V(x_T).
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]`.
      rho_t: `[T, B]` π(a_t|x_t)/μ(a_t|x_t).
      lambda_: λ of the trace coefficients c_s = λ·min(clip_c, ρ_s).
      clip_rho: ρ̄, the truncation of ρ in δ_s (1 in IMPALA).
      clip_c: c̄, the truncation of ρ in the trace coefficients.
      clip_pg_rho: the truncation of ρ in the policy-gradient advantage.
      mask_t: optional `[T, B]`.

    Returns:
      `VTraceOutput(vs, pg_advantages)`, both `[T, B]` and both stop_gradient'ed. Masked steps
      have vs = V(x_s) and a zero advantage.
    """
    mask = _check_value_inputs(r_t, discount_t, v_t, bootstrap_value, mask_t)
    C.check_float("rho_t", rho_t)
    C.check_shape("rho_t", rho_t, v_t.shape)
    C.check_unit_interval("lambda_", lambda_)
    for name, clip in (("clip_rho", clip_rho), ("clip_c", clip_c), ("clip_pg_rho", clip_pg_rho)):
        C.check_nonnegative(name, clip)
    C.debug_check_ratio("rho_t", rho_t)
    v_next = _next_values(v_t, bootstrap_value)
    rho_bar = jnp.minimum(clip_rho, rho_t)
    c = lambda_ * jnp.minimum(clip_c, rho_t)
    delta = rho_bar * (r_t + discount_t * v_next - v_t)

    def step(acc, xs):
        delta_s, d_s, c_s, m_s = xs
        acc = m_s * (delta_s + d_s * c_s * acc)
        return acc, acc

    corrections = _reverse_scan(step, jnp.zeros_like(bootstrap_value), (delta, discount_t, c, mask))
    vs = v_t + corrections
    vs_next = _next_values(vs, bootstrap_value)
    pg_adv = mask * jnp.minimum(clip_pg_rho, rho_t) * (r_t + discount_t * vs_next - v_t)
    return VTraceOutput(jax.lax.stop_gradient(vs), jax.lax.stop_gradient(pg_adv))


def lambda_returns(r_t, discount_t, v_t, bootstrap_value, lambda_=1.0, *, mask_t=None):
    r"""λ-returns (Sutton & Barto §12.1), `[T, B]`, stop_gradient'ed.

        G_t = r_t + γ_t [ (1 − λ) V(x_{t+1}) + λ G_{t+1} ],   G_T = V(x_T)

    λ = 1 gives the Monte-Carlo return bootstrapped at T; λ = 0 the one-step TD target.
    `lambda_` may be a scalar or a `[T, B]` array.
    """
    mask = _check_value_inputs(r_t, discount_t, v_t, bootstrap_value, mask_t)
    if jnp.ndim(lambda_) != 0:
        C.check_shape("lambda_", lambda_, v_t.shape, "a scalar or one λ per step [T, B]")
    C.check_unit_interval("lambda_", lambda_)
    lam = jnp.broadcast_to(jnp.asarray(lambda_, v_t.dtype), v_t.shape)
    v_next = _next_values(v_t, bootstrap_value)

    def step(g_next, xs):
        r, d, vn, lm, m, v = xs
        g = r + d * ((1.0 - lm) * vn + lm * g_next)
        g = jnp.where(m > 0, g, v)
        return g, g

    g = _reverse_scan(step, bootstrap_value, (r_t, discount_t, v_next, lam, mask, v_t))
    return jax.lax.stop_gradient(g)


def n_step_returns(r_t, discount_t, v_t, bootstrap_value, n, *, mask_t=None):
    r"""n-step bootstrapped returns (Sutton & Barto §7.1), `[T, B]`, stop_gradient'ed.

        G_t = Σ_{k=0}^{m−1} (Π_{j<k} γ_{t+j}) r_{t+k} + (Π_{j<m} γ_{t+j}) V(x_{t+m})

    with m = min(n, T − t), shortened further to stop at the first masked step t+k (k ≥ 1),
    which bootstraps from V(x_{t+k}). `n` is a static Python int ≥ 1.
    """
    mask = _check_value_inputs(r_t, discount_t, v_t, bootstrap_value, mask_t)
    try:
        n = operator.index(n)  # Python or NumPy integer; it sets the (static) loop length
    except TypeError:
        raise ValueError(f"n must be an integer >= 1, got {n!r}") from None
    if n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    T = r_t.shape[0]
    zeros = jnp.zeros((n, *r_t.shape[1:]), r_t.dtype)
    values = jnp.concatenate([v_t, bootstrap_value[None], zeros[:-1]], axis=0)  # V(x_{t}), t<T+n
    r_pad = jnp.concatenate([r_t, zeros], axis=0)
    d_pad = jnp.concatenate([discount_t, zeros], axis=0)
    m_pad = jnp.concatenate([mask, zeros], axis=0)  # steps ≥ T are never taken
    g = jnp.zeros_like(v_t)
    disc = jnp.ones_like(v_t)
    alive = jnp.ones_like(v_t)
    for k in range(n):
        take = alive * m_pad[k : k + T]
        # Stop here (k ≥ 1) or at t+k = T: bootstrap from V(x_{t+k}).
        g = g + alive * (1.0 - m_pad[k : k + T]) * disc * values[k : k + T]
        g = g + take * disc * r_pad[k : k + T]
        disc = disc * jnp.where(take > 0, d_pad[k : k + T], 1.0)
        alive = take
    g = g + alive * disc * values[n : n + T]
    # Masked step t itself: the target is V(x_t) (the k = 0 bootstrap above gives exactly that).
    return jax.lax.stop_gradient(g)


def gae(r_t, discount_t, v_t, bootstrap_value, lambda_=0.95, *, mask_t=None):
    r"""Generalised advantage estimates (GAE eq. 16), `[T, B]`, stop_gradient'ed.

        δ_t = r_t + γ_t V(x_{t+1}) − V(x_t),   A_t = δ_t + γ_t λ A_{t+1},   A_T = 0

    Masked steps have A_t = 0. A_t + V(x_t) equals `lambda_returns` with the same λ.
    """
    mask = _check_value_inputs(r_t, discount_t, v_t, bootstrap_value, mask_t)
    C.check_unit_interval("lambda_", lambda_)
    delta = r_t + discount_t * _next_values(v_t, bootstrap_value) - v_t

    def step(a_next, xs):
        dl, d, m = xs
        a = m * (dl + d * lambda_ * a_next)
        return a, a

    adv = _reverse_scan(step, jnp.zeros_like(bootstrap_value), (delta, discount_t, mask))
    return jax.lax.stop_gradient(adv)
