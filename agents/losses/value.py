"""Value-based losses: n-step (double) Q-learning targets, with R2D2's value rescaling, their
categorical (C51) counterparts, and the Huber and cross-entropy losses that use them.

Targets follow the layout of `n_step_returns`: Q values at x_0..x_{T−1} (`[T, B, A]`) and at
x_T (`[B, A]`, the bootstrap), rewards and discounts `[T, B]`, an optional `[T, B]` mask. The
n-step target of step t bootstraps from x_{t+n}; it is cut short at the trace end (x_T) and at
the first masked step t+k (k ≥ 1), where it bootstraps from x_{t+k}, the final observation of
the episode. A termination inside the window zeroes the discount (nothing after it counts); a
truncation keeps γ and bootstraps from the final observation. At a masked step itself the
target is the bootstrap value of x_t (meaningless): the losses here take the same mask and
give zero there.

References:
  Mnih et al. (2015), DQN, Nature 518 (the Huber loss on the TD error, "error clipping").
  van Hasselt, Guez, Silver (2016), "Deep RL with Double Q-learning", arXiv:1509.06461, eq. 4.
  Bellemare, Dabney, Munos (2017), C51, arXiv:1707.06887, Algorithm 1.
  Hessel et al. (2018), Rainbow, arXiv:1710.02298, §3 (the n-step double C51 target).
  Pohlen et al. (2018), "Observe and Look Further", arXiv:1805.11593, §3.2 and Prop. A.2.
  Kapturowski et al. (2019), R2D2, ICLR (n-step double Q targets with value rescaling).
  Huber (1964), "Robust Estimation of a Location Parameter", Ann. Math. Statist. 35(1).
  Peng & Williams (1996), "Incremental Multi-Step Q-Learning", Machine Learning 22 (Q(λ)).
  Gallici et al. (2024), PQN, "Simplifying Deep Temporal Difference Learning",
    arXiv:2407.04811, §4 and Algorithm 1 (the λ-returns of Q(λ) over a rollout).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agents.losses import _checks as C
from agents.losses.distributional import categorical_cross_entropy, categorical_projection
from agents.losses.retrace import _take
from agents.losses.returns import lambda_returns, n_step_returns

sg = jax.lax.stop_gradient


# --------------------------------------------------------------------------- scalar transforms


def _check_rescale_eps(eps) -> None:
    C.check_scalar("eps", eps, "the linear term of the value rescaling")
    C.check_nonnegative("eps", eps)


def value_rescale(x, eps=1e-3):
    r"""The value rescaling h of Pohlen et al. (2018, arXiv:1805.11593, §3.2), elementwise.

        h(x) = sign(x) (√(|x| + 1) − 1) + ε x

    It squashes large returns roughly to their square root while staying strictly increasing
    and invertible (ε > 0 also makes h⁻¹ Lipschitz). Computed as the algebraically equal
    x / (√(|x| + 1) + 1) + ε x, which has no cancellation for small |x| in float32 and a
    gradient of ½ + ε at 0. R2D2 uses ε = 1e-3. Checks: a floating-point `x`; ε a scalar,
    ε ≥ 0 when it is a Python or NumPy value.
    """
    C.check_float("x", x)
    _check_rescale_eps(eps)
    return x / (jnp.sqrt(jnp.abs(x) + 1.0) + 1.0) + eps * x


def inverse_value_rescale(x, eps=1e-3):
    r"""h⁻¹, the inverse of `value_rescale` (Pohlen et al. 2018, Prop. A.2), elementwise.

        h⁻¹(x) = sign(x) [ ( (√(1 + 4ε(|x| + 1 + ε)) − 1) / (2ε) )² − 1 ]

    Computed without cancellation: with w = 2x / ((1 + 2ε) + √((1 + 2ε)² + 4ε|x|)), the signed
    root of ε w² + (1 + 2ε) w = x (w = sign(x)(√(|h⁻¹(x)| + 1) − 1)), h⁻¹(x) = w (|w| + 2). It
    equals the closed form above, is exact at ε = 0 (h⁻¹(x) = x(|x| + 2)) and keeps float32
    precision near 0, where the closed form loses it. Checks as `value_rescale`.
    """
    C.check_float("x", x)
    _check_rescale_eps(eps)
    b = 1.0 + 2.0 * eps
    w = 2.0 * x / (b + jnp.sqrt(b * b + 4.0 * eps * jnp.abs(x)))
    return w * (jnp.abs(w) + 2.0)


def huber_loss(x, delta=1.0):
    r"""The Huber loss (Huber 1964), elementwise:

        L_δ(x) = ½ x²             if |x| ≤ δ
                 δ (|x| − ½ δ)    otherwise

    Quadratic near 0, linear beyond δ: its gradient is x clipped to [−δ, δ] (DQN's "error
    clipping" with δ = 1). Checks: a floating-point `x`; δ a scalar, δ ≥ 0 when it is a Python
    or NumPy value (under `agents.losses.checked`, also for jax Arrays).
    """
    C.check_float("x", x)
    C.check_scalar("delta", delta, "the Huber threshold δ")
    C.check_nonnegative("delta", delta)
    abs_x = jnp.abs(x)
    # Two branches rather than ½ min(|x|, δ)² + δ (|x| − min(|x|, δ)): that form's gradient
    # is δ + (min(|x|, δ) − δ), which rounds small x to 0 in float32. Both branches are finite
    # and meet with equal value and slope at |x| = δ.
    return jnp.where(abs_x <= delta, 0.5 * jnp.square(x), delta * (abs_x - 0.5 * delta))


# --------------------------------------------------------------------------- scalar Q-learning


def _check_q_trace(r_t, discount_t, name, q_t, boot_name, bootstrap_q):
    """Rewards, discounts, Q values `[T, B, A]` and their bootstrap `[B, A]`. Returns T, B, A."""
    T, B = C.time_batch(name, q_t, 3, "[T, B, A]: Q(x_t, ·) for t = 0..T-1")
    A = q_t.shape[2]
    C.check_float(name, q_t)
    C.check_float("r_t", r_t)
    C.check_shape("r_t", r_t, (T, B))
    C.check_float("discount_t", discount_t)
    C.check_shape("discount_t", discount_t, (T, B))
    C.check_float(boot_name, bootstrap_q)
    C.check_shape(boot_name, bootstrap_q, (B, A), "Q(x_T, ·) per trace")
    C.check_unit_interval("discount_t", discount_t)
    return T, B, A


def _check_selector(online_q_t, bootstrap_online_q, T, B, A):
    C.check_float("online_q_t", online_q_t)
    C.check_shape("online_q_t", online_q_t, (T, B, A), "the online network's Q(x_t, ·)")
    C.check_float("bootstrap_online_q", bootstrap_online_q)
    C.check_shape("bootstrap_online_q", bootstrap_online_q, (B, A), "online Q(x_T, ·)")


def _bootstrapped_returns(r_t, discount_t, v_t, bootstrap_value, n, mask_t, rescale_eps):
    """`n_step_returns` on V, or R2D2's h(Σ γ^k r + γ^n h⁻¹(V)) when `rescale_eps` is set."""
    if rescale_eps is None:
        return n_step_returns(r_t, discount_t, v_t, bootstrap_value, n, mask_t=mask_t)
    _check_rescale_eps(rescale_eps)
    h_inv = lambda x: inverse_value_rescale(x, rescale_eps)  # noqa: E731
    g = n_step_returns(r_t, discount_t, h_inv(v_t), h_inv(bootstrap_value), n, mask_t=mask_t)
    return value_rescale(g, rescale_eps)


def q_learning_targets(
    r_t, discount_t, target_q_t, bootstrap_target_q, n=1, *, mask_t=None, rescale_eps=None
):
    r"""n-step Q-learning targets over a trace (Sutton & Barto §7.1; DQN with n = 1), `[T, B]`.

    With V(x) = max_a Q_target(x, a) and m the (possibly shortened) horizon of step t:

        G_t = Σ_{k=0}^{m−1} (Π_{j<k} γ_{t+j}) r_{t+k} + (Π_{j<m} γ_{t+j}) V(x_{t+m})

    m = min(n, T − t), cut at the first masked step t+k (k ≥ 1), exactly as `n_step_returns`
    (which computes it). With `rescale_eps` = ε, the targets of R2D2 with Pohlen et al.'s
    value rescaling h = `value_rescale`(·, ε): the network learns h(Q), and

        G_t = h( Σ_{k<m} (Π_{j<k} γ_{t+j}) r_{t+k} + (Π_{j<m} γ_{t+j}) h⁻¹(V(x_{t+m})) )

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]` γ(1 − terminated_{t+1}).
      target_q_t: `[T, B, A]` Q_target(x_t, ·) for t = 0..T−1 (the target network).
      bootstrap_target_q: `[B, A]` Q_target(x_T, ·).
      n: the number of steps, a static Python int ≥ 1.
      mask_t: optional `[T, B]`; see the module docstring.
      rescale_eps: None (plain targets), or ε ≥ 0 of the value rescaling (R2D2: 1e-3).

    Returns:
      `[T, B]` targets, stop_gradient'ed.

    Checks: shapes and dtypes always; n an integer ≥ 1; discount_t ∈ [0, 1] and ε ≥ 0 when
    they are Python or NumPy values.
    """
    _check_q_trace(
        r_t, discount_t, "target_q_t", target_q_t, "bootstrap_target_q", bootstrap_target_q
    )
    v = jnp.max(target_q_t, axis=-1)
    v_boot = jnp.max(bootstrap_target_q, axis=-1)
    return sg(_bootstrapped_returns(r_t, discount_t, v, v_boot, n, mask_t, rescale_eps))


def double_q_learning_targets(
    r_t,
    discount_t,
    target_q_t,
    bootstrap_target_q,
    online_q_t,
    bootstrap_online_q,
    n=1,
    *,
    mask_t=None,
    rescale_eps=None,
):
    r"""n-step double Q-learning targets (van Hasselt et al. 2016, arXiv:1509.06461, eq. 4).

    The online network selects the bootstrap action, the target network evaluates it:

        V(x) = Q_target(x, argmax_a Q_online(x, a))

    and G_t is the n-step return of `q_learning_targets` with this V (ties in the argmax go to
    the lowest action index). With `rescale_eps` = ε, R2D2's rescaled targets
    h(Σ (Π γ) r + (Π γ) h⁻¹(V(x_{t+m}))); the online Q values may be in h-space or not, h is
    increasing and does not change the argmax.

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]`.
      target_q_t: `[T, B, A]` Q_target(x_t, ·), t = 0..T−1.
      bootstrap_target_q: `[B, A]` Q_target(x_T, ·).
      online_q_t: `[T, B, A]` Q_online(x_t, ·).
      bootstrap_online_q: `[B, A]` Q_online(x_T, ·).
      n: a static Python int ≥ 1.
      mask_t: optional `[T, B]`.
      rescale_eps: None, or ε ≥ 0 of the value rescaling.

    Returns:
      `[T, B]` targets, stop_gradient'ed (neither network gets gradient from them).

    Checks: as `q_learning_targets`, and the online Q values must match the target ones.
    """
    T, B, A = _check_q_trace(
        r_t, discount_t, "target_q_t", target_q_t, "bootstrap_target_q", bootstrap_target_q
    )
    _check_selector(online_q_t, bootstrap_online_q, T, B, A)
    v = _take(target_q_t, jnp.argmax(online_q_t, axis=-1))
    v_boot = jnp.take_along_axis(
        bootstrap_target_q, jnp.argmax(bootstrap_online_q, axis=-1)[:, None], axis=-1
    )[:, 0]
    return sg(_bootstrapped_returns(r_t, discount_t, v, v_boot, n, mask_t, rescale_eps))


def q_lambda_targets(r_t, discount_t, q_t, bootstrap_q, lambda_, *, mask_t=None):
    r"""Q(λ) targets over a rollout (Peng & Williams 1996; PQN, Gallici et al. 2024,
    arXiv:2407.04811, Algorithm 1), `[T, B]`: the λ-return of the greedy values,

        G_t = r_t + γ_t [ (1 − λ) max_a Q(x_{t+1}, a) + λ G_{t+1} ],
        G_{T−1} = r_{T−1} + γ_{T−1} max_a Q(x_T, a)

    λ = 0 gives the one-step Q-learning target, λ = 1 the Monte-Carlo return bootstrapped at
    x_T. No off-policy cut: every step's return continues through the next whatever action
    was taken there (Peng's Q(λ), as PQN uses it). At a masked step t (the fake auto-reset
    transition) G_t = max_a Q(x_t, a), so the step before it, the episode's last, gets
    r + γ max_a Q(x_{t}, a) from its final observation (γ = 0 at a termination, γ at a
    truncation) and nothing crosses the boundary.

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]` γ(1 − terminated_{t+1}).
      q_t: `[T, B, A]` Q(x_t, ·) for t = 0..T−1 (PQN: the values the actor computed).
      bootstrap_q: `[B, A]` Q(x_T, ·).
      lambda_: λ ∈ [0, 1], a scalar or `[T, B]` (λ_t in G_t's recursion: it weighs the
        bootstrap at x_{t+1}).
      mask_t: optional `[T, B]`; see the module docstring of `agents.losses`.

    Returns:
      `[T, B]` targets, stop_gradient'ed.

    Checks: shapes and dtypes always; discount_t and λ ∈ [0, 1] when they are Python or
    NumPy values.
    """
    _check_q_trace(r_t, discount_t, "q_t", q_t, "bootstrap_q", bootstrap_q)
    v = jnp.max(q_t, axis=-1)
    v_boot = jnp.max(bootstrap_q, axis=-1)
    return sg(lambda_returns(r_t, discount_t, v, v_boot, lambda_, mask_t=mask_t))


def q_learning_loss(q_t, a_t, target_t, *, mask_t=None, huber_delta=None):
    r"""Per-step regression of Q(x_t, a_t) on a target, `[T, B]`.

        δ_t = G_t − Q(x_t, a_t),   loss_t = ½ δ_t²   or   `huber_loss`(δ_t, huber_delta)

    DQN uses the Huber loss with δ = 1; R2D2 the squared error (in rescaled space). Only
    Q(x_t, a_t) carries gradient: `target_t` is stop_gradient'ed here again.

    Args:
      q_t: `[T, B, A]` Q(x_t, ·) of the network being learnt.
      a_t: `[T, B]` integer actions.
      target_t: `[T, B]` e.g. from `double_q_learning_targets`.
      mask_t: optional `[T, B]`; masked steps give zero loss.
      huber_delta: None (squared error) or δ ≥ 0.

    Checks: shapes and dtypes always; δ ≥ 0 when it is a Python or NumPy value. The caller's
    duty, checked only under `agents.losses.checked`: a_t ∈ [0, A).
    """
    T, B = C.time_batch("q_t", q_t, 3, "[T, B, A]")
    C.check_float("q_t", q_t)
    C.check_int("a_t", a_t)
    C.check_shape("a_t", a_t, (T, B))
    C.check_float("target_t", target_t)
    C.check_shape("target_t", target_t, (T, B))
    C.debug_check_actions("a_t", a_t, q_t.shape[2])
    mask = C.optional_mask(mask_t, (T, B), q_t.dtype)
    td = sg(target_t) - _take(q_t, a_t)
    loss = 0.5 * jnp.square(td) if huber_delta is None else huber_loss(td, huber_delta)
    return jnp.where(mask > 0, loss, 0.0)


# --------------------------------------------------------------------------- categorical (C51)


def _n_step_pieces(r_t, discount_t, mask_t, n):
    """For every step t: the reward sum G_t, the discount Γ_t = Π_{j<m} γ_{t+j} and the index
    t+m ∈ [t, T] of the bootstrap state, all from `n_step_returns` itself (so the categorical
    targets are cut short exactly where the scalar ones are): G_t with V = 0, Γ_t with r = 0
    and V = 1, and t+m with r = 0, γ = 1 and V(x_s) = s (the cut depends on the mask only)."""
    T, B = r_t.shape
    zeros, ones = jnp.zeros_like(r_t), jnp.ones_like(r_t)
    index = jnp.broadcast_to(jnp.arange(T, dtype=r_t.dtype)[:, None], (T, B))
    g = n_step_returns(r_t, discount_t, zeros, zeros[0], n, mask_t=mask_t)
    disc = n_step_returns(zeros, discount_t, ones, ones[0], n, mask_t=mask_t)
    s = n_step_returns(zeros, ones, index, jnp.full((B,), T, r_t.dtype), n, mask_t=mask_t)
    return g, disc, jnp.round(s).astype(jnp.int32)


def _categorical_targets(r_t, discount_t, probs, selected, atoms, n, mask_t):
    """probs `[T+1, B, A, K]`, selected action per state `[T+1, B]`."""
    chosen = jnp.take_along_axis(probs, selected[..., None, None], axis=2)[:, :, 0]  # [T+1,B,K]
    g, disc, s = _n_step_pieces(r_t, discount_t, mask_t, n)
    boot = jnp.take_along_axis(chosen, s[..., None], axis=0)  # [T, B, K]: the row s of each t
    z = g[..., None] + disc[..., None] * atoms[None, None, :]
    return sg(categorical_projection(z, boot, atoms))


def _check_categorical(r_t, discount_t, target_probs_t, bootstrap_target_probs, atoms):
    T, B = C.time_batch("target_probs_t", target_probs_t, 4, "[T, B, A, K]")
    A, K = target_probs_t.shape[2:]
    C.check_float("target_probs_t", target_probs_t)
    C.check_float("r_t", r_t)
    C.check_shape("r_t", r_t, (T, B))
    C.check_float("discount_t", discount_t)
    C.check_shape("discount_t", discount_t, (T, B))
    C.check_float("bootstrap_target_probs", bootstrap_target_probs)
    C.check_shape("bootstrap_target_probs", bootstrap_target_probs, (B, A, K), "Z(x_T, ·)")
    C.check_float("atoms", atoms)
    C.check_shape("atoms", atoms, (K,), "the fixed support")
    C.check_unit_interval("discount_t", discount_t)
    C.check_support("atoms", atoms)
    C.debug_check_probs("target_probs_t", target_probs_t)
    C.debug_check_probs("bootstrap_target_probs", bootstrap_target_probs)
    return T, B, A


def categorical_q_learning_targets(
    r_t, discount_t, target_probs_t, bootstrap_target_probs, atoms, n=1, *, mask_t=None
):
    r"""n-step categorical Q-learning targets (C51, arXiv:1707.06887, Algorithm 1), `[T, B, K]`.

    With p(x, a) the target network's distribution over `atoms` z, Q(x, a) = Σ_i z_i p_i(x, a),
    a* = argmax_a Q(x_{t+m}, a), G_t and Γ_t the n-step reward sum and discount of
    `q_learning_targets` (the same horizon m, cut at masked steps and the trace end):

        target_t = Φ( G_t + Γ_t z,  p(x_{t+m}, a*) )

    where Φ = `categorical_projection` onto `atoms` (Algorithm 1; n-step as Rainbow). For
    n = 1, Γ_t = γ_t: Algorithm 1 as written.

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]`.
      target_probs_t: `[T, B, A, K]` p(x_t, ·) for t = 0..T−1.
      bootstrap_target_probs: `[B, A, K]` p(x_T, ·).
      atoms: `[K]` sorted support.
      n: a static Python int ≥ 1.
      mask_t: optional `[T, B]`.

    Returns:
      `[T, B, K]` target probabilities, stop_gradient'ed.

    Checks: shapes and dtypes always; n ≥ 1; discount_t ∈ [0, 1] and `atoms` finite and strictly
    increasing when they are Python or NumPy values. Under `agents.losses.checked`, the
    probabilities must be finite, non-negative and sum to 1.
    """
    _check_categorical(r_t, discount_t, target_probs_t, bootstrap_target_probs, atoms)
    probs = jnp.concatenate([target_probs_t, bootstrap_target_probs[None]], axis=0)
    selected = jnp.argmax(jnp.einsum("tbak,k->tba", probs, atoms), axis=-1)
    return _categorical_targets(r_t, discount_t, probs, selected, atoms, n, mask_t)


def categorical_double_q_learning_targets(
    r_t,
    discount_t,
    target_probs_t,
    bootstrap_target_probs,
    online_q_t,
    bootstrap_online_q,
    atoms,
    n=1,
    *,
    mask_t=None,
):
    r"""n-step double C51 targets (Rainbow, arXiv:1710.02298 §3; C51 Algorithm 1), `[T, B, K]`.

    As `categorical_q_learning_targets`, but the bootstrap action is chosen by the online
    network's mean Q values, a* = argmax_a Q_online(x_{t+m}, a) (van Hasselt et al. 2016), and
    evaluated with the target network's distribution:

        target_t = Φ( G_t + Γ_t z,  p_target(x_{t+m}, a*) )

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]`.
      target_probs_t: `[T, B, A, K]`.
      bootstrap_target_probs: `[B, A, K]`.
      online_q_t: `[T, B, A]` the online network's mean Q(x_t, ·) =
        Σ_i z_i p_online,i(x_t, ·).
      bootstrap_online_q: `[B, A]`.
      atoms: `[K]`.
      n: static int ≥ 1.
      mask_t: optional `[T, B]`.

    Returns:
      `[T, B, K]` target probabilities, stop_gradient'ed.

    Checks: as `categorical_q_learning_targets`, and the online Q values must be `[T, B, A]`
    and `[B, A]`.
    """
    T, B, A = _check_categorical(r_t, discount_t, target_probs_t, bootstrap_target_probs, atoms)
    _check_selector(online_q_t, bootstrap_online_q, T, B, A)
    probs = jnp.concatenate([target_probs_t, bootstrap_target_probs[None]], axis=0)
    q_online = jnp.concatenate([online_q_t, bootstrap_online_q[None]], axis=0)
    selected = jnp.argmax(q_online, axis=-1)
    return _categorical_targets(r_t, discount_t, probs, selected, atoms, n, mask_t)


def categorical_q_learning_loss(logits_t, a_t, target_probs_t, *, mask_t=None):
    r"""Cross-entropy −Σ_i p_i log q_i(x_t, a_t) of the taken action's predicted distribution,
    `[T, B]` (C51 Algorithm 1's loss).

    Args:
      logits_t: `[T, B, A, K]` predicted logits of Z(x_t, ·) (the only input with gradient,
        and only at a_t).
      a_t: `[T, B]` integer actions.
      target_probs_t: `[T, B, K]` from `categorical_double_q_learning_targets`
        (stop_gradient'ed here again).
      mask_t: optional `[T, B]`; masked steps give zero loss.

    Checks: shapes and dtypes always. The caller's duty, checked only under
    `agents.losses.checked`: a_t ∈ [0, A), `target_probs_t` finite.
    """
    T, B = C.time_batch("logits_t", logits_t, 4, "[T, B, A, K]")
    A, K = logits_t.shape[2:]
    C.check_float("logits_t", logits_t)
    C.check_int("a_t", a_t)
    C.check_shape("a_t", a_t, (T, B))
    C.check_float("target_probs_t", target_probs_t)
    C.check_shape("target_probs_t", target_probs_t, (T, B, K), "the target of Z(x_t, a_t)")
    C.debug_check_actions("a_t", a_t, A)
    logits_a = jnp.take_along_axis(logits_t, a_t[..., None, None].astype(jnp.int32), axis=2)
    return categorical_cross_entropy(target_probs_t, logits_a[:, :, 0], mask_t=mask_t)
