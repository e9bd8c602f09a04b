"""Retrace targets and the ACER critic loss.

References:
  Munos, Stepleton, Harutyunyan, Bellemare (2016), "Safe and efficient off-policy
  reinforcement learning", arXiv:1606.02647.
  Wang et al. (2017), "Sample Efficient Actor-Critic with Experience Replay" (ACER),
  arXiv:1611.01224, eq. 5.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agents.losses import _checks as C

MU_EPSILON = 1e-8
"""ε added to the behaviour probability in every importance ratio: ρ = π / (μ + ε).

With ε > 0 a ratio never divides by zero: π = μ = 0 (an action the behaviour policy could not
take, e.g. a masked one, at a fake auto-reset step) gives ρ = 0 instead of NaN, and π > 0 =
μ gives a large finite ρ that the truncations min(c, ρ) then cap. rlax guards its Retrace
ratio the same way (`rlax.retrace`, `pi_a_t / (mu_t + eps)` with `eps=1e-8`). For μ ≥ 1e-3,
far above anything a behaviour policy with exploration produces, the relative change of ρ is
at most 1e-5. Used by `trace_coefficients` (so `retrace_targets` and
`distributional_retrace_targets`), `acer_policy_loss` and `beta_loo_policy_loss`.
"""


def _take(x, a):
    """x[..., a] for x `[T, B, A]` and integer a `[T, B]`."""
    return jnp.take_along_axis(x, a[..., None].astype(jnp.int32), axis=-1)[..., 0]


def _importance_ratio(pi, mu):
    """ρ = π / (μ + ε) with ε = `MU_EPSILON`, elementwise."""
    return pi / (mu + MU_EPSILON)


def trace_coefficients(pi_a_t, mu_a_t, lambda_, c_max, mask_t):
    """c_t = λ·min(c_max, π(a_t|x_t)/(μ(a_t|x_t) + ε)), zeroed at masked (auto-reset) steps.

    ε is `MU_EPSILON`. Elementwise over arrays of one shape. Checks: λ ∈ [0, 1] and c_max ≥ 0
    when they are Python or NumPy values; under `checked`, also for jax Arrays, and π(a_t|x_t),
    μ(a_t|x_t) finite in [0, 1].
    """
    C.check_unit_interval("lambda_", lambda_)
    C.check_nonnegative("c_max", c_max)
    C.debug_check_probs("pi_a_t", pi_a_t, normalised=False)
    C.debug_check_probs("mu_a_t", mu_a_t, normalised=False)
    return lambda_ * jnp.minimum(c_max, _importance_ratio(pi_a_t, mu_a_t)) * mask_t


def _retrace_core(q_a, v, c, r, d, mask, bootstrap_value):
    """Single-sequence recursion over `[T]` arrays (vmapped over the batch by the caller).

    Initial scan carries are derived from the inputs (`zeros_like`), so that inside
    `shard_map` they carry the inputs' device-varying type and the scan type-checks.
    """
    v_next = jnp.concatenate([v[1:], bootstrap_value[None]])

    def step(carry, xs):
        q_a_t, c_t, r_t, d_t, v_next_t, m_t = xs
        q_ret = r_t + d_t * (carry + v_next_t)
        # Convention: at a masked step the target is the estimate itself, so no correction
        # crosses the fake auto-reset transition and the critic loss there is zero.
        q_ret = jnp.where(m_t > 0, q_ret, q_a_t)
        return c_t * (q_ret - q_a_t), q_ret

    _, q_ret = jax.lax.scan(
        step, jnp.zeros_like(q_a[0]), (q_a, c, r, d, v_next, mask), reverse=True
    )
    return q_ret


def retrace_targets(
    q_t, pi_t, mu_t, a_t, r_t, discount_t, bootstrap_value, lambda_=1.0, c_max=1.0, *, mask_t=None
):
    r"""Retrace targets Q_ret(x_t, a_t) for a batch of traces (ACER eq. 5).

    With V(x) = Σ_a π(a|x) Q(x, a) and c_t = λ·min(c_max, π(a_t|x_t)/(μ(a_t|x_t) + ε)), ε =
    `MU_EPSILON`:

        Q_ret(T-1) = r_{T-1} + d_{T-1} · V(x_T)
        Q_ret(t)   = r_t + d_t · [ c_{t+1} · (Q_ret(t+1) − Q(x_{t+1}, a_{t+1})) + V(x_{t+1}) ]

    Args:
      q_t: `[T, B, A]` Q(x_t, ·).
      pi_t: `[T, B, A]` target-policy probabilities π(·|x_t).
      mu_t: `[T, B, A]` behaviour-policy probabilities μ(·|x_t).
      a_t: `[T, B]` integer actions.
      r_t: `[T, B]` float rewards.
      discount_t: `[T, B]` γ·(1 − terminated_{t+1}).
      bootstrap_value: `[B]` V(x_T).
      lambda_: trace decay λ.
      c_max: truncation level of the importance weights (1 in Retrace).
      mask_t: optional `[T, B]`, 0 at the fake auto-reset step (see `agents.losses`).

    Returns:
      `[T, B]` targets. They carry no gradient: the whole output is wrapped in
      `jax.lax.stop_gradient`, so differentiating a loss built on them only moves Q(x_t, a_t).

    Checks: shapes and dtypes always; λ ∈ [0, 1], c_max ≥ 0 and discount_t ∈ [0, 1] when they
    are Python or NumPy values (not traced ones). The caller's duty, checked only under
    `agents.losses.checked`: a_t ∈ [0, A), π and μ finite, non-negative and summing to 1.
    """
    T, B = C.time_batch("q_t", q_t, 3, "[T, B, A]")
    A = q_t.shape[2]
    C.check_float("q_t", q_t)
    C.check_trace_inputs(T, B, A, pi_t, mu_t, a_t, r_t, discount_t)
    C.check_float("bootstrap_value", bootstrap_value)
    C.check_shape("bootstrap_value", bootstrap_value, (B,), "V(x_T) per trace")
    C.check_unit_interval("discount_t", discount_t)
    C.debug_check_trace_data(A, pi_t, mu_t, a_t)
    mask = C.optional_mask(mask_t, (T, B), q_t.dtype)

    q_a = _take(q_t, a_t)
    v = jnp.sum(pi_t * q_t, axis=-1)
    c = trace_coefficients(_take(pi_t, a_t), _take(mu_t, a_t), lambda_, c_max, mask)
    q_ret = jax.vmap(_retrace_core, in_axes=(1, 1, 1, 1, 1, 1, 0), out_axes=1)(
        q_a, v, c, r_t, discount_t, mask, bootstrap_value
    )
    return jax.lax.stop_gradient(q_ret)


def acer_value_loss(q_t, a_t, q_ret_t, *, mask_t=None):
    r"""ACER critic loss ½·(Q_ret(x_t, a_t) − Q(x_t, a_t))², per step `[T, B]`.

    `q_ret_t` is treated as a constant (stop_gradient), so the gradient with respect to
    Q(x_t, a_t) is −(Q_ret − Q). Masked steps contribute zero.

    Checks: shapes and dtypes always. The caller's duty, checked only under
    `agents.losses.checked`: a_t ∈ [0, A).
    """
    T, B = C.time_batch("q_t", q_t, 3, "[T, B, A]")
    C.check_float("q_t", q_t)
    C.check_int("a_t", a_t)
    C.check_shape("a_t", a_t, (T, B))
    C.check_float("q_ret_t", q_ret_t)
    C.check_shape("q_ret_t", q_ret_t, (T, B))
    C.debug_check_actions("a_t", a_t, q_t.shape[2])
    mask = C.optional_mask(mask_t, (T, B), q_t.dtype)
    td = jax.lax.stop_gradient(q_ret_t) - _take(q_t, a_t)
    return 0.5 * mask * jnp.square(td)
