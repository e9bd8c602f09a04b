"""Importance ratios π/(μ + ε): an action with μ(a) = 0 and π(a) = 0 gives finite losses.

Such an action is one the behaviour policy could not take (a masked, illegal action with
logit −inf), taken anyway at a fake auto-reset step or present in the sums over actions.
Without ε the ratio is 0/0 = NaN and spreads into every target of the trace.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from loss_refs import (
    MU_EPS,
    acer_policy_gradient,
    beta_loo_gradient,
    distributional_retrace_np,
    f32,
    rand_discounts,
    rand_probs,
    retrace_recursive,
    softmax_np,
)

from agents import losses

SHAPES = [(1, 1, 3), (4, 2, 3), (5, 3, 4)]  # (T, B, A)
TOL = {"rtol": 1e-5, "atol": 1e-4}
GTOL = {"rtol": 1e-4, "atol": 1e-5}


def test_reference_epsilon_is_the_library_epsilon():
    assert losses.MU_EPSILON == MU_EPS == 1e-8


def masked_inputs(seed, T, B, A):
    """Random inputs where the last action has π = μ = 0 everywhere and is taken at t = 0 of
    every trace and wherever the dice say so."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(T, B, A)) * 1.5
    logits[..., -1] = -np.inf
    mu = rand_probs(rng, (T, B, A))
    mu[..., -1] = 0.0
    mu /= mu.sum(-1, keepdims=True)
    a = rng.integers(0, A, size=(T, B)).astype(np.int32)
    a[0] = A - 1
    q = rng.normal(size=(T, B, A)) * 2.0
    r = rng.normal(size=(T, B))
    d = rand_discounts(rng, (T, B))
    boot = rng.normal(size=(B,))
    return logits, softmax_np(logits), mu, a, q, r, d, boot


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("lam", "c_max"), [(1.0, 1.0), (0.7, 3.0)])
def test_retrace_with_zero_pi_and_mu_is_finite_and_matches_reference(shape, lam, c_max):
    _, pi, mu, a, q, r, d, boot = masked_inputs(0, *shape)
    assert np.all(pi[..., -1] == 0.0) and np.all(mu[..., -1] == 0.0)
    args = (*f32(q, pi, mu), jnp.asarray(a), *f32(r, d, boot))
    got = jax.jit(losses.retrace_targets)(*args, lam, c_max)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, retrace_recursive(q, pi, mu, a, r, d, boot, lam, c_max), **TOL)

    def critic_loss(q):
        q_ret = losses.retrace_targets(q, *args[1:], lam, c_max)
        return jnp.sum(losses.acer_value_loss(q, args[3], q_ret))

    value, grad = jax.jit(jax.value_and_grad(critic_loss))(args[0])
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    coeffs = losses.trace_coefficients(f32(0.0), f32(0.0), lam, c_max, f32(1.0))
    assert coeffs == 0.0


@pytest.mark.parametrize("shape", SHAPES)
def test_distributional_retrace_with_zero_pi_and_mu_is_finite(shape):
    T, B, A = shape
    atoms = np.linspace(-2.0, 2.0, 5)
    _, pi, mu, a, _, r, d, _ = masked_inputs(1, *shape)
    rng = np.random.default_rng(2)
    q_probs = rand_probs(rng, (T, B, A, 5))
    boot = rand_probs(rng, (B, 5))
    args = (*f32(q_probs, pi, mu), jnp.asarray(a), *f32(r, d, boot, atoms))
    got = jax.jit(losses.distributional_retrace_targets)(*args, 0.9)
    assert np.all(np.isfinite(got))
    want = distributional_retrace_np(q_probs, pi, mu, a, r, d, boot, atoms, lam=0.9)
    np.testing.assert_allclose(got, want, **TOL)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("c", [1.0, 10.0])
def test_acer_policy_loss_with_zero_pi_and_mu_is_finite_and_matches_eq9(shape, c):
    logits, _, mu, a, q, _, _, _ = masked_inputs(3, *shape)
    q_ret = np.random.default_rng(4).normal(size=shape[:2])
    args = (*f32(logits, q, mu), jnp.asarray(a), f32(q_ret))

    def total(lg):
        return jnp.sum(losses.acer_policy_loss(lg, *args[1:], c))

    value, grad = jax.jit(jax.value_and_grad(total))(args[0])
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, -acer_policy_gradient(logits, q, mu, a, q_ret, c), **GTOL)

    # Under the trust region as well (the average policy masks the same action).
    def tr_total(lg):
        out = losses.trust_region_policy_loss(
            lambda x: losses.acer_policy_loss(x, *args[1:], c), lg, lg + 0.1, 1.0
        )
        return jnp.sum(out.loss)

    value, grad = jax.jit(jax.value_and_grad(tr_total))(args[0])
    assert np.isfinite(value) and np.all(np.isfinite(grad))


@pytest.mark.parametrize("shape", SHAPES)
def test_beta_loo_with_zero_mu_is_finite_and_matches_eq8(shape):
    logits, _, mu, a, q, r, _, _ = masked_inputs(5, *shape)
    mu_a = np.take_along_axis(mu, a[..., None], axis=-1)[..., 0]
    assert np.all(mu_a[0] == 0.0)
    args = (*f32(logits, q), jnp.asarray(a), *f32(mu_a, r))

    def total(lg):
        return jnp.sum(losses.beta_loo_policy_loss(lg, *args[1:], 2.0))

    value, grad = jax.jit(jax.value_and_grad(total))(args[0])
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, -beta_loo_gradient(logits, q, a, mu_a, r, 2.0), **GTOL)
