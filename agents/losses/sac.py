"""Continuous- and discrete-action actor-critic losses: soft actor-critic (SAC) with its
tanh-Gaussian policy and learnt temperature, discrete SAC, TD3's target and the deterministic
policy gradient.

Per-step quantities are `[T, B]` (T = 1 for a batch of single transitions); actions and
Gaussian statistics carry a trailing action axis, `[T, B, D]` (or any `[..., D]` where
noted). Action bounds `low`, `high` are `[D]`. Targets are stop_gradient'ed; each loss says
which inputs carry gradient.

References:
  Haarnoja et al. (2018), "Soft Actor-Critic Algorithms and Applications", arXiv:1812.05905:
  eq. 3 (soft value), 5 (soft Q loss), 7 (policy loss), 18 (temperature loss), Appendix C
  eq. 26 (tanh change of variables).
  Christodoulou (2019), "Soft Actor-Critic for Discrete Action Settings", arXiv:1910.07207,
  eq. 10–12.
  Fujimoto, van Hoof, Meger (2018), TD3, arXiv:1802.09477, eq. 10 (clipped double Q),
  eq. 15 and §5.3 (target policy smoothing).
  Silver et al. (2014), "Deterministic Policy Gradient Algorithms", ICML, Theorem 1; Lillicrap
  et al. (2016), DDPG, arXiv:1509.02971, eq. 6.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from agents.losses import _checks as C
from agents.losses.returns import n_step_returns

sg = jax.lax.stop_gradient

_LOG_2 = math.log(2.0)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# --------------------------------------------------------------------------- checks


def _check_step(name: str, x, shape, what: str = "") -> None:
    C.check_float(name, x)
    C.check_shape(name, x, shape, what)


def _check_alpha(alpha) -> None:
    C.check_scalar("alpha", alpha, "the temperature α")
    C.check_nonnegative("alpha", alpha)


def _action_dim(name: str, x) -> int:
    if jnp.ndim(x) < 1:
        raise ValueError(f"{name} must have a trailing action axis [..., D], got a scalar")
    return jnp.shape(x)[-1]


def _check_bounds(low, high, D: int) -> None:
    """`low`, `high` `[D]`, finite, low < high: eagerly for Python/NumPy values, under
    `agents.losses.checked` for jax Arrays."""
    for name, x in (("low", low), ("high", high)):
        C.check_float(name, x)
        C.check_shape(name, x, (D,), "one bound per action dimension")
    lo, hi = C.concrete(low), C.concrete(high)
    if lo is not None and hi is not None:
        for name, v in (("low", lo), ("high", hi)):
            if not np.all(np.isfinite(v)):
                i = int(np.argmax(~np.isfinite(v)))
                raise ValueError(f"{name} must be finite everywhere, got {v[i]} at index {i}")
        if np.any(hi <= lo):
            i = int(np.argmax(hi <= lo))
            raise ValueError(
                f"high must be > low everywhere, got high[{i}] = {hi[i]} <= low[{i}] = {lo[i]}"
            )
    elif C.debug_enabled():
        checkify.check(jnp.all(jnp.isfinite(low) & jnp.isfinite(high)), "low, high must be finite")
        checkify.check(jnp.all(high > low), "high must be > low everywhere")


def _row(x, ndim: int):
    """A `[D]` vector as `[1, ..., 1, D]` of rank `ndim`: explicit broadcasting, no promotion."""
    return jnp.reshape(x, (1,) * (ndim - 1) + (-1,))


# --------------------------------------------------------------------------- tanh-Gaussian policy


def scale_action(action, low, high):
    r"""Map a squashed action a ∈ [−1, 1]^D onto the box [low, high], elementwise:

        ã = low + (a + 1) (high − low) / 2

    Its Jacobian is diagonal and constant, so log π(ã) = log π(a) − Σ_i log((high_i − low_i)/2);
    `tanh_gaussian_log_prob(..., low=low, high=high)` includes that term.

    Args:
      action: `[..., D]`.
      low: `[D]` lower bounds, finite, low < high (checked eagerly for Python and NumPy
        values; under `agents.losses.checked` for jax Arrays).
      high: `[D]` upper bounds, finite, low < high (checked as `low`).
    """
    C.check_float("action", action)
    D = _action_dim("action", action)
    _check_bounds(low, high, D)
    nd = jnp.ndim(action)
    return _row(low, nd) + (action + 1.0) * (0.5 * _row(high - low, nd))


def tanh_gaussian_log_prob(pre_tanh, mean, log_std, *, low=None, high=None):
    r"""log π(a|x) of the tanh-squashed diagonal Gaussian of SAC (arXiv:1812.05905, App. C).

    With u ~ N(μ, σ²) (σ = exp(log_std)) and a = tanh(u), eq. 26:

        log π(a|x) = Σ_i [ log N(u_i; μ_i, σ_i) − log(1 − tanh²(u_i)) ]
        log N(u; μ, σ) = −½ ((u − μ)/σ)² − log σ − ½ log 2π

    The correction is computed in the numerically stable form

        log(1 − tanh²(u)) = 2 (log 2 − u − softplus(−2u))

    (both equal −2 log cosh u), which stays finite and exact for large |u|, where
    1 − tanh²(u) rounds to 0 (|u| ≳ 9 in float32), and needs no ε inside the log. With `low`
    and `high` the density is that of the rescaled action ã = `scale_action`(a, low, high):
    Σ_i log((high_i − low_i)/2) is subtracted.

    Take the pre-tanh sample u (not a): inverting tanh near ±1 loses all precision.

    Args:
      pre_tanh: `[..., D]` u, e.g. mean + exp(log_std) · ξ with ξ ~ N(0, 1) (reparameterised).
      mean: `[..., D]` the Gaussian's mean μ, the shape of `pre_tanh`.
      log_std: `[..., D]` the Gaussian's log σ, the shape of `pre_tanh`.
      low: optional `[D]` lower action bounds; `low` and `high` both or neither.
      high: optional `[D]` upper action bounds; `low` and `high` both or neither.

    Returns:
      `[...]` log-densities (the action axis summed). Gradient flows into all three inputs
      (through u as well, for the reparameterised actor loss).

    Checks: shapes and dtypes; `low` < `high`, finite (see `scale_action`).
    """
    C.check_float("pre_tanh", pre_tanh)
    D = _action_dim("pre_tanh", pre_tanh)
    shape = jnp.shape(pre_tanh)
    for name, x in (("mean", mean), ("log_std", log_std)):
        _check_step(name, x, shape, "the shape of pre_tanh")
    if (low is None) != (high is None):
        raise ValueError("low and high must be given together (or neither)")
    z = (pre_tanh - mean) * jnp.exp(-log_std)
    log_normal = -0.5 * jnp.square(z) - log_std - _HALF_LOG_2PI
    log_det_tanh = 2.0 * (_LOG_2 - pre_tanh - jax.nn.softplus(-2.0 * pre_tanh))
    logp = jnp.sum(log_normal - log_det_tanh, axis=-1)
    if low is not None:
        _check_bounds(low, high, D)
        logp = logp - jnp.sum(jnp.log(0.5 * (high - low)))
    return logp


# --------------------------------------------------------------------------- SAC


def soft_q_targets(r_t, discount_t, next_q_min_t, next_logp_t, alpha):
    r"""SAC's one-step soft Q targets (arXiv:1812.05905, eq. 5 with the soft value of eq. 3).

        y_t = r_t + γ_t ( min_i Q'_i(x_{t+1}, a') − α log π(a'|x_{t+1}) ),   a' ~ π(·|x_{t+1})

    with the minimum over the two target critics (TD3's clipped double Q, which SAC uses). The
    critic loss is ½ (Q_i(x_t, a_t) − y_t)² for each critic i.

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]` γ(1 − terminated_{t+1}); a truncation keeps γ.
      next_q_min_t: `[T, B]` min_i Q'_i(x_{t+1}, a') at a fresh action a' from the policy.
      next_logp_t: `[T, B]` log π(a'|x_{t+1}) of the same a'.
      alpha: the temperature α ≥ 0, a scalar (e.g. exp(log_alpha)).

    Returns:
      `[T, B]` targets, stop_gradient'ed (no gradient into the critics, the policy or α).

    Checks: shapes and dtypes; discount_t ∈ [0, 1] and α ≥ 0 when they are Python or NumPy
    values (under `agents.losses.checked`, also for jax Arrays).
    """
    T, B = C.time_batch("r_t", r_t, 2, "[T, B]")
    C.check_float("r_t", r_t)
    _check_step("discount_t", discount_t, (T, B))
    _check_step("next_q_min_t", next_q_min_t, (T, B), "min_i Q'_i(x_{t+1}, a')")
    _check_step("next_logp_t", next_logp_t, (T, B), "log π(a'|x_{t+1})")
    C.check_unit_interval("discount_t", discount_t)
    _check_alpha(alpha)
    return sg(r_t + discount_t * (next_q_min_t - alpha * next_logp_t))


def n_step_soft_q_targets(
    r_t,
    discount_t,
    q_min_t,
    logp_t,
    bootstrap_q_min,
    bootstrap_logp,
    alpha,
    n,
    *,
    mask_t=None,
):
    r"""n-step soft Q targets over a trace: the soft Bellman backup (Haarnoja et al. 2018,
    arXiv:1801.01290 eq. 3) unrolled over the stored rewards, bootstrapped from the soft value.

        V_soft(x_s) = min_i Q'_i(x_s, a'_s) − α log π(a'_s|x_s),   a'_s ~ π(·|x_s)
        y_t = r_t + Σ_{1≤k<m} (Π_{j<k} γ_{t+j}) (r_{t+k} − α log π(a'_{t+k}|x_{t+k}))
              + (Π_{j<m} γ_{t+j}) V_soft(x_{t+m})

    with the horizon m of `n_step_returns` (n, shortened at the trace end and at masked steps;
    a masked step t itself: y_t = V_soft(x_t)). For n = 1 this is `soft_q_targets`. Each
    state visited after x_t adds its entropy bonus α H(π(·|x_s)), estimated as V_soft
    estimates it (−log π of the fresh action: bounded whatever action was replayed, exact
    entropy where `logp_t` is the discrete expectation), as the V-trace target's traced steps
    do; the rewards are the replayed actions' with no off-policy correction: the usual
    uncorrected n-step return (as n-step DDPG/D4PG), biased when the replayed actions are
    off-policy.

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]`.
      q_min_t: `[T, B]` min_i Q'_i(x_t, a'_t) at x_t for t = 0..T−1 (fresh actions a'_t from
        the current policy).
      logp_t: `[T, B]` log π(a'_t|x_t) at x_t for t = 0..T−1 (the same fresh actions).
      bootstrap_q_min: `[B]` as `q_min_t`, at x_T.
      bootstrap_logp: `[B]` as `logp_t`, at x_T.
      alpha: α ≥ 0, a scalar.
      n: a static Python int ≥ 1.
      mask_t: optional `[T, B]`.

    Returns:
      `[T, B]` targets, stop_gradient'ed.

    Checks: as `soft_q_targets` and `n_step_returns`.
    """
    T, B = C.time_batch("q_min_t", q_min_t, 2, "[T, B]")
    C.check_float("q_min_t", q_min_t)
    _check_step("r_t", r_t, (T, B))
    _check_step("discount_t", discount_t, (T, B))
    _check_step("logp_t", logp_t, (T, B), "log π(a'_t|x_t)")
    _check_step("bootstrap_q_min", bootstrap_q_min, (B,), "at x_T")
    _check_step("bootstrap_logp", bootstrap_logp, (B,), "at x_T")
    _check_alpha(alpha)
    v = q_min_t - alpha * logp_t
    v_boot = bootstrap_q_min - alpha * bootstrap_logp
    if n == 1:  # no intermediate step (and the one-step targets to the bit)
        return n_step_returns(r_t, discount_t, v, v_boot, n, mask_t=mask_t)
    # Every reward with its state's bonus, then step t's own bonus taken back (its action a_t
    # is given: Q(x_t, a_t) has no entropy term of x_t); a masked step keeps V_soft(x_t).
    bonus = alpha * logp_t
    y = n_step_returns(r_t - bonus, discount_t, v, v_boot, n, mask_t=mask_t)
    return y + C.optional_mask(mask_t, (T, B), v.dtype) * jax.lax.stop_gradient(bonus)


def sac_actor_loss(q_min_t, logp_t, alpha, *, mask_t=None):
    r"""SAC's policy loss (arXiv:1812.05905, eq. 7, with a reparameterised action), per step.

        loss_t = α log π(a_t|x_t) − min_i Q_i(x_t, a_t),   a_t = tanh(μ + σ ξ), ξ ~ N(0, 1)

    Gradients: into `logp_t` and `q_min_t` (through the reparameterised action a_t into the
    policy; pass critic parameters through stop_gradient, or differentiate only with respect
    to the policy's). α is a constant (stop_gradient).

    Args:
      q_min_t: `[T, B]` min_i Q_i(x_t, a_t) at the policy's own action.
      logp_t: `[T, B]` log π(a_t|x_t).
      alpha: α ≥ 0, a scalar.
      mask_t: optional `[T, B]`.

    Checks: shapes and dtypes; α ≥ 0 when it is a Python or NumPy value.
    """
    T, B = C.time_batch("q_min_t", q_min_t, 2, "[T, B]")
    C.check_float("q_min_t", q_min_t)
    _check_step("logp_t", logp_t, (T, B), "log π(a_t|x_t)")
    _check_alpha(alpha)
    mask = C.optional_mask(mask_t, (T, B), q_min_t.dtype)
    return jnp.where(mask > 0, sg(alpha) * logp_t - q_min_t, 0.0)


def sac_temperature_loss(log_alpha, logp_t, target_entropy, *, mask_t=None):
    r"""SAC's temperature loss (arXiv:1812.05905, eq. 18), per step, with α = exp(log_alpha):

        loss_t = −α ( log π(a_t|x_t) + H̄ )

    Its gradient with respect to log α is −α (log π + H̄): α grows when the policy's entropy
    −log π falls below the target H̄ (e.g. −D for D action dimensions) and shrinks above it.
    Some implementations multiply log α instead of α: the same sign of the gradient, the step
    scaled by 1/α.

    Gradients: only into `log_alpha`; `logp_t` and `target_entropy` are constants.

    Args:
      log_alpha: a scalar, log α.
      logp_t: `[T, B]` log π(a_t|x_t), a_t ~ π.
      target_entropy: H̄, a scalar.
      mask_t: optional `[T, B]`.

    Checks: shapes and dtypes.
    """
    C.check_float("log_alpha", log_alpha)
    C.check_scalar("log_alpha", log_alpha, "log α")
    C.check_scalar("target_entropy", target_entropy, "H̄")
    T, B = C.time_batch("logp_t", logp_t, 2, "[T, B]")
    C.check_float("logp_t", logp_t)
    mask = C.optional_mask(mask_t, (T, B), logp_t.dtype)
    gap = jnp.where(mask > 0, sg(logp_t + target_entropy), 0.0)
    return -jnp.exp(log_alpha) * gap


# --------------------------------------------------------------------------- discrete SAC


def _policy(logits):
    """(π, log π) with log π = 0 where π = 0 (−inf logits): its coefficient π is 0 there, and
    0·(−inf) would be NaN in the value and in the gradient."""
    log_pi = jax.nn.log_softmax(logits, axis=-1)
    pi = jnp.exp(log_pi)
    return pi, jnp.where(pi > 0, log_pi, 0.0)


def _check_logits_q(logits_name, logits, q_name, q):
    T, B = C.time_batch(logits_name, logits, 3, "[T, B, A]")
    C.check_float(logits_name, logits)
    _check_step(q_name, q, jnp.shape(logits), f"Q(·, a) for every action, matching {logits_name}")
    return T, B


def discrete_soft_q_targets(r_t, discount_t, next_q_min_t, next_logits_t, alpha):
    r"""Discrete SAC's soft Q targets with the exact expectation over actions
    (Christodoulou 2019, arXiv:1910.07207, eq. 10 for the soft value):

        V(x_{t+1}) = Σ_a π(a|x_{t+1}) [ min_i Q'_i(x_{t+1}, a) − α log π(a|x_{t+1}) ]
        y_t = r_t + γ_t V(x_{t+1})

    Actions with π = 0 (logits −inf) contribute 0.

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]`.
      next_q_min_t: `[T, B, A]` min_i Q'_i(x_{t+1}, ·).
      next_logits_t: `[T, B, A]` policy logits at x_{t+1}.
      alpha: α ≥ 0, a scalar.

    Returns:
      `[T, B]` targets, stop_gradient'ed.

    Checks: shapes and dtypes; discount_t ∈ [0, 1] and α ≥ 0 when they are Python or NumPy
    values.
    """
    T, B = _check_logits_q("next_logits_t", next_logits_t, "next_q_min_t", next_q_min_t)
    _check_step("r_t", r_t, (T, B))
    _check_step("discount_t", discount_t, (T, B))
    C.check_unit_interval("discount_t", discount_t)
    _check_alpha(alpha)
    pi, log_pi = _policy(next_logits_t)
    v_next = jnp.sum(pi * (next_q_min_t - alpha * log_pi), axis=-1)
    return sg(r_t + discount_t * v_next)


def discrete_sac_actor_loss(logits_t, q_min_t, alpha, *, mask_t=None):
    r"""Discrete SAC's policy loss (arXiv:1910.07207, eq. 12), per step, exact over actions:

        loss_t = Σ_a π(a|x_t) [ α log π(a|x_t) − min_i Q_i(x_t, a) ]

    Gradients: only into `logits_t`; the Q values and α are constants (stop_gradient).

    Args:
      logits_t: `[T, B, A]` policy logits.
      q_min_t: `[T, B, A]` min_i Q_i(x_t, ·).
      alpha: α ≥ 0, a scalar.
      mask_t: optional `[T, B]`.
    """
    T, B = _check_logits_q("logits_t", logits_t, "q_min_t", q_min_t)
    _check_alpha(alpha)
    mask = C.optional_mask(mask_t, (T, B), logits_t.dtype)
    pi, log_pi = _policy(logits_t)
    loss = jnp.sum(pi * (sg(alpha) * log_pi - sg(q_min_t)), axis=-1)
    return jnp.where(mask > 0, loss, 0.0)


def discrete_sac_temperature_loss(log_alpha, logits_t, target_entropy, *, mask_t=None):
    r"""Discrete SAC's temperature loss (arXiv:1910.07207, eq. 11), per step, α = exp(log_alpha):

        loss_t = −α Σ_a π(a|x_t) ( log π(a|x_t) + H̄ ) = α ( H(π(·|x_t)) − H̄ )

    The paper sets H̄ to 0.98 times the maximum entropy, 0.98 · log A.

    Gradients: only into `log_alpha`; the policy is a constant here.

    Args:
      log_alpha: a scalar.
      logits_t: `[T, B, A]`.
      target_entropy: H̄, a scalar.
      mask_t: optional `[T, B]`.
    """
    C.check_float("log_alpha", log_alpha)
    C.check_scalar("log_alpha", log_alpha, "log α")
    C.check_scalar("target_entropy", target_entropy, "H̄")
    T, B = C.time_batch("logits_t", logits_t, 3, "[T, B, A]")
    C.check_float("logits_t", logits_t)
    mask = C.optional_mask(mask_t, (T, B), logits_t.dtype)
    pi, log_pi = _policy(sg(logits_t))
    gap = jnp.sum(pi * (log_pi + sg(target_entropy)), axis=-1)
    return jnp.where(mask > 0, -jnp.exp(log_alpha) * gap, 0.0)


# --------------------------------------------------------------------------- TD3 and DPG


def td3_target_actions(next_action, noise, noise_clip, low, high):
    r"""TD3's target policy smoothing (arXiv:1802.09477, eq. 15 and §5.3), elementwise:

        ã' = clip( π'(x_{t+1}) + clip(ε, −c, c),  low, high ),   ε ~ N(0, σ²)

    The noise is an input, drawn by the caller (e.g. σ · `jax.random.normal`; the paper uses
    σ = 0.2 and c = 0.5 for actions in [−1, 1]), so the function is deterministic.

    Args:
      next_action: `[..., D]` the target actor's action π'(x_{t+1}).
      noise: `[..., D]` ε.
      noise_clip: c ≥ 0, a scalar.
      low: `[D]` lower action bounds, low < high.
      high: `[D]` upper action bounds, low < high.

    Returns:
      `[..., D]` smoothed target actions, stop_gradient'ed.

    Checks: shapes and dtypes; c ≥ 0, bounds finite with low < high when they are Python or
    NumPy values (under `agents.losses.checked`, also for jax Arrays).
    """
    C.check_float("next_action", next_action)
    D = _action_dim("next_action", next_action)
    _check_step("noise", noise, jnp.shape(next_action), "one ε per action entry")
    C.check_scalar("noise_clip", noise_clip, "the noise clip c")
    C.check_nonnegative("noise_clip", noise_clip)
    _check_bounds(low, high, D)
    nd = jnp.ndim(next_action)
    smoothed = next_action + jnp.clip(noise, -noise_clip, noise_clip)
    return sg(jnp.clip(smoothed, _row(low, nd), _row(high, nd)))


def td3_targets(r_t, discount_t, next_q1_t, next_q2_t):
    r"""TD3's clipped double-Q targets (arXiv:1802.09477, eq. 10), per step:

        y_t = r_t + γ_t min( Q'_1(x_{t+1}, ã'), Q'_2(x_{t+1}, ã') )

    with ã' from `td3_target_actions`. Both critics regress on the same y_t.

    Args:
      r_t: `[T, B]` rewards.
      discount_t: `[T, B]`.
      next_q1_t: `[T, B]` the first target critic at (x_{t+1}, ã'), Q'_1(x_{t+1}, ã').
      next_q2_t: `[T, B]` the second target critic at (x_{t+1}, ã'), Q'_2(x_{t+1}, ã').

    Returns:
      `[T, B]` targets, stop_gradient'ed.

    Checks: shapes and dtypes; discount_t ∈ [0, 1] when it is a Python or NumPy value.
    """
    T, B = C.time_batch("r_t", r_t, 2, "[T, B]")
    C.check_float("r_t", r_t)
    _check_step("discount_t", discount_t, (T, B))
    _check_step("next_q1_t", next_q1_t, (T, B), "Q'_1(x_{t+1}, ã')")
    _check_step("next_q2_t", next_q2_t, (T, B), "Q'_2(x_{t+1}, ã')")
    C.check_unit_interval("discount_t", discount_t)
    return sg(r_t + discount_t * jnp.minimum(next_q1_t, next_q2_t))


def dpg_loss(a_t, dqda_t, *, mask_t=None):
    r"""The deterministic policy gradient (Silver et al. 2014, Theorem 1; DDPG eq. 6), per step.

    The actor ascends Q(x, π_θ(x)) along ∇_θ π_θ(x) · ∂Q(x, a)/∂a |_{a = π_θ(x)}. This loss
    produces exactly that gradient from the action alone:

        loss_t = ½ Σ_i ( sg(a_t + ∂Q/∂a_t) − a_t )_i²,   ∂loss_t/∂a_t = −∂Q/∂a_t

    so the critic is not part of the graph and cannot receive gradient from it, whatever the
    caller differentiates. Its value, ½ ‖∂Q/∂a‖², is not the objective: log Q(x, π(x)) to
    monitor the actor. Compute the action gradient with the critic held fixed, e.g.::

        a = actor(theta, x)                                      # [T, B, D]
        dqda = jax.grad(lambda a: critic(phi, x, a).sum())(sg(a))  # each row its own ∂Q/∂a
        loss = losses.dpg_loss(a, dqda).mean()

    Args:
      a_t: `[T, B, D]` the actor's actions π_θ(x_t) (the only input with gradient).
      dqda_t: `[T, B, D]` ∂Q(x_t, a)/∂a at a = a_t (stop_gradient'ed here).
      mask_t: optional `[T, B]`; masked steps give zero loss and gradient.

    Returns:
      `[T, B]` per-step loss.

    Checks: shapes and dtypes always; under `agents.losses.checked`, `dqda_t` must be finite.
    """
    T, B = C.time_batch("a_t", a_t, 3, "[T, B, D]")
    C.check_float("a_t", a_t)
    _check_step("dqda_t", dqda_t, jnp.shape(a_t), "∂Q/∂a, the shape of a_t")
    C.debug_check_finite("dqda_t", dqda_t)
    mask = C.optional_mask(mask_t, (T, B), a_t.dtype)
    target = sg(a_t + dqda_t)
    loss = 0.5 * jnp.sum(jnp.square(target - a_t), axis=-1)
    return jnp.where(mask > 0, loss, 0.0)
