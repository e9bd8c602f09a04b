r"""`agents.losses`: pure, jittable, time-major loss functions for off-policy actor-critics.

Every function takes time-major batched arrays `[T, B, ...]`, is safe under `jax.jit`,
`jax.vmap`, `jax.grad` and sharding (no Python control flow on values, no host sync), and
checks shapes and dtypes at trace time: a wrong shape raises a `ValueError` that names the
argument and both shapes. Nothing broadcasts silently.

Trace convention (used by every function here, by `envs/` and by `replay/`)
---------------------------------------------------------------------------
A trace holds observations x_0..x_T; step t takes action a_t in x_t and receives r_t:

* `discount_t = γ · (1 − terminated_{t+1})`. A zero stops bootstrapping at a true terminal
  state. A time-limit truncation keeps `discount_t = γ`, so the target bootstraps from the
  value of the final observation x_{t+1}, not from zero.
* `mask_t = 1 − first_{t+1}`. envpool (and gymnasium's NEXT_STEP auto-reset) follow the step
  that ends an episode with a fake transition: the action is ignored, and the reset
  observation comes back with reward 0. `mask_t = 0` marks that fake step. At a masked step
  every target equals its own estimate (Q_ret = Q(x_t, a_t), v_s = V(x_t), G = V(x_t),
  advantage 0), so no correction crosses the boundary and losses there are zero.

With these two fields, a trace that crosses an episode end gives exactly the targets of its
two pieces computed separately, for termination and for truncation alike. All `mask_t`
arguments are keyword-only and default to all ones.

Importance ratios: wherever a loss divides by a behaviour probability μ, it divides by
μ + `MU_EPSILON` (1e-8, as rlax's `retrace`), so π = μ = 0 gives a ratio of 0, never NaN.

Checks
------
* Shapes and dtypes: always, at trace time, free under `jit`.
* Hyperparameters and discounts: λ (`lambda_`) ∈ [0, 1], truncation levels `c`, `c_max` (and
  V-trace's clips) ≥ 0, `discount_t` ∈ [0, 1] (every entry), the trust-region `delta` ≥ 0, and
  a categorical support (`z_q`, `atoms`) finite and strictly increasing; PPO's `epsilon` and
  the normalisation `eps` ≥ 0 (and scalars). Checked eagerly, with
  a one-line `ValueError` naming the argument, when the value is a Python number or a NumPy
  array. Traced values, and jax Arrays in general, are not checked: pass them inside
  `checked` to check them at run time.
* Data: actions a_t ∈ [0, A), finite probabilities that sum to 1. These are the caller's
  duty: out of range, a_t = −1 silently picks the last action and a_t = A gives NaN.

Debug mode: `checked(fn)` wraps any function of this package (or a function that calls
them) and adds `jax.experimental.checkify` checks of the data and of the ranges above for
traced values. The wrapped function returns the same values, runs compiled with `jax.jit`,
and raises `checkify.JaxRuntimeError` (a `ValueError`) naming the argument on a violation::

    q_ret = losses.checked(losses.retrace_targets)(q, pi, mu, a, r, disc, boot)

Without the wrapper no check is emitted: the compiled losses are unchanged.

Gradients: every target (`retrace_targets`, `vtrace`, `lambda_returns`, `n_step_returns`,
`gae`, `distributional_retrace_targets`, `normalize_advantages`) is wrapped in
`jax.lax.stop_gradient`. The losses treat their targets and coefficients as constants;
gradient flows only into the quantity being learnt (Q(x_t, a_t), the logits, the predicted
distribution). In particular: `ppo_clip_loss` only into log π_θ(a_t|x_t) (not the old
log-probabilities, not the advantages); `clipped_value_loss` only into V(x_t).

Example::

    import jax, jax.numpy as jnp
    from agents import losses

    T, B, A = 20, 32, 6
    k = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(k[0], (T, B, A))
    logits = jax.random.normal(k[1], (T, B, A))
    mu = jax.nn.softmax(jax.random.normal(k[2], (T, B, A)))
    a = jnp.zeros((T, B), jnp.int32)
    r, disc = jnp.ones((T, B)), jnp.full((T, B), 0.99)
    pi = jax.nn.softmax(logits)
    q_ret = losses.retrace_targets(q, pi, mu, a, r, disc, jnp.zeros(B))
    loss = losses.acer_policy_loss(logits, q, mu, a, q_ret, c=10.0).mean()
"""

from agents.losses.debug import checked
from agents.losses.distributional import (
    categorical_cross_entropy,
    categorical_projection,
    distributional_retrace_targets,
)
from agents.losses.onpolicy import (
    PPOClipOutput,
    clipped_value_loss,
    normalize_advantages,
    ppo_clip_loss,
)
from agents.losses.policy import (
    TrustRegionOutput,
    acer_policy_loss,
    beta_loo_policy_loss,
    entropy,
    trust_region_policy_loss,
    trust_region_projection,
)
from agents.losses.retrace import (
    MU_EPSILON,
    acer_value_loss,
    retrace_targets,
    trace_coefficients,
)
from agents.losses.returns import VTraceOutput, gae, lambda_returns, n_step_returns, vtrace

__all__ = [
    "MU_EPSILON",
    "PPOClipOutput",
    "TrustRegionOutput",
    "VTraceOutput",
    "acer_policy_loss",
    "acer_value_loss",
    "beta_loo_policy_loss",
    "categorical_cross_entropy",
    "categorical_projection",
    "checked",
    "clipped_value_loss",
    "distributional_retrace_targets",
    "entropy",
    "gae",
    "lambda_returns",
    "n_step_returns",
    "normalize_advantages",
    "ppo_clip_loss",
    "retrace_targets",
    "trace_coefficients",
    "trust_region_policy_loss",
    "trust_region_projection",
    "vtrace",
]
