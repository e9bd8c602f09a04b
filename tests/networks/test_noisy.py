"""NoisyNet layers (networks/noisy.py, arXiv:1706.10295): the weight noise is the outer
product f(ε_i) f(ε_j) with f(x) = sgn(x)√|x| (checked in NumPy from the same Gaussian
draws), the initialisation is the paper's factorised one, gradients reach μ and σ, the noise
follows the explicit key under jit, and the noisy Q head keeps the dueling structure."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from networks import QNetwork
from networks.noisy import NoisyDense, noisy_weights


def f_np(x):
    return np.sign(x) * np.sqrt(np.abs(x))


@pytest.mark.parametrize("p, q", [(1, 1), (5, 3), (64, 7)])
def test_noise_is_factorised_and_the_layer_uses_it(p, q):
    layer = NoisyDense(q)
    x = jnp.asarray(np.random.default_rng(p).normal(size=(4, p)), jnp.float32)
    params = layer.init(jax.random.PRNGKey(0), x)["params"]
    key = jax.random.PRNGKey(7)
    kernel, bias = (np.asarray(v, np.float64) for v in noisy_weights(params, key))
    mu_w, sigma_w = np.asarray(params["mu_kernel"]), np.asarray(params["sigma_kernel"])
    mu_b, sigma_b = np.asarray(params["mu_bias"]), np.asarray(params["sigma_bias"])
    # The Gaussian draws, then the noise written from eq. 10-11 in NumPy.
    k_in, k_out = jax.random.split(key)
    eps_in = np.asarray(jax.random.normal(k_in, (p,)), np.float64)
    eps_out = np.asarray(jax.random.normal(k_out, (q,)), np.float64)
    eps_w = np.array([[f_np(eps_in[i]) * f_np(eps_out[j]) for j in range(q)] for i in range(p)])
    np.testing.assert_allclose((kernel - mu_w) / sigma_w, eps_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((bias - mu_b) / sigma_b, f_np(eps_out), rtol=1e-5, atol=1e-6)
    assert np.linalg.matrix_rank(eps_w) == 1  # p + q draws, not p·q
    y = jax.jit(lambda x, k: layer.apply({"params": params}, x, k))(x, key)
    np.testing.assert_allclose(np.asarray(y), np.asarray(x) @ kernel + bias, rtol=1e-4, atol=1e-5)
    means = layer.apply({"params": params}, x)  # no key: the noise-free layer
    np.testing.assert_allclose(np.asarray(means), np.asarray(x) @ mu_w + mu_b, rtol=1e-5)


def test_initialisation_is_the_papers_factorised_one():
    p, q = 400, 300
    params = NoisyDense(q).init(jax.random.PRNGKey(1), jnp.zeros((1, p)))["params"]
    bound = 1.0 / np.sqrt(p)
    for name, shape in (("mu_kernel", (p, q)), ("mu_bias", (q,))):
        mu = np.asarray(params[name])
        assert mu.shape == shape and np.all(np.abs(mu) <= bound)
        assert np.abs(mu).max() > 0.99 * bound  # uniform over the whole range
        assert abs(float(np.mean(mu))) < 0.05 * bound
        np.testing.assert_allclose(np.var(mu), bound**2 / 3, rtol=0.1)
    for name in ("sigma_kernel", "sigma_bias"):
        np.testing.assert_allclose(np.asarray(params[name]), 0.5 / np.sqrt(p), rtol=1e-6)


def test_gradients_reach_mu_and_sigma_and_keys_decide_the_noise():
    layer = NoisyDense(3)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 5)), jnp.float32)
    params = layer.init(jax.random.PRNGKey(0), x)

    def loss(params, key):
        return jnp.sum(jnp.square(layer.apply(params, x, key) - 1.0))

    grads = jax.jit(jax.grad(loss))(params, jax.random.PRNGKey(3))["params"]
    for name in ("mu_kernel", "sigma_kernel", "mu_bias", "sigma_bias"):
        g = np.asarray(grads[name])
        assert np.all(np.isfinite(g)) and np.count_nonzero(g) == g.size, name
    no_noise = jax.grad(lambda p: jnp.sum(layer.apply(p, x)))(params)["params"]
    assert np.all(np.asarray(no_noise["sigma_kernel"]) == 0.0)
    run = jax.jit(lambda k: layer.apply(params, x, k))
    a, b = run(jax.random.PRNGKey(1)), run(jax.random.PRNGKey(2))
    np.testing.assert_array_equal(np.asarray(run(jax.random.PRNGKey(1))), np.asarray(a))
    assert not np.allclose(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dueling", [False, True])
def test_noisy_q_network(dueling):
    net = QNetwork((4,), num_actions=3, hidden=(16,), dueling=dueling, noisy=True)
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(6, 4)), jnp.float32)
    params = net.init(jax.random.PRNGKey(0), obs)
    head = params["params"]["QHead_0"]
    names = {"advantage", "value"} if dueling else {"q"}
    assert set(head) == names and all("sigma_kernel" in head[n] for n in names)
    q0 = net.apply(params, obs).q_values
    q1 = net.apply(params, obs, noise_key=jax.random.PRNGKey(1)).q_values
    assert q0.shape == q1.shape == (6, 3) and not np.allclose(np.asarray(q0), np.asarray(q1))
