"""Curiosity: intrinsic rewards for novel observations, by random network distillation (RND)
or by the intrinsic curiosity module (ICM).

RND: a fixed, randomly initialised target network f embeds an observation; a predictor network f̂
is trained to match it on the observations the agent has seen. The prediction error is
small on familiar observations and large on novel ones, so it serves as an exploration
bonus (Burda et al. 2018, "Exploration by Random Network Distillation", arXiv:1810.12894,
§2.2: the bonus is ‖f̂(x) − f(x)‖², and the predictor minimises the same error; §2.4: the
observations both networks see are whitened by running statistics and clipped to [−5, 5],
and the bonus is divided by a running standard deviation).

ICM (Pathak et al. 2017, "Curiosity-driven Exploration by Self-supervised Prediction",
arXiv:1705.05363, §2.2): an encoder φ embeds observations; an inverse model g predicts the
action a_t from (φ(s_t), φ(s_{t+1})) (loss L_I, eq. 3), which shapes φ to keep what the agent
can control; a forward model f predicts φ(s_{t+1}) from (φ(s_t), a_t) (loss L_F, eq. 5). Both
are trained on (1 − β)·L_I + β·L_F (eq. 7, β = 0.2), and the bonus is the forward model's
error, r^i_t = (η/2)·‖f(φ(s_t), a_t) − φ(s_{t+1})‖² (eq. 6). `icm_inverse_loss` (discrete
actions: the cross-entropy of the predicted action distribution, as the paper's
softmax inverse model) and `icm_inverse_loss_continuous` (continuous actions, which the paper
does not treat: ½‖â_t − a_t‖², the negative log-likelihood of a unit-variance Gaussian up to a
constant) give L_I, `icm_forward_loss` gives L_F and the bonus's error; the bonus is then
normalised as RND's is (`rnd_intrinsic_reward`: divided by a running standard deviation of
the errors), so the coefficient means the same for both.

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


def icm_forward_loss(predicted_t, features_t, *, mask_t=None):
    r"""ICM's forward-model loss and curiosity error per step (arXiv:1705.05363, eqs. 5–6):

        L_F,t = ½ Σ_k ( f(φ(s_t), a_t)_k − φ(s_{t+1})_k )²

    Gradient flows into both arguments, as in eq. 7, which minimises L_F over the forward
    model's and the encoder's parameters alike (the inverse loss keeps the encoder from
    collapsing to a constant). The bonus built from it is stop_gradient'ed
    (`rnd_intrinsic_reward`).

    Args:
      predicted_t: `[T, B, K]` the forward model's prediction f(φ(s_t), a_t).
      features_t: `[T, B, K]` the encoder's features of the next observation φ(s_{t+1}).
      mask_t: optional `[T, B]`; masked steps give zero loss and gradient.

    Returns:
      `[T, B]` per-step loss.
    """
    return C.masked_squared_error(
        "predicted_t", predicted_t, "features_t", features_t, mask_t, "[T, B, K]", _half_sum
    )


def icm_inverse_loss(logits_t, a_t, *, mask_t=None):
    r"""ICM's inverse-model loss for discrete actions (arXiv:1705.05363, eq. 3): the
    cross-entropy of the taken action under the predicted distribution
    softmax(g(φ(s_t), φ(s_{t+1}))),

        L_I,t = −log softmax(logits_t)[a_t]

    Args:
      logits_t: `[T, B, A]` the inverse model's action logits.
      a_t: `[T, B]` integer actions taken.
      mask_t: optional `[T, B]`; masked steps give zero loss and gradient.

    Returns:
      `[T, B]` per-step loss.
    """
    T, B = C.time_batch("logits_t", logits_t, 3, "[T, B, A]")
    C.check_float("logits_t", logits_t)
    C.check_int("a_t", a_t)
    C.check_shape("a_t", a_t, (T, B))
    C.debug_check_actions("a_t", a_t, logits_t.shape[-1])
    mask = C.optional_mask(mask_t, (T, B), logits_t.dtype)
    logp = jax.nn.log_softmax(logits_t, axis=-1)
    taken = jnp.take_along_axis(logp, a_t[..., None].astype(jnp.int32), axis=-1)[..., 0]
    return jnp.where(mask > 0, -taken, 0.0)


def icm_inverse_loss_continuous(predicted_t, a_t, *, mask_t=None):
    r"""ICM's inverse-model loss for continuous actions (module docstring: the paper's actions
    are discrete): the squared error of the predicted action,

        L_I,t = ½ Σ_d ( â_t,d − a_t,d )²

    with gradient into the prediction only (the taken action is data).

    Args:
      predicted_t: `[T, B, D]` the inverse model's action â_t.
      a_t: `[T, B, D]` actions taken.
      mask_t: optional `[T, B]`; masked steps give zero loss and gradient.

    Returns:
      `[T, B]` per-step loss.
    """
    return C.masked_squared_error(
        "predicted_t", predicted_t, "a_t", sg(a_t), mask_t, "[T, B, D]", _half_sum
    )


def _half_sum(err):
    """½ Σ over the last axis."""
    return 0.5 * jnp.sum(err, axis=-1)
