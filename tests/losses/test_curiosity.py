"""Tests for `agents.losses.curiosity` (RND, arXiv:1810.12894): the prediction error and the
intrinsic reward against NumPy written from §2.2 and §2.4, under jit and vmap; gradients
reach the predictor only; shapes are checked."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import losses

SHAPES = [(1, 1, 1), (3, 4, 8), (5, 2, 16)]  # [T, B, K]


def error_np(pred, target, mask):
    """e_t = mean_k (f̂(x_t)_k − f(x_t)_k)², 0 where masked."""
    out = np.zeros(pred.shape[:2])
    for t in range(pred.shape[0]):
        for b in range(pred.shape[1]):
            if mask[t, b]:
                pairs = zip(pred[t, b], target[t, b], strict=True)
                out[t, b] = np.mean([(p - q) ** 2 for p, q in pairs])
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", [0, 1])
def test_prediction_error_and_reward_match_numpy(shape, seed):
    rng = np.random.default_rng(seed)
    pred = rng.normal(size=shape).astype(np.float32)
    target = rng.normal(size=shape).astype(np.float32)
    mask = (rng.random(shape[:2]) > 0.3).astype(np.float32)
    want = error_np(pred.astype(np.float64), target.astype(np.float64), mask)
    got = jax.jit(lambda p, q, m: losses.rnd_prediction_error(p, q, mask_t=m))(pred, target, mask)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    var = np.float32(rng.uniform(0.1, 4.0))
    reward = jax.jit(losses.rnd_intrinsic_reward)(got, var)
    np.testing.assert_allclose(np.asarray(reward), want / np.sqrt(var + 1e-8), rtol=1e-5)
    # vmap over a leading axis of independent batches gives the same numbers.
    stacked = jax.vmap(lambda p, q: losses.rnd_prediction_error(p, q))(pred[None], target[None])
    want_all = error_np(pred, target, np.ones(shape[:2]))
    np.testing.assert_allclose(np.asarray(stacked[0]), want_all, rtol=1e-5, atol=1e-6)


def test_gradient_reaches_the_predictor_only():
    rng = np.random.default_rng(3)
    pred, target = (jnp.asarray(rng.normal(size=(2, 3, 4)), jnp.float32) for _ in range(2))
    mask = jnp.asarray([[1, 0, 1], [1, 1, 0]], jnp.float32)

    def loss(p, q):
        return jnp.sum(losses.rnd_prediction_error(p, q, mask_t=mask))

    g_pred, g_target = jax.grad(loss, (0, 1))(pred, target)
    want = 2.0 * (pred - target) / 4.0 * mask[..., None]
    np.testing.assert_allclose(np.asarray(g_pred), np.asarray(want), rtol=1e-5, atol=1e-7)
    assert np.all(np.asarray(g_target) == 0.0)
    g_err = jax.grad(lambda e: jnp.sum(losses.rnd_intrinsic_reward(e, jnp.float32(2.0))))(
        jnp.ones((2, 3))
    )
    assert np.all(np.asarray(g_err) == 0.0)  # a constant of the critic's target


def test_bad_inputs_name_the_argument():
    p = jnp.zeros((2, 3, 4))
    with pytest.raises(ValueError, match="target_t has shape"):
        losses.rnd_prediction_error(p, jnp.zeros((2, 3, 5)))
    with pytest.raises(ValueError, match="predicted_t must have rank 3"):
        losses.rnd_prediction_error(jnp.zeros((2, 3)), jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="mask_t has shape"):
        losses.rnd_prediction_error(p, p, mask_t=jnp.ones((2, 3, 1)))
    with pytest.raises(ValueError, match="error_var must be a scalar"):
        losses.rnd_intrinsic_reward(jnp.zeros((2, 3)), jnp.ones((3,)))
    with pytest.raises(ValueError, match="error_var must"):
        losses.rnd_intrinsic_reward(jnp.zeros((2, 3)), -1.0)
