"""Categorical (C51-style) distributional losses: the Cramér projection and Reactor's
distributional Retrace.

References:
  Bellemare, Dabney, Munos (2017), "A Distributional Perspective on RL" (C51),
  arXiv:1707.06887, Algorithm 1.
  Rowland et al. (2018), "An Analysis of Categorical Distributional RL", arXiv:1802.08163,
  §3 (the projection is the L2/Cramér projection onto the support).
  Gruslys et al. (2018), The Reactor, arXiv:1704.04651, §3.2 (distributional Retrace).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agents.losses import _checks as C
from agents.losses.retrace import _take, trace_coefficients


def _hat_weights(z, z_q):
    """Weights `[..., Kq, Kp]` of the triangular kernels of support z_q at the points z."""
    z = jnp.clip(z, z_q[0], z_q[-1])
    gap_right = jnp.concatenate([z_q[1:] - z_q[:-1], jnp.ones((1,), z_q.dtype)])
    gap_left = jnp.concatenate([jnp.ones((1,), z_q.dtype), z_q[1:] - z_q[:-1]])
    # Column vectors `[1, ..., 1, Kq, 1]` of z's rank + 1: broadcast explicitly, no promotion.
    col = lambda x: jnp.reshape(x, (1,) * (z.ndim - 1) + (-1, 1))  # noqa: E731
    diff = z[..., None, :] - col(z_q)  # z_j − z_q[i]
    w = jnp.where(diff >= 0, 1.0 - diff / col(gap_right), 1.0 + diff / col(gap_left))
    return jnp.clip(w, 0.0, 1.0)


def categorical_projection(z_p, probs, z_q):
    r"""Project a categorical distribution onto a fixed, sorted support (C51 Alg. 1).

    Each mass p_j at z_j (first clipped into [z_q[0], z_q[-1]]) is split between its two
    neighbouring atoms z_q[i] ≤ z_j ≤ z_q[i+1] in proportion to closeness:

        q_i = Σ_j p_j · [1 − |ẑ_j − z_q[i]| / Δ_i(ẑ_j)]_+ ,   ẑ_j = clip(z_j, z_q[0], z_q[-1])

    where Δ_i is the gap to the neighbour on ẑ_j's side. This is the Cramér (L2) projection;
    it preserves total mass, and the mean when no mass is clipped. Works with non-uniform
    supports and with signed "probabilities" (it is linear in `probs`).

    Args:
      z_p: `[..., Kp]` source atoms.
      probs: `[..., Kp]` their masses.
      z_q: `[Kq]` sorted support.

    Returns:
      `[..., Kq]` projected masses.

    Checks: shapes and dtypes always; z_q finite and strictly increasing when it is a NumPy
    value (not a traced one). Under `agents.losses.checked` also for jax Arrays, and `probs`
    must be finite; otherwise finite inputs are the caller's duty.
    """
    C.check_float("z_p", z_p)
    C.check_float("probs", probs)
    C.check_float("z_q", z_q)
    if jnp.ndim(z_q) != 1:
        raise ValueError(f"z_q must be a 1-D support [Kq], got shape {jnp.shape(z_q)}")
    if jnp.ndim(z_p) < 1:
        raise ValueError("z_p must have a trailing atom axis [..., Kp]")
    C.check_shape("probs", probs, jnp.shape(z_p), "masses of the atoms z_p")
    C.check_support("z_q", z_q)
    C.debug_check_finite("probs", probs)
    return jnp.einsum("...ij,...j->...i", _hat_weights(z_p, z_q), probs)


HORIZON_BLOCKS = 8  # rolled loops of `_dist_retrace_core` (compile time against work)


def _dist_retrace_core(za, vd, c, r, d, mask, atoms):
    """One sequence. za `[T, K]` Z(x_t, a_t); vd `[T+1, K]` Σ_b π(b|x_t) Z(x_t, b); c, r, d,
    mask `[T]`. Returns `[T, K]`.

    Loops over the horizon n = s − t, vectorised over t: the component (t, s) has weight
    C_{t,s} = Π_{u=t+1}^{s} c_u, shifted atoms G_{t,s} + Γ_{t,s}·z and masses
    vd[s+1] − c_{s+1}·za[s+1] (the last term only for s+1 ≤ T−1). Only t ≤ T − 1 − n has a
    component of horizon n, so the horizons run in up to `HORIZON_BLOCKS` rolled loops, each
    over the start points its first horizon has: about (1 + 1/blocks)/2 of the T² projections
    of one loop over every (t, n), in the same order of summation (the same floats), at the
    compile time of a few loops. (Measured 2026-11-28 on 2 Zen 5 vCPUs, T = 32, B = 4, K = 51,
    jitted: 1.04 against 1.81 ms, medians of 15 alternated rounds; unrolling every horizon was
    about 20% faster still but compiled in 2.5 s at T = 32 and 19 s at T = 128.)
    """
    T = za.shape[0]
    zero_k = jnp.zeros_like(za)  # derived from inputs: keeps shard_map's varying type
    pad = lambda x: jnp.concatenate([x, jnp.zeros((T, *x.shape[1:]), x.dtype)], axis=0)  # noqa: E731
    r_p, d_p, c_p = pad(r), pad(d), pad(c)
    za_p = pad(za)
    vd_p = jnp.concatenate([vd, zero_k], axis=0)  # vd_p[s] valid for s ≤ T
    carry = (jnp.ones_like(r), jnp.zeros_like(r), jnp.ones_like(r))  # weight, ret, disc
    target = zero_k
    size = -(-T // min(HORIZON_BLOCKS, T))  # horizons per loop
    for first in range(0, T, size):
        m = T - first  # the start points t ≤ T − 1 − first
        t_idx = jnp.arange(m)

        def body(carry, n, t_idx=t_idx):
            weight, ret, disc, acc = carry  # [m] each, acc [m, K]
            s = t_idx + n  # the last reward index of this component
            valid = (s <= T - 1).astype(za.dtype)
            ret = ret + disc * r_p[s]
            disc = disc * d_p[s]
            c_next = c_p[s + 1]  # 0 beyond T−1 (padding), so no Q term after the bootstrap
            masses = vd_p[s + 1] - c_next[:, None] * za_p[s + 1]
            atoms_n = ret[:, None] + disc[:, None] * atoms[None, :]
            proj = jnp.einsum("tij,tj->ti", _hat_weights(atoms_n, atoms), masses)
            acc = acc + (valid * weight)[:, None] * proj
            weight = weight * c_next
            return (weight, ret, disc, acc), None

        start = (*(x[:m] for x in carry), target[:m])
        (*carry, acc), _ = jax.lax.scan(body, start, jnp.arange(first, min(first + size, T)))
        target = target.at[:m].set(acc)
    return jnp.where(mask[:, None] > 0, target, za)


def distributional_retrace_targets(
    q_probs_t,
    pi_t,
    mu_t,
    a_t,
    r_t,
    discount_t,
    bootstrap_probs,
    atoms,
    lambda_=1.0,
    *,
    mask_t=None,
):
    r"""Reactor's distributional Retrace target for Z(x_t, a_t), projected on `atoms`.

    Retrace written as a mixture of n-step backups (Gruslys et al. 2018, §3.2). With
    c_u = λ·min(1, π(a_u|x_u)/(μ(a_u|x_u) + ε)) (ε = `MU_EPSILON`), C_{t,s} = Π_{u=t+1}^{s} c_u,
    G_{t,s} = Σ_{u=t}^{s} (Π_{v=t}^{u−1} γ_v) r_u and Γ_{t,s} = Π_{v=t}^{s} γ_v:

        Z_ret(x_t, a_t) = Σ_{s=t}^{T−1} C_{t,s} · Σ_b α_{s+1,b} · Z(x_{s+1}, b) ∘ f_{t,s}
        f_{t,s}(z) = G_{t,s} + Γ_{t,s} z   (the n-step shift of the atoms)
        α_{s+1,b} = π(b|x_{s+1}) − c_{s+1}·1{b = a_{s+1}}   (the c-term absent for s+1 = T)

    and the target is its projection `categorical_projection` onto `atoms`. The weights sum to
    one but α can be negative, so targets are signed mixtures (the Reactor paper notes this);
    the mean of the target equals `retrace_targets` (c_max = 1) on the expected Q values
    whenever no mass is clipped at the support's edges.

    Args:
      q_probs_t: `[T, B, A, K]` Z(x_t, ·) probabilities.
      pi_t: `[T, B, A]` π(·|x_t).
      mu_t: `[T, B, A]` μ(·|x_t).
      a_t: `[T, B]` actions.
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]`.
      bootstrap_probs: `[B, K]` Σ_b π(b|x_T) Z(x_T, b).
      atoms: `[K]` sorted support.
      lambda_: trace decay λ of c_u.
      mask_t: optional `[T, B]`; at masked steps the target is Z(x_t, a_t) itself.

    Returns:
      `[T, B, K]` target masses, stop_gradient'ed.

    Checks: shapes and dtypes always; λ ∈ [0, 1], discount_t ∈ [0, 1] and `atoms` finite and
    strictly increasing when they are Python or NumPy values (not traced ones). The caller's
    duty, checked only under `agents.losses.checked`: a_t ∈ [0, A), π, μ, Z(x_t, ·) and
    `bootstrap_probs` finite, non-negative and summing to 1.
    """
    T, B = C.time_batch("q_probs_t", q_probs_t, 4, "[T, B, A, K]")
    A, K = q_probs_t.shape[2:]
    C.check_float("q_probs_t", q_probs_t)
    C.check_trace_inputs(T, B, A, pi_t, mu_t, a_t, r_t, discount_t)
    C.check_float("bootstrap_probs", bootstrap_probs)
    C.check_shape("bootstrap_probs", bootstrap_probs, (B, K))
    C.check_float("atoms", atoms)
    C.check_shape("atoms", atoms, (K,), "the fixed support")
    C.check_unit_interval("discount_t", discount_t)
    C.check_support("atoms", atoms)
    C.debug_check_trace_data(A, pi_t, mu_t, a_t)
    C.debug_check_probs("q_probs_t", q_probs_t)
    C.debug_check_probs("bootstrap_probs", bootstrap_probs)
    mask = C.optional_mask(mask_t, (T, B), q_probs_t.dtype)

    za = jnp.take_along_axis(q_probs_t, a_t[..., None, None].astype(jnp.int32), axis=2)[:, :, 0]
    vd = jnp.einsum("tba,tbak->tbk", pi_t, q_probs_t)
    vd = jnp.concatenate([vd, bootstrap_probs[None]], axis=0)
    c = trace_coefficients(_take(pi_t, a_t), _take(mu_t, a_t), lambda_, 1.0, mask)
    target = jax.vmap(_dist_retrace_core, in_axes=(1, 1, 1, 1, 1, 1, None), out_axes=1)(
        za, vd, c, r_t, discount_t, mask, atoms
    )
    return jax.lax.stop_gradient(target)


def categorical_cross_entropy(target_probs_t, logits_t, *, mask_t=None):
    r"""Cross-entropy −Σ_k p_k log q_k(θ) between target masses and predicted logits, `[T, B]`.

    The loss for the distributional Retrace critic: `target_probs_t` `[T, B, K]` from
    `distributional_retrace_targets` (stop_gradient'ed here again), `logits_t` `[T, B, K]` the
    predicted logits of Z(x_t, a_t). Masked steps contribute zero. Checks: shapes and dtypes;
    under `agents.losses.checked`, `target_probs_t` must be finite (it may be signed).
    """
    T, B = C.time_batch("logits_t", logits_t, 3, "[T, B, K]")
    C.check_float("logits_t", logits_t)
    C.check_float("target_probs_t", target_probs_t)
    C.check_shape("target_probs_t", target_probs_t, jnp.shape(logits_t))
    C.debug_check_finite("target_probs_t", target_probs_t)
    mask = C.optional_mask(mask_t, (T, B), logits_t.dtype)
    log_q = jax.nn.log_softmax(logits_t, axis=-1)
    return -mask * jnp.sum(jax.lax.stop_gradient(target_probs_t) * log_q, axis=-1)
