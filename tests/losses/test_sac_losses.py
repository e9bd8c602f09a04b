"""Tests for `agents.losses.sac`: the tanh-Gaussian log-density (against eq. 26 and against
samples), SAC's targets and losses, discrete SAC, TD3's target and the deterministic policy
gradient."""

import math
from itertools import pairwise

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loss_refs import f32, rand_discounts
from loss_refs_families import (
    discrete_actor_np,
    discrete_soft_targets_np,
    discrete_temperature_np,
    log_sech2_np,
    n_step_soft_targets_np,
    scale_action_np,
    soft_targets_np,
    tanh_gaussian_log_prob_np,
    td3_actions_np,
    td3_targets_np,
)

from agents import losses

TOL = {"rtol": 1e-5, "atol": 1e-4}
SETTINGS = settings(max_examples=10, deadline=None)
ACTION_SHAPES = [(1, 1, 1), (4, 2, 3), (3, 6)]  # [..., D]

log_prob_jit = jax.jit(losses.tanh_gaussian_log_prob)


def gaussian_inputs(rng, shape):
    """u = μ + σξ within ±6, where eq. 26's 1 − tanh²(u) is still accurate in float64."""
    mean = rng.normal(size=shape)
    log_std = rng.uniform(-1.5, 0.7, size=shape)
    u = mean + np.exp(log_std) * rng.normal(size=shape)
    return np.clip(u, -6.0, 6.0), mean, log_std


# ---------------------------------------------------------------------------------------------
# The tanh-Gaussian log-density
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(ACTION_SHAPES),
    bounded=st.booleans(),
)
def test_tanh_gaussian_log_prob_matches_eq_26(seed, shape, bounded):
    rng = np.random.default_rng(seed)
    u, mean, log_std = gaussian_inputs(rng, shape)
    D = shape[-1]
    if bounded:
        low = rng.uniform(-3.0, 0.0, size=D)
        high = low + rng.uniform(0.5, 4.0, size=D)
        got = log_prob_jit(*f32(u, mean, log_std), low=f32(low), high=f32(high))
        want = tanh_gaussian_log_prob_np(u, mean, log_std, low, high)
    else:
        got = log_prob_jit(*f32(u, mean, log_std))
        want = tanh_gaussian_log_prob_np(u, mean, log_std)
    assert got.shape == shape[:-1]
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


def test_tanh_correction_is_stable_for_large_pre_tanh_values():
    # Far in the tails 1 − tanh²(u) rounds to 0 (float32 from |u| ≈ 9, float64 from ≈ 19), and
    # log(1 − tanh²) would be −inf. The stable form follows log sech²(u) ≈ 2 log 2 − 2|u|.
    u = np.array([-100.0, -50.0, -20.0, -9.0, -1.0, 0.0, 1.0, 9.0, 20.0, 50.0, 100.0])[:, None]
    zeros = np.zeros_like(u)
    got = np.asarray(log_prob_jit(*f32(u, zeros, zeros)))
    log_normal = -0.5 * u[:, 0] ** 2 - 0.5 * math.log(2.0 * math.pi)
    want = log_normal - log_sech2_np(u)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_tanh_gaussian_density_matches_samples():
    """Sample a = scale(tanh(u)), u ~ N(μ, σ²), in NumPy; the probability of each histogram bin
    must match the integral of exp(log π) over it (binomial noise, 5 standard deviations)."""
    rng = np.random.default_rng(0)
    mu, sigma, low, high = 0.4, 0.9, -2.0, 3.0
    n = 400_000
    actions = low + (np.tanh(rng.normal(mu, sigma, size=n)) + 1.0) * (high - low) / 2.0
    edges = np.linspace(low, high, 26)
    freq = np.histogram(actions, bins=edges)[0] / n
    # Integrate the density over each bin on a fine grid of actions (pre-images via atanh).
    fine = np.linspace(low, high, 25 * 400 + 1)[1:-1]
    u = np.arctanh(2.0 * (fine - low) / (high - low) - 1.0)
    ones = np.ones((u.size, 1))
    logp = log_prob_jit(
        *f32(u[:, None], mu * ones, math.log(sigma) * ones), low=f32([low]), high=f32([high])
    )
    density = np.exp(np.asarray(logp, np.float64))
    step = fine[1] - fine[0]
    mass = np.array([density[(fine >= a) & (fine < b)].sum() * step for a, b in pairwise(edges)])
    assert abs(density.sum() * step - 1.0) < 2e-3  # the density integrates to 1 over the box
    noise = np.sqrt(mass * (1.0 - mass) / n)
    assert np.all(np.abs(freq - mass) < 5.0 * noise + 2e-4), np.max(np.abs(freq - mass) / noise)


def test_tanh_gaussian_log_prob_gradients():
    # Hand-derived: ∂/∂u = −(u − μ)/σ² + 2 tanh(u), ∂/∂μ = (u − μ)/σ², ∂/∂log σ = z² − 1.
    rng = np.random.default_rng(1)
    u, mean, log_std = gaussian_inputs(rng, (3, 2))
    grads = jax.jit(jax.grad(lambda *x: jnp.sum(losses.tanh_gaussian_log_prob(*x)), (0, 1, 2)))(
        *f32(u, mean, log_std)
    )
    var = np.exp(2.0 * log_std)
    z2 = (u - mean) ** 2 / var
    for g, want in zip(grads, (-(u - mean) / var + 2 * np.tanh(u), (u - mean) / var, z2 - 1),
                       strict=True):  # fmt: skip
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-4, atol=1e-5)


def test_scale_action_matches_reference():
    rng = np.random.default_rng(2)
    a = np.tanh(rng.normal(size=(4, 2, 3)) * 2.0)
    a[0, 0] = [-1.0, 1.0, 0.0]
    low, high = np.array([-2.0, 0.0, -0.5]), np.array([3.0, 1.0, 0.5])
    got = jax.jit(losses.scale_action)(*f32(a, low, high))
    np.testing.assert_allclose(np.asarray(got), scale_action_np(a, low, high), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got)[0, 0], [-2.0, 1.0, 0.0], atol=1e-7)


# ---------------------------------------------------------------------------------------------
# SAC targets and losses
# ---------------------------------------------------------------------------------------------


def step_inputs(rng, T, B, p_term=0.3):
    r = rng.normal(size=(T, B))
    d = rand_discounts(rng, (T, B), p_term)
    q = rng.normal(size=(T + 1, B)) * 3.0  # min_i Q'_i(x_s, a'_s), s = 0..T
    logp = rng.normal(size=(T + 1, B)) - 1.0  # log π(a'_s|x_s)
    return r, d, q, logp


soft_jit = jax.jit(losses.soft_q_targets)
n_step_soft_jit = jax.jit(losses.n_step_soft_q_targets, static_argnames="n")


@pytest.mark.parametrize(("seed", "shape"), [(0, (6, 3)), (1, (1, 4)), (2, (9, 1))])
@pytest.mark.parametrize("n", [1, 3])
def test_soft_q_targets_match_reference(seed, shape, n):
    rng = np.random.default_rng(seed)
    (T, B), alpha = shape, 0.2
    r, d, q, logp = step_inputs(rng, T, B)
    mask = (rng.random((T, B)) > 0.25).astype(np.float64)
    one_step = soft_jit(*f32(r, d, q[1:], logp[1:]), alpha)
    np.testing.assert_allclose(
        np.asarray(one_step), soft_targets_np(r, d, q[1:], logp[1:], alpha), **TOL
    )
    n_step = n_step_soft_jit(
        *f32(r, d, q[:T], logp[:T], q[T], logp[T]), alpha, n=n, mask_t=f32(mask)
    )
    np.testing.assert_allclose(
        np.asarray(n_step), n_step_soft_targets_np(r, d, q, logp, alpha, n, mask), **TOL
    )
    if n == 1:  # without a mask the one-step trace targets are the transition targets
        unmasked = n_step_soft_jit(
            *f32(r, d, q[:T], logp[:T], q[T], logp[T]), alpha, n=1, mask_t=f32(np.ones((T, B)))
        )
        np.testing.assert_allclose(np.asarray(unmasked), np.asarray(one_step), **TOL)


def test_soft_targets_carry_no_gradient():
    r, d, q, logp = f32(*step_inputs(np.random.default_rng(3), 4, 2))

    def total(r, d, q, logp, alpha):
        one = losses.soft_q_targets(r, d, q[1:], logp[1:], alpha)
        many = losses.n_step_soft_q_targets(r, d, q[:-1], logp[:-1], q[-1], logp[-1], alpha, 2)
        return jnp.sum(one**2 + many**2)

    grads = jax.jit(jax.grad(total, argnums=(0, 1, 2, 3, 4)))(r, d, q, logp, 0.3)
    assert all(np.all(np.asarray(g) == 0.0) for g in grads)


@jax.jit
def sac_losses_and_grads(q, logp, log_alpha, target_entropy, mask):
    def actor(q, logp, alpha):
        return jnp.sum(losses.sac_actor_loss(q, logp, alpha, mask_t=mask))

    def temperature(log_alpha, logp, target_entropy):
        return jnp.sum(losses.sac_temperature_loss(log_alpha, logp, target_entropy, mask_t=mask))

    alpha = jnp.exp(log_alpha)
    return (
        losses.sac_actor_loss(q, logp, alpha, mask_t=mask),
        jax.grad(actor, argnums=(0, 1, 2))(q, logp, alpha),
        losses.sac_temperature_loss(log_alpha, logp, target_entropy, mask_t=mask),
        jax.grad(temperature, argnums=(0, 1, 2))(log_alpha, logp, target_entropy),
    )


@pytest.mark.parametrize("shape", [(5, 3), (1, 1), (8, 2)])
def test_sac_actor_and_temperature_losses_and_gradients(shape):
    rng = np.random.default_rng(list(shape))
    (T, B), log_alpha, target_entropy = shape, -1.2, -2.0
    q, logp = rng.normal(size=(T, B)) * 3.0, rng.normal(size=(T, B)) - 1.0
    mask = (rng.random((T, B)) > 0.25).astype(np.float64)
    actor, actor_grads, temp, temp_grads = sac_losses_and_grads(
        *f32(q, logp, log_alpha, target_entropy, mask)
    )
    alpha = math.exp(log_alpha)
    # Eq. 7: α log π(a|x) − Q(x, a), per step; masked steps 0.
    np.testing.assert_allclose(np.asarray(actor), mask * (alpha * logp - q), **TOL)
    g_q, g_logp, g_alpha = (np.asarray(g) for g in actor_grads)
    np.testing.assert_allclose(g_q, -mask, rtol=1e-6)
    np.testing.assert_allclose(g_logp, alpha * mask, rtol=1e-6)
    assert float(g_alpha) == 0.0  # α is a constant in the actor loss
    # Eq. 18: −α (log π + H̄), per step; its gradient in log α is the same sum.
    np.testing.assert_allclose(np.asarray(temp), -alpha * mask * (logp + target_entropy), **TOL)
    g_log_alpha, g_logp, g_target = (np.asarray(g) for g in temp_grads)
    np.testing.assert_allclose(
        g_log_alpha, np.sum(-alpha * mask * (logp + target_entropy)), rtol=1e-5, atol=1e-6
    )
    assert np.all(g_logp == 0.0) and float(g_target) == 0.0


def test_sac_actor_gradient_flows_through_the_reparameterised_action():
    # loss = α log π(a|x) − Q(a) with a = tanh(μ + σ ξ) and a toy critic Q(a) = Σ w·a: the
    # gradient in μ is α ∂log π/∂μ (total derivative, through u too) − Σ w (1 − tanh² u).
    rng = np.random.default_rng(5)
    mean, log_std, xi = (
        rng.normal(size=(3, 2, 3, 2)) * np.array([1.0, 0.3, 1.0])[:, None, None, None]
    )
    w, alpha = np.array([1.5, -0.5]), 0.1

    def loss(mean):
        u = mean + jnp.exp(log_std) * xi
        logp = losses.tanh_gaussian_log_prob(u, mean, f32(log_std))
        q = jnp.sum(jnp.tanh(u) * f32(w)[None, None, :], axis=-1)
        return jnp.sum(losses.sac_actor_loss(q, logp, alpha))

    got = np.asarray(jax.jit(jax.grad(loss))(f32(mean)))
    u = mean + np.exp(log_std) * xi
    # ∂log π/∂μ with u = μ + σξ: the Gaussian term is constant in μ, the tanh term gives 2 tanh u.
    want = alpha * 2.0 * np.tanh(u) - w[None, None, :] * (1.0 - np.tanh(u) ** 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Discrete SAC
# ---------------------------------------------------------------------------------------------


def discrete_inputs(seed, T=4, B=3, A=4):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(T, B, A)) * 1.5
    logits[0, 0, -1] = logits[2, 1, 0] = -np.inf  # unavailable actions: π = 0
    q = rng.normal(size=(T, B, A)) * 2.0
    r, d = rng.normal(size=(T, B)), rand_discounts(rng, (T, B))
    return logits, q, r, d


@jax.jit
def discrete_all(logits, q, r, d, log_alpha, target_entropy):
    alpha = jnp.exp(log_alpha)

    def actor(logits, q, alpha):
        return jnp.sum(losses.discrete_sac_actor_loss(logits, q, alpha))

    def temperature(log_alpha, logits, target_entropy):
        return jnp.sum(losses.discrete_sac_temperature_loss(log_alpha, logits, target_entropy))

    return (
        losses.discrete_soft_q_targets(r, d, q, logits, alpha),
        jax.grad(lambda *x: jnp.sum(losses.discrete_soft_q_targets(*x)), argnums=(0, 1, 2, 3, 4))(
            r, d, q, logits, alpha
        ),
        losses.discrete_sac_actor_loss(logits, q, alpha),
        jax.grad(actor, argnums=(0, 1, 2))(logits, q, alpha),
        losses.discrete_sac_temperature_loss(log_alpha, logits, target_entropy),
        jax.grad(temperature, argnums=(0, 1, 2))(log_alpha, logits, target_entropy),
    )


def numeric_grad(fn, x, h=1e-6):
    """Central differences of a float64 NumPy function of x (finite entries only)."""
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        if not np.isfinite(x[i]):
            continue
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        g[i] = (fn(up) - fn(down)) / (2 * h)
    return g


@pytest.mark.parametrize("seed", range(2))
def test_discrete_sac_matches_reference_exactly_over_actions(seed):
    logits, q, r, d = discrete_inputs(seed)
    log_alpha, target_entropy = -1.0, 0.98 * math.log(4)
    alpha = math.exp(log_alpha)
    out = discrete_all(*f32(logits, q, r, d, log_alpha, target_entropy))
    targets, target_grads, actor, actor_grads, temp, temp_grads = out
    np.testing.assert_allclose(
        np.asarray(targets), discrete_soft_targets_np(r, d, q, logits, alpha), **TOL
    )
    assert all(np.all(np.asarray(g) == 0.0) for g in target_grads)
    np.testing.assert_allclose(np.asarray(actor), discrete_actor_np(logits, q, alpha), **TOL)
    g_logits, g_q, g_alpha = (np.asarray(g) for g in actor_grads)
    want = numeric_grad(lambda lg: discrete_actor_np(lg, q, alpha).sum(), logits)
    np.testing.assert_allclose(g_logits, want, rtol=1e-4, atol=1e-5)
    assert np.all(g_logits[~np.isfinite(logits)] == 0.0)
    assert np.all(g_q == 0.0) and float(g_alpha) == 0.0
    want_temp = discrete_temperature_np(log_alpha, logits, target_entropy)
    np.testing.assert_allclose(np.asarray(temp), want_temp, **TOL)
    g_log_alpha, g_logits, g_target = (np.asarray(g) for g in temp_grads)
    np.testing.assert_allclose(g_log_alpha, want_temp.sum(), rtol=1e-5)
    assert np.all(g_logits == 0.0) and float(g_target) == 0.0
    for x in jax.tree.leaves(out):
        assert np.all(np.isfinite(np.asarray(x)))


def test_discrete_sac_masked_steps_are_zero():
    logits, q = f32(*discrete_inputs(6)[:2])
    mask = np.ones(logits.shape[:2], np.float32)
    mask[1, 2] = 0.0

    @jax.jit
    def both(logits, q, mask):
        return (
            losses.discrete_sac_actor_loss(logits, q, 0.1, mask_t=mask),
            losses.discrete_sac_temperature_loss(jnp.float32(0.0), logits, 1.0, mask_t=mask),
        )

    actor, temp = both(logits, q, mask)
    assert float(actor[1, 2]) == 0.0 and float(temp[1, 2]) == 0.0
    assert np.all(np.asarray(actor)[mask > 0] != 0.0)


# ---------------------------------------------------------------------------------------------
# TD3 and DPG
# ---------------------------------------------------------------------------------------------


def test_td3_target_actions_and_targets_match_reference():
    rng = np.random.default_rng(7)
    T, B, D = 5, 3, 2
    low, high = np.array([-1.0, -2.0]), np.array([1.0, 0.5])
    next_action = rng.uniform(-1.2, 1.2, size=(T, B, D))  # some already at or past the bounds
    noise = rng.normal(size=(T, B, D)) * 0.6  # some beyond the clip c = 0.5
    got = jax.jit(losses.td3_target_actions)(*f32(next_action, noise), 0.5, *f32(low, high))
    want = td3_actions_np(next_action, noise, 0.5, low, high)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7)
    assert np.all(np.asarray(got) >= low) and np.all(np.asarray(got) <= high)
    r, d = rng.normal(size=(T, B)), rand_discounts(rng, (T, B))
    q1, q2 = rng.normal(size=(T, B)), rng.normal(size=(T, B))
    y = jax.jit(losses.td3_targets)(*f32(r, d, q1, q2))
    np.testing.assert_allclose(np.asarray(y), td3_targets_np(r, d, q1, q2), **TOL)

    @jax.jit
    def grads(r, d, q1, q2, next_action, noise):
        total = lambda *x: jnp.sum(losses.td3_targets(*x))  # noqa: E731
        smoothed = lambda a, n: jnp.sum(losses.td3_target_actions(a, n, 0.5, low, high))  # noqa: E731
        return (
            *jax.grad(total, argnums=(0, 1, 2, 3))(r, d, q1, q2),
            *jax.grad(smoothed, argnums=(0, 1))(next_action, noise),
        )

    for g in grads(*f32(r, d, q1, q2, next_action, noise)):
        assert np.all(np.asarray(g) == 0.0)


def test_dpg_gradient_is_minus_dq_da_for_a_linear_critic():
    # Q(x, a) = w·a + c·x: ∂Q/∂a = w for every sample. The loss's gradient in a is −w, and
    # through a linear-tanh actor a = tanh(θ x) it equals −∇_θ Q(x, π_θ(x)), with no gradient
    # anywhere near the critic's parameters (they are not in the graph).
    rng = np.random.default_rng(8)
    T, B, D, X = 3, 2, 2, 4
    x = f32(rng.normal(size=(T, B, X)))
    theta = f32(rng.normal(size=(X, D)))
    w, c = f32(np.array([0.7, -1.3])), f32(rng.normal(size=X))

    def critic(w, x, a):
        return jnp.sum(a * w[None, None, :], axis=-1) + jnp.einsum("tbx,x->tb", x, c)

    def actor(theta):
        return jnp.tanh(jnp.einsum("tbx,xd->tbd", x, theta))

    @jax.jit
    def everything(theta, w):
        a = actor(theta)
        dqda = jax.grad(lambda a: jnp.sum(critic(w, x, a)))(jax.lax.stop_gradient(a))
        g_a, g_dqda = jax.grad(lambda a, q: jnp.sum(losses.dpg_loss(a, q)), (0, 1))(a, dqda)
        g_theta = jax.grad(lambda th: jnp.sum(losses.dpg_loss(actor(th), dqda)))(theta)
        want = jax.grad(lambda th: -jnp.sum(critic(w, x, actor(th))))(theta)
        return dqda, g_a, g_dqda, g_theta, want

    dqda, g_a, g_dqda, g_theta, want = (np.asarray(v) for v in everything(theta, w))
    np.testing.assert_allclose(dqda, np.broadcast_to(np.asarray(w), (T, B, D)))
    np.testing.assert_allclose(g_a, -dqda, rtol=1e-6)
    np.testing.assert_allclose(g_theta, want, rtol=1e-5, atol=1e-6)
    assert np.all(g_dqda == 0.0)


def test_dpg_loss_per_sample_gradient_and_mask():
    # A quadratic critic Q(a) = −½‖a − a*‖²: ∂Q/∂a = a* − a differs per sample.
    rng = np.random.default_rng(9)
    a, a_star = f32(rng.normal(size=(4, 3, 2)), rng.normal(size=(4, 3, 2)))
    dqda = a_star - a
    mask = np.ones((4, 3), np.float32)
    mask[2, 1] = 0.0
    fn = jax.jit(jax.value_and_grad(lambda a: jnp.sum(losses.dpg_loss(a, dqda, mask_t=mask))))
    loss, g = fn(a)
    np.testing.assert_allclose(loss, 0.5 * np.sum(mask[..., None] * dqda**2), rtol=1e-5)
    g = np.asarray(g)
    np.testing.assert_allclose(g, -np.asarray(dqda) * mask[..., None], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def valid_kwargs(name):
    rng = np.random.default_rng(10)
    T, B, A, D = 4, 2, 3, 2
    step = lambda: f32(rng.normal(size=(T, B)))  # noqa: E731
    act = lambda: f32(rng.uniform(-0.9, 0.9, size=(T, B, D)))  # noqa: E731
    logits = f32(rng.normal(size=(T, B, A)))
    d = f32(np.full((T, B), 0.9))
    bounds = dict(low=f32(np.full(D, -1.0)), high=f32(np.full(D, 1.0)))
    return {
        "tanh_gaussian_log_prob": dict(pre_tanh=act(), mean=act(), log_std=act(), **bounds),
        "scale_action": dict(action=act(), **bounds),
        "soft_q_targets": dict(
            r_t=step(), discount_t=d, next_q_min_t=step(), next_logp_t=step(), alpha=0.2
        ),
        "n_step_soft_q_targets": dict(
            r_t=step(),
            discount_t=d,
            q_min_t=step(),
            logp_t=step(),
            bootstrap_q_min=step()[0],
            bootstrap_logp=step()[0],
            alpha=0.2,
            n=2,
        ),
        "sac_actor_loss": dict(q_min_t=step(), logp_t=step(), alpha=0.2),
        "sac_temperature_loss": dict(
            log_alpha=jnp.float32(0.0), logp_t=step(), target_entropy=-2.0
        ),
        "discrete_soft_q_targets": dict(
            r_t=step(), discount_t=d, next_q_min_t=logits, next_logits_t=logits, alpha=0.2
        ),
        "discrete_sac_actor_loss": dict(logits_t=logits, q_min_t=logits, alpha=0.2),
        "discrete_sac_temperature_loss": dict(
            log_alpha=jnp.float32(0.0), logits_t=logits, target_entropy=1.0
        ),
        "td3_target_actions": dict(next_action=act(), noise=act(), noise_clip=0.5, **bounds),
        "td3_targets": dict(r_t=step(), discount_t=d, next_q1_t=step(), next_q2_t=step()),
        "dpg_loss": dict(a_t=act(), dqda_t=act()),
    }[name]


NAMES = [
    "tanh_gaussian_log_prob",
    "scale_action",
    "soft_q_targets",
    "n_step_soft_q_targets",
    "sac_actor_loss",
    "sac_temperature_loss",
    "discrete_soft_q_targets",
    "discrete_sac_actor_loss",
    "discrete_sac_temperature_loss",
    "td3_target_actions",
    "td3_targets",
    "dpg_loss",
]
# The argument that sets the shapes the others must have. Cut shorter (or, for `[..., D]`
# arguments, given an extra axis) it is still valid on its own: the error names another argument.
SETS_SHAPE = {
    "tanh_gaussian_log_prob": "pre_tanh",
    "scale_action": "action",
    "n_step_soft_q_targets": "q_min_t",
    "discrete_soft_q_targets": "next_logits_t",
    "discrete_sac_actor_loss": "logits_t",
    "discrete_sac_temperature_loss": "logits_t",
    "td3_target_actions": "next_action",
    "dpg_loss": "a_t",
    "soft_q_targets": "r_t",
    "td3_targets": "r_t",
    "sac_actor_loss": "q_min_t",
    "sac_temperature_loss": "logp_t",
}
ANY_LEADING = {"tanh_gaussian_log_prob", "scale_action", "td3_target_actions"}
ONLY_ARRAY = {"scale_action", "sac_temperature_loss", "discrete_sac_temperature_loss"}
CORRUPT = {
    "extra axis": lambda x: x[..., None],
    "shorter": lambda x: x[:-1],
    "integer": lambda x: x.astype(jnp.int32),
}
SHAPE_CASES = [
    (name, arg, how)
    for name in NAMES
    for arg, v in valid_kwargs(name).items()
    if np.ndim(v)
    for how in CORRUPT
    # A shorter time or batch axis is fine where no other argument has one.
    if not (name in ONLY_ARRAY and arg == SETS_SHAPE[name] and how == "shorter")
]


@pytest.mark.parametrize(("name", "arg", "how"), SHAPE_CASES)
def test_bad_shapes_raise_one_line_error_naming_the_argument(name, arg, how):
    kwargs = valid_kwargs(name)
    kwargs[arg] = CORRUPT[how](kwargs[arg])
    setter = arg == SETS_SHAPE[name]
    names_other = setter and (how == "shorter" or (how == "extra axis" and name in ANY_LEADING))
    with pytest.raises(ValueError, match=r"^\w+ " if names_other else rf"^{arg} ") as info:
        getattr(losses, name)(**kwargs)
    assert "\n" not in str(info.value)


BAD_VALUES = [
    ("soft_q_targets", "alpha", -0.1),
    ("soft_q_targets", "alpha", np.ones(2)),
    ("soft_q_targets", "discount_t", np.full((4, 2), 1.5, np.float32)),
    ("n_step_soft_q_targets", "alpha", float("nan")),
    ("sac_actor_loss", "alpha", -1.0),
    ("sac_temperature_loss", "log_alpha", jnp.zeros(2)),
    ("sac_temperature_loss", "target_entropy", np.ones(2)),
    ("discrete_soft_q_targets", "alpha", -0.5),
    ("discrete_sac_actor_loss", "alpha", -0.5),
    ("discrete_sac_temperature_loss", "target_entropy", np.ones(3)),
    ("td3_target_actions", "noise_clip", -0.1),
    ("td3_target_actions", "high", np.array([1.0, -1.0], np.float32)),
    ("td3_target_actions", "low", np.array([-np.inf, -1.0], np.float32)),
    ("scale_action", "high", np.array([-1.0, 1.0], np.float32)),
    ("tanh_gaussian_log_prob", "high", np.array([1.0, -2.0], np.float32)),
]


@pytest.mark.parametrize(("name", "arg", "bad"), BAD_VALUES)
def test_bad_values_raise_one_line_error_naming_the_argument(name, arg, bad):
    with pytest.raises(ValueError, match=rf"^{arg} must ") as info:
        getattr(losses, name)(**{**valid_kwargs(name), arg: bad})
    assert "\n" not in str(info.value)


def test_low_and_high_come_together():
    kwargs = valid_kwargs("tanh_gaussian_log_prob")
    del kwargs["high"]
    with pytest.raises(ValueError, match=r"^low and high must be given together"):
        losses.tanh_gaussian_log_prob(**kwargs)


@pytest.mark.parametrize(
    ("name", "arg", "bad", "match"),
    [
        ("sac_actor_loss", "alpha", -0.2, "alpha must be >= 0"),
        ("td3_target_actions", "noise_clip", -0.5, "noise_clip must be >= 0"),
        ("scale_action", "low", np.full(2, 2.0, np.float32), "high must be > low"),
    ],
)
def test_traced_values_are_checked_under_checked(name, arg, bad, match):
    kwargs = valid_kwargs(name)
    fn = getattr(losses, name)
    jax.jit(lambda v: fn(**{**kwargs, arg: v}))(jnp.asarray(bad))  # no eager check of tracers
    with pytest.raises(ValueError, match=match):
        losses.checked(fn)(**{**kwargs, arg: jnp.asarray(bad)})
    got = losses.checked(fn)(**{**kwargs, arg: jnp.asarray(kwargs[arg])})
    np.testing.assert_allclose(np.asarray(got), np.asarray(fn(**kwargs)), rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_unwrapped_losses_emit_no_checks(name):
    kwargs = valid_kwargs(name)
    assert "check" not in str(jax.make_jaxpr(lambda: getattr(losses, name)(**kwargs))())
