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

(The n-step Q-learning targets of `value` give the bootstrap value of x_t there instead, a
meaningless number: their losses take the same mask and are zero there.)

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
  a categorical support (`z_q`, `atoms`) finite and strictly increasing; PPO's `epsilon`, the
  Huber `delta`, the rescaling `eps`, the temperature `alpha` and TD3's `noise_clip` ≥ 0 (and
  scalars), action bounds finite with `low` < `high`. Checked eagerly, with a one-line
  `ValueError` naming the argument, when the value is a Python number or a NumPy array. Traced
  values, and jax Arrays in general, are not checked: pass them inside `checked` to check them
  at run time.
* Data: actions a_t ∈ [0, A), finite probabilities that sum to 1. These are the caller's
  duty: out of range, a_t = −1 silently picks the last action and a_t = A gives NaN.

Debug mode: `checked(fn)` wraps any function of this package (or a function that calls
them) and adds `jax.experimental.checkify` checks of the data and of the ranges above for
traced values. The wrapped function returns the same values, runs compiled with `jax.jit`,
and raises `checkify.JaxRuntimeError` (a `ValueError`) naming the argument on a violation::

    q_ret = losses.checked(losses.retrace_targets)(q, pi, mu, a, r, disc, boot)

Without the wrapper no check is emitted: the compiled losses are unchanged.

Gradients: every target (`retrace_targets`, `vtrace`, `lambda_returns`, `n_step_returns`,
`gae`, `distributional_retrace_targets`, the (double, categorical) Q-learning targets, the soft
and TD3 targets, `td3_target_actions`, `normalize_advantages`) is wrapped in
`jax.lax.stop_gradient`. The losses treat their targets and coefficients as constants; gradient
flows only into the quantity being learnt (Q(x_t, a_t), the logits, the predicted
distribution). In particular: `ppo_clip_loss` only into log π_θ(a_t|x_t) (not the old
log-probabilities, not the advantages); `clipped_value_loss` only into V(x_t);
`q_learning_loss` and `categorical_q_learning_loss` only into the taken action's Q value or
logits; `sac_actor_loss` into log π and min Q (the reparameterised action), not α;
`sac_temperature_loss` and `discrete_sac_temperature_loss` only into log α;
`discrete_sac_actor_loss` only into the policy logits; `dpg_loss` only into the action (the
critic enters through ∂Q/∂a, a constant). Continuous ACER: `continuous_retrace_targets`
(Q_ret and Q_opc) and `sdn_value_targets` are stopped; `sdn_value_loss` flows only into
Q̃(x_t, a_t) and V(x_t); `acer_continuous_policy_loss` and
`gaussian_trust_region_policy_loss` only into the policy's mean and log-std (the sampled
actions are constants: a score-function estimate); `sdn_q_values` and the Gaussian
helpers are plain differentiable functions. `tanh_gaussian_log_prob`, `scale_action`,
`huber_loss` and the value rescaling are plain differentiable functions. The prediction
model's `transition_loss` flows into the predicted μ and log σ (the next representation is a
target), `reward_model_loss` and `reconstruction_loss` into the prediction only.

Families: off-policy actor-critics (`retrace`, `policy`, `distributional`), state-value
targets (`returns`), PPO (`onpolicy`: `ppo_clip_loss`, `clipped_value_loss`,
`normalize_advantages`), DQN/Rainbow/R2D2/PQN (`value`: n-step double Q-learning targets,
Q(λ), value rescaling, C51 targets, Huber), continuous control (`sac`: tanh-Gaussian log-
densities, SAC and discrete SAC, TD3's targets, the deterministic policy gradient), continuous
ACER (`acer_continuous`: Gaussian log-densities, entropy and KL, the stochastic dueling
network, Q_ret/Q_opc with the 1/d-th-root truncation, the SDN critic loss, the policy gradient
with a sampled bias correction and the trust region on the Gaussian's statistics) and
curiosity (`curiosity`: RND's prediction error and intrinsic reward, ICM's forward and
inverse losses) and SAC's prediction model (`prediction`: the transition, reward and
reconstruction losses and the gradient gate).

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

from agents.losses.acer_continuous import (
    ContinuousRetraceOutput,
    acer_continuous_policy_loss,
    continuous_retrace_targets,
    gaussian_entropy,
    gaussian_kl,
    gaussian_log_prob,
    gaussian_trust_region_policy_loss,
    sdn_q_values,
    sdn_value_loss,
    sdn_value_targets,
)
from agents.losses.curiosity import (
    icm_forward_loss,
    icm_inverse_loss,
    icm_inverse_loss_continuous,
    rnd_intrinsic_reward,
    rnd_prediction_error,
)
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
from agents.losses.prediction import (
    gated_gradients,
    reconstruction_loss,
    reward_model_loss,
    transition_loss,
)
from agents.losses.retrace import (
    MU_EPSILON,
    acer_value_loss,
    retrace_targets,
    trace_coefficients,
)
from agents.losses.returns import VTraceOutput, gae, lambda_returns, n_step_returns, vtrace
from agents.losses.sac import (
    discrete_sac_actor_loss,
    discrete_sac_temperature_loss,
    discrete_soft_q_targets,
    dpg_loss,
    n_step_soft_q_targets,
    sac_actor_loss,
    sac_temperature_loss,
    scale_action,
    soft_q_targets,
    tanh_gaussian_log_prob,
    td3_target_actions,
    td3_targets,
)
from agents.losses.value import (
    categorical_double_q_learning_targets,
    categorical_q_learning_loss,
    categorical_q_learning_targets,
    double_q_learning_targets,
    huber_loss,
    inverse_value_rescale,
    q_lambda_targets,
    q_learning_loss,
    q_learning_targets,
    value_rescale,
)

__all__ = [
    "MU_EPSILON",
    "ContinuousRetraceOutput",
    "PPOClipOutput",
    "TrustRegionOutput",
    "VTraceOutput",
    "acer_continuous_policy_loss",
    "acer_policy_loss",
    "acer_value_loss",
    "beta_loo_policy_loss",
    "categorical_cross_entropy",
    "categorical_double_q_learning_targets",
    "categorical_projection",
    "categorical_q_learning_loss",
    "categorical_q_learning_targets",
    "checked",
    "clipped_value_loss",
    "continuous_retrace_targets",
    "discrete_sac_actor_loss",
    "discrete_sac_temperature_loss",
    "discrete_soft_q_targets",
    "distributional_retrace_targets",
    "double_q_learning_targets",
    "dpg_loss",
    "entropy",
    "gae",
    "gated_gradients",
    "gaussian_entropy",
    "gaussian_kl",
    "gaussian_log_prob",
    "gaussian_trust_region_policy_loss",
    "huber_loss",
    "icm_forward_loss",
    "icm_inverse_loss",
    "icm_inverse_loss_continuous",
    "inverse_value_rescale",
    "lambda_returns",
    "n_step_returns",
    "n_step_soft_q_targets",
    "normalize_advantages",
    "ppo_clip_loss",
    "q_lambda_targets",
    "q_learning_loss",
    "q_learning_targets",
    "reconstruction_loss",
    "retrace_targets",
    "reward_model_loss",
    "rnd_intrinsic_reward",
    "rnd_prediction_error",
    "sac_actor_loss",
    "sac_temperature_loss",
    "scale_action",
    "sdn_q_values",
    "sdn_value_loss",
    "sdn_value_targets",
    "soft_q_targets",
    "tanh_gaussian_log_prob",
    "td3_target_actions",
    "td3_targets",
    "trace_coefficients",
    "transition_loss",
    "trust_region_policy_loss",
    "trust_region_projection",
    "value_rescale",
    "vtrace",
]
