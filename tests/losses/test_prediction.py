"""Tests for `agents.losses.prediction` (the Advanced-SAC seed's prediction model): the
transition, reward and reconstruction losses against NumPy written from their equations
(the Gaussian density and the KL divergence to N(0, 1) in closed form), under jit and vmap,
with masks; which inputs carry gradient; the gradient gate (Du et al. 2018,
arXiv:1812.02224) on opposing, agreeing and zero gradients; one-line shape errors."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import losses

SHAPES = [(1, 1, 1), (3, 4, 8), (5, 2, 3)]  # [T, B, K]


def transition_np(mean, log_std, nxt, kl, mask):
    """Per step: mean_k of −log N(s'_k; μ_k, σ_k²) plus kl · mean_k KL(N(μ_k, σ_k²) ‖ N(0, 1)),
    written from the densities: −log N = ½ log(2π σ²) + (s' − μ)²/(2σ²), and
    KL = log(1/σ) + (σ² + μ²)/2 − ½."""
    out = np.zeros(mean.shape[:2])
    for t in range(mean.shape[0]):
        for b in range(mean.shape[1]):
            if not mask[t, b]:
                continue
            nll, div = [], []
            for m, ls, s in zip(mean[t, b], log_std[t, b], nxt[t, b], strict=True):
                var = math.exp(ls) ** 2
                nll.append(0.5 * math.log(2 * math.pi * var) + (s - m) ** 2 / (2 * var))
                div.append(math.log(1 / math.exp(ls)) + (var + m * m) / 2 - 0.5)
            out[t, b] = np.mean(nll) + kl * np.mean(div)
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kl", [0.0, 0.8])
def test_transition_loss_matches_numpy(shape, kl):
    rng = np.random.default_rng(len(shape) + shape[-1])
    mean, nxt = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    log_std = rng.uniform(-1.5, 1.0, size=shape).astype(np.float32)
    mask = (rng.random(shape[:2]) > 0.3).astype(np.float32)
    want = transition_np(mean, log_std, nxt, kl, mask)
    fn = jax.jit(lambda m, s, n, k: losses.transition_loss(m, s, n, kl, mask_t=k))
    got = fn(mean, log_std, nxt, mask)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    # vmap over independent batches: the same numbers, unmasked.
    stacked = jax.vmap(lambda m, s, n: losses.transition_loss(m, s, n, kl))(
        mean[None], log_std[None], nxt[None]
    )
    want_all = transition_np(mean, log_std, nxt, kl, np.ones(shape[:2]))
    np.testing.assert_allclose(np.asarray(stacked[0]), want_all, rtol=1e-5, atol=1e-5)


def test_transition_gradient_reaches_mean_and_log_std_not_the_target():
    rng = np.random.default_rng(0)
    mean, log_std, nxt = (jnp.asarray(rng.normal(size=(2, 3, 4)), jnp.float32) for _ in range(3))
    mask = jnp.asarray([[1, 0, 1], [1, 1, 0]], jnp.float32)

    def total(m, s, n):
        return jnp.sum(losses.transition_loss(m, s, n, 0.5, mask_t=mask))

    g_m, g_s, g_n = jax.grad(total, (0, 1, 2))(mean, log_std, nxt)
    assert np.all(np.asarray(g_n) == 0.0)  # the target critic's representation: a target
    # d/dμ of the NLL is (μ − s')/σ², of the KL term μ; both averaged over K = 4.
    var = np.exp(2 * np.asarray(log_std))
    want_m = ((np.asarray(mean) - np.asarray(nxt)) / var + 0.5 * np.asarray(mean)) / 4
    np.testing.assert_allclose(np.asarray(g_m), want_m * np.asarray(mask)[..., None], rtol=1e-4)
    assert np.all(np.asarray(g_s)[np.asarray(mask) == 0] == 0.0)
    assert np.any(np.asarray(g_s) != 0.0)


@pytest.mark.parametrize("shape", SHAPES)
def test_reward_and_reconstruction_losses_match_numpy(shape):
    rng = np.random.default_rng(shape[-1])
    T, B, D = shape
    r_hat, r = (rng.normal(size=(T, B)).astype(np.float32) for _ in range(2))
    x_hat, x = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    mask = (rng.random((T, B)) > 0.4).astype(np.float32)
    want_r = np.where(mask > 0, (r_hat - r) ** 2, 0.0)
    want_x = np.array(
        [[np.mean((x_hat[t, b] - x[t, b]) ** 2) * mask[t, b] for b in range(B)] for t in range(T)]
    )
    got_r = jax.jit(lambda p, y, m: losses.reward_model_loss(p, y, mask_t=m))(r_hat, r, mask)
    got_x = jax.jit(lambda p, y, m: losses.reconstruction_loss(p, y, mask_t=m))(x_hat, x, mask)
    np.testing.assert_allclose(np.asarray(got_r), want_r, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_x), want_x, rtol=1e-5, atol=1e-6)
    g_pred, g_target = jax.grad(
        lambda p, y: jnp.sum(losses.reconstruction_loss(p, y, mask_t=mask)), (0, 1)
    )(x_hat, x)
    np.testing.assert_allclose(
        np.asarray(g_pred), 2 * (x_hat - x) / D * mask[..., None], rtol=1e-5, atol=1e-6
    )
    assert np.all(np.asarray(g_target) == 0.0)
    g_r = jax.grad(lambda y: jnp.sum(losses.reward_model_loss(jnp.asarray(r_hat), y)))(r)
    assert np.all(np.asarray(g_r) == 0.0)


def _tree(rng, scale=1.0):
    return {"a": rng.normal(size=(3, 2)) * scale, "b": {"c": rng.normal(size=(4,)) * scale}}


def _flat(tree):
    return np.concatenate([np.ravel(x) for x in jax.tree.leaves(tree)])


@pytest.mark.parametrize("seed", range(6))
def test_gate_adds_the_auxiliary_gradient_only_when_it_agrees(seed):
    rng = np.random.default_rng(seed)
    main = jax.tree.map(jnp.asarray, _tree(rng))
    aux = jax.tree.map(jnp.asarray, _tree(rng, scale=0.5))
    g, h = _flat(main), _flat(aux)
    cos = g @ h / (np.linalg.norm(g) * np.linalg.norm(h))
    combined, gate, got_cos = jax.jit(losses.gated_gradients)(main, aux)
    np.testing.assert_allclose(float(got_cos), cos, rtol=1e-5)
    assert float(gate) == float(cos > 0)
    want = g + h if cos > 0 else g
    np.testing.assert_allclose(_flat(combined), want, rtol=1e-6)


def test_gate_is_zero_for_opposing_and_one_for_agreeing_gradients():
    main = {"w": jnp.asarray([1.0, 2.0, -1.0])}
    opposing = {"w": jnp.asarray([-1.0, -1.0, 0.5])}  # cos < 0
    agreeing = {"w": jnp.asarray([0.5, 0.0, 0.0])}  # cos > 0
    combined, gate, cos = losses.gated_gradients(main, opposing)
    assert float(gate) == 0.0 and float(cos) < 0
    np.testing.assert_array_equal(np.asarray(combined["w"]), np.asarray(main["w"]))  # unchanged
    combined, gate, cos = losses.gated_gradients(main, agreeing)
    assert float(gate) == 1.0 and float(cos) > 0
    np.testing.assert_array_equal(np.asarray(combined["w"]), [1.5, 2.0, -1.0])  # added as is
    zero = {"w": jnp.zeros(3)}
    combined, gate, cos = losses.gated_gradients(main, zero)
    assert float(gate) == 0.0 and float(cos) == 0.0 and np.isfinite(float(cos))
    # The cosine it reports is a constant: no gradient flows back through it.
    d = jax.grad(lambda x: losses.gated_gradients(main, {"w": x})[2])(agreeing["w"])
    assert np.all(np.asarray(d) == 0.0)


def test_bad_shapes_are_one_line_errors():
    x = jnp.zeros((2, 3, 4))
    with pytest.raises(ValueError, match="log_std_t"):
        losses.transition_loss(x, jnp.zeros((2, 3, 5)), x, 0.8)
    with pytest.raises(ValueError, match="kl"):
        losses.transition_loss(x, x, x, -1.0)
    with pytest.raises(ValueError, match="r_t"):
        losses.reward_model_loss(jnp.zeros((2, 3)), jnp.zeros((3, 2)))
    with pytest.raises(ValueError, match="obs_t"):
        losses.reconstruction_loss(x, jnp.zeros((2, 3, 5)))
    with pytest.raises(ValueError, match="same parameters"):
        losses.gated_gradients({"w": x}, {"v": x})
    with pytest.raises(ValueError, match="shape"):
        losses.gated_gradients({"w": x}, {"w": jnp.zeros(3)})
