r"""The prediction model's losses and its gradient gate (the Advanced-SAC seed's "recurrent
prediction model", `use_prediction`; ../shared/seeds/: the seed's authors' own feature).

A critic's representation s_t (an encoder's features of x_t, or a recurrent core's state)
is given auxiliary tasks by three models on top of it:

* a transition model N(μ_t, σ_t) = P(s_t, e_t, a_t) of the next representation, trained on
  the negative log-likelihood of the *target* critic's representation of x_{t+1} (a target,
  stop_gradient'ed), plus `kl` × KL(N(μ_t, σ_t) ‖ N(0, I)) (the seed's `transition_kl`,
  0.8), which keeps the predicted distribution from collapsing (`transition_loss`);
* a reward model r̂_t = R(s_t, e_t, a_t), the squared error to the env's reward
  (`reward_model_loss`);
* an observation model x̂_t = O(s_t), the squared error to the whole observation, its
  privileged dimensions e_t included (`reconstruction_loss`).

e_t: the observation's privileged ("extra") dimensions, hidden from the encoder
(`EnvSpec.privileged_obs`): the models may use them, the representation must infer them.

The models' gradients reach the representation only where they agree with the Q loss's
there (`gated_gradients`, the seed's cosine gate; the rule is Du et al. 2018, "Adapting
Auxiliary Losses Using Gradient Similarity", arXiv:1812.02224, §3: an auxiliary gradient is
used only while its cosine with the main task's is positive): with g the Q loss's gradient
and h the models' over all of the representation's parameters, the representation steps
along g + 𝟙[cos(g, h) > 0]·h.

Per-step quantities are time-major `[T, B]`, states `[T, B, K]`. The per-dimension terms are
averaged over the K (or D) dimensions, as the seed's `reduce_mean`, so the losses' scale
does not grow with the representation's size.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import optax

from agents.losses import _checks as C

sg = jax.lax.stop_gradient

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def transition_loss(mean_t, log_std_t, next_state_t, kl: float, *, mask_t=None):
    r"""The transition model's loss per step: the negative log-likelihood of the next
    representation under the predicted diagonal Gaussian, plus `kl` times its KL divergence
    from the standard normal, each averaged over the K dimensions:

        L_t = (1/K) Σ_k [ ½((s'_k − μ_k)/σ_k)² + log σ_k + ½ log 2π ]
              + kl · (1/K) Σ_k [ ½(σ_k² + μ_k² − 1) − log σ_k ]

    Gradient flows into μ and log σ (and through them into the model and the representation
    it reads); the next representation s' is a target, stop_gradient'ed.

    Args:
      mean_t: `[T, B, K]` predicted μ.
      log_std_t: `[T, B, K]` predicted log σ.
      next_state_t: `[T, B, K]` the target representation of x_{t+1}.
      kl: the KL term's coefficient (>= 0).
      mask_t: optional `[T, B]`; masked steps give zero loss and gradient.

    Returns:
      `[T, B]` per-step loss.
    """
    T, B = C.time_batch("mean_t", mean_t, 3, "[T, B, K]")
    for name, x in (("mean_t", mean_t), ("log_std_t", log_std_t), ("next_state_t", next_state_t)):
        C.check_float(name, x)
    C.check_shape("log_std_t", log_std_t, jnp.shape(mean_t), "the shape of mean_t")
    C.check_shape("next_state_t", next_state_t, jnp.shape(mean_t), "the shape of mean_t")
    C.check_scalar("kl", kl, "the KL term's coefficient")
    C.check_nonnegative("kl", kl)
    mask = C.optional_mask(mask_t, (T, B), mean_t.dtype)
    z = (sg(next_state_t) - mean_t) * jnp.exp(-log_std_t)
    nll = jnp.mean(0.5 * jnp.square(z) + log_std_t + _HALF_LOG_2PI, axis=-1)
    prior = jnp.mean(
        0.5 * (jnp.exp(2.0 * log_std_t) + jnp.square(mean_t) - 1.0) - log_std_t, axis=-1
    )
    return jnp.where(mask > 0, nll + kl * prior, 0.0)


def reward_model_loss(predicted_t, r_t, *, mask_t=None):
    r"""The reward model's loss per step, (r̂_t − r_t)², with gradient into r̂ only.

    Args:
      predicted_t: `[T, B]` predicted rewards r̂_t.
      r_t: `[T, B]` the env's rewards (without a curiosity bonus).
      mask_t: optional `[T, B]`; masked steps give zero loss and gradient.

    Returns:
      `[T, B]` per-step loss.
    """
    return C.masked_squared_error("predicted_t", predicted_t, "r_t", sg(r_t), mask_t, "[T, B]")


def reconstruction_loss(predicted_t, obs_t, *, mask_t=None):
    r"""The observation model's loss per step, (1/D) Σ_d (x̂_t,d − x_t,d)², with gradient
    into x̂ only.

    Args:
      predicted_t: `[T, B, D]` reconstructed observations x̂_t.
      obs_t: `[T, B, D]` the observations, privileged dimensions included.
      mask_t: optional `[T, B]`; masked steps give zero loss and gradient.

    Returns:
      `[T, B]` per-step loss.
    """
    return C.masked_squared_error(
        "predicted_t", predicted_t, "obs_t", sg(obs_t), mask_t, "[T, B, D]", _mean_last
    )


def _mean_last(err):
    """The mean over the last axis."""
    return jnp.mean(err, axis=-1)


def gated_gradients(main, auxiliary):
    r"""The gradient gate (module docstring): (g + gate·h, gate, cos) for the main loss's
    gradient g and the auxiliary losses' h, two pytrees of one structure (the
    representation's parameters), where cos = ⟨g, h⟩ / (‖g‖ ‖h‖) over all their leaves and
    gate = 1 if cos > 0 else 0 (0 when either gradient is zero). The gate is a constant: it
    carries no gradient.

    Returns:
      (the combined gradient, the gate `[]` float32 in {0, 1}, the cosine `[]`).
    """
    if jax.tree.structure(main) != jax.tree.structure(auxiliary):
        raise ValueError(
            "gated_gradients: main and auxiliary must be gradients of the same parameters; "
            f"got {jax.tree.structure(main)} and {jax.tree.structure(auxiliary)}"
        )
    for g, h in zip(jax.tree.leaves(main), jax.tree.leaves(auxiliary), strict=True):
        if jnp.shape(g) != jnp.shape(h):
            raise ValueError(
                f"gated_gradients: a leaf of main has shape {jnp.shape(g)}, the same leaf of "
                f"auxiliary {jnp.shape(h)}"
            )
    pairs = zip(jax.tree.leaves(main), jax.tree.leaves(auxiliary), strict=True)
    dot = sum(jnp.vdot(g, h) for g, h in pairs)
    norms = optax.tree.norm(main) * optax.tree.norm(auxiliary)
    cos = jnp.where(norms > 0, dot / jnp.where(norms > 0, norms, 1.0), 0.0)
    gate = sg((cos > 0).astype(jnp.float32))
    combined = jax.tree.map(lambda g, h: g + gate.astype(g.dtype) * h, main, auxiliary)
    return combined, gate, sg(cos)
