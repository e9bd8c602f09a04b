"""Curiosity: random network distillation (RND), an intrinsic reward for novel observations.

A fixed, randomly initialised target network f embeds an observation; a predictor network f̂
is trained to match it on the observations the agent has seen. The prediction error is
small on familiar observations and large on novel ones, so it serves as an exploration
bonus (Burda et al. 2018, "Exploration by Random Network Distillation", arXiv:1810.12894,
§2.2: the bonus is ‖f̂(x) − f(x)‖², and the predictor minimises the same error; §2.4: the
observations both networks see are whitened by running statistics and clipped to [−5, 5],
and the bonus is divided by a running standard deviation).

Per-step quantities are time-major `[T, B]`, embeddings `[T, B, K]`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agents.losses import _checks as C

sg = jax.lax.stop_gradient


def rnd_prediction_error(predicted_t, target_t, *, mask_t=None):
    r"""RND's prediction error per step, the predictor's loss (arXiv:1810.12894, §2.2):

        e_t = (1/K) Σ_k ( f̂(x_t)_k − sg(f(x_t))_k )²

    the mean over the K embedding features (the paper's ‖·‖² up to the constant 1/K, which
    the running normalisation of the bonus removes). Gradient flows only into the
    predictor's output: the target embedding is stop_gradient'ed (the target network is
    never trained).

    Args:
      predicted_t: `[T, B, K]` the predictor's embedding f̂(x_t) (with gradient).
      target_t: `[T, B, K]` the fixed target network's embedding f(x_t).
      mask_t: optional `[T, B]`; masked steps give zero error and gradient.

    Returns:
      `[T, B]` per-step squared error.
    """
    T, B = C.time_batch("predicted_t", predicted_t, 3, "[T, B, K]")
    C.check_float("predicted_t", predicted_t)
    C.check_float("target_t", target_t)
    C.check_shape("target_t", target_t, jnp.shape(predicted_t), "the shape of predicted_t")
    C.debug_check_finite("target_t", target_t)
    mask = C.optional_mask(mask_t, (T, B), predicted_t.dtype)
    err = jnp.mean(jnp.square(predicted_t - sg(target_t)), axis=-1)
    return jnp.where(mask > 0, err, 0.0)


def rnd_intrinsic_reward(error_t, error_var, *, eps: float = 1e-8):
    r"""RND's intrinsic reward: the prediction error divided by a running standard
    deviation of the errors (arXiv:1810.12894, §2.4, "reward normalization"):

        r^i_t = sg(e_t) / √(σ² + eps)

    The paper divides by the standard deviation of the discounted intrinsic *return*,
    which an on-policy rollout provides; an off-policy learner that scores sampled
    transitions divides by that of the intrinsic rewards themselves (no mean is
    subtracted, so the bonus stays non-negative). A constant of the critic's target: the
    whole reward is stop_gradient'ed.

    Args:
      error_t: `[T, B]` prediction errors e_t (`rnd_prediction_error`).
      error_var: scalar running variance σ² of the errors.
      eps: added to the variance before the square root.

    Returns:
      `[T, B]` intrinsic rewards.
    """
    C.time_batch("error_t", error_t, 2, "[T, B]")
    C.check_float("error_t", error_t)
    C.check_float("error_var", error_var)
    C.check_scalar("error_var", error_var, "the running variance of the errors")
    C.check_nonnegative("error_var", error_var)
    return sg(error_t * jax.lax.rsqrt(error_var + eps))
