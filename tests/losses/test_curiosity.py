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


# ICM (arXiv:1705.05363, §2.2), written from eqs. 3, 5 and 6 one step at a time.


def icm_forward_np(pred, feat, mask):
    """L_F = ½ ‖f(φ(s_t), a_t) − φ(s_{t+1})‖², 0 where masked."""
    out = np.zeros(pred.shape[:2])
    for t, b in np.ndindex(*pred.shape[:2]):
        if mask[t, b]:
            out[t, b] = 0.5 * sum((p - q) ** 2 for p, q in zip(pred[t, b], feat[t, b], strict=True))
    return out


def icm_inverse_np(logits, actions, mask):
    """L_I = −log p̂(a_t) with p̂ = softmax(logits), 0 where masked."""
    out = np.zeros(logits.shape[:2])
    for t, b in np.ndindex(*logits.shape[:2]):
        if mask[t, b]:
            z = logits[t, b] - logits[t, b].max()
            out[t, b] = -(z[actions[t, b]] - np.log(np.exp(z).sum()))
    return out


def icm_inverse_continuous_np(pred, actions, mask):
    out = np.zeros(pred.shape[:2])
    for t, b in np.ndindex(*pred.shape[:2]):
        if mask[t, b]:
            out[t, b] = 0.5 * np.sum((pred[t, b] - actions[t, b]) ** 2)
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", [0, 1])
def test_icm_losses_match_numpy(shape, seed):
    rng = np.random.default_rng(seed)
    T, B, _ = shape
    A = int(rng.integers(2, 6))
    pred, feat = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    logits = (2.0 * rng.normal(size=(T, B, A))).astype(np.float32)
    actions = rng.integers(0, A, size=(T, B)).astype(np.int32)
    cont_pred, cont_a = (rng.normal(size=(T, B, 3)).astype(np.float32) for _ in range(2))
    mask = (rng.random((T, B)) > 0.3).astype(np.float32)
    f64 = lambda x: x.astype(np.float64)  # noqa: E731
    got = jax.jit(lambda p, q, m: losses.icm_forward_loss(p, q, mask_t=m))(pred, feat, mask)
    want = icm_forward_np(f64(pred), f64(feat), mask)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got = jax.jit(lambda lg, a, m: losses.icm_inverse_loss(lg, a, mask_t=m))(logits, actions, mask)
    want = icm_inverse_np(f64(logits), actions, mask)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got = jax.jit(lambda p, a, m: losses.icm_inverse_loss_continuous(p, a, mask_t=m))(
        cont_pred, cont_a, mask
    )
    want = icm_inverse_continuous_np(f64(cont_pred), f64(cont_a), mask)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # unmasked, vmapped over a leading axis: the same numbers
    got = jax.vmap(losses.icm_forward_loss)(pred[None], feat[None])[0]
    want = icm_forward_np(f64(pred), f64(feat), np.ones((T, B)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_icm_gradients():
    """L_F's gradient reaches both the prediction and the next state's features (eq. 7
    trains the encoder through both); L_I's reaches the logits (softmax − one-hot) and the
    continuous prediction, never the taken action; masked steps carry none."""
    rng = np.random.default_rng(5)
    pred, feat = (jnp.asarray(rng.normal(size=(2, 3, 4)), jnp.float32) for _ in range(2))
    mask = jnp.asarray([[1, 0, 1], [1, 1, 0]], jnp.float32)
    g_pred, g_feat = jax.grad(
        lambda p, q: jnp.sum(losses.icm_forward_loss(p, q, mask_t=mask)), (0, 1)
    )(pred, feat)
    want = np.asarray(pred - feat) * np.asarray(mask)[..., None]
    np.testing.assert_allclose(g_pred, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g_feat, -want, rtol=1e-5, atol=1e-7)
    logits = jnp.asarray(rng.normal(size=(2, 3, 5)), jnp.float32)
    actions = jnp.asarray(rng.integers(0, 5, size=(2, 3)), jnp.int32)
    g = jax.grad(lambda lg: jnp.sum(losses.icm_inverse_loss(lg, actions, mask_t=mask)))(logits)
    p = np.exp(np.asarray(logits, np.float64))
    p /= p.sum(-1, keepdims=True)
    want = (p - np.eye(5)[np.asarray(actions)]) * np.asarray(mask)[..., None]
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-6)
    a = jnp.asarray(rng.normal(size=(2, 3, 2)), jnp.float32)
    g_p, g_a = jax.grad(
        lambda q, b: jnp.sum(losses.icm_inverse_loss_continuous(q, b, mask_t=mask)), (0, 1)
    )(pred[..., :2], a)
    np.testing.assert_allclose(g_p, (pred[..., :2] - a) * mask[..., None], rtol=1e-5, atol=1e-7)
    assert np.all(np.asarray(g_a) == 0.0)


def test_icm_bad_inputs_name_the_argument():
    p = jnp.zeros((2, 3, 4))
    with pytest.raises(ValueError, match="features_t has shape"):
        losses.icm_forward_loss(p, jnp.zeros((2, 3, 5)))
    with pytest.raises(ValueError, match="a_t must be an integer"):
        losses.icm_inverse_loss(p, jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="a_t has shape"):
        losses.icm_inverse_loss(p, jnp.zeros((3, 2), jnp.int32))
    with pytest.raises(ValueError, match="a_t has shape"):
        losses.icm_inverse_loss_continuous(p, jnp.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="a_t must be floating"):
        losses.icm_inverse_loss_continuous(p, jnp.zeros((2, 3, 4), jnp.int32))
