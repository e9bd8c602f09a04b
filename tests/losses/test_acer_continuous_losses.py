"""Tests for `agents.losses.acer_continuous`: continuous ACER (Wang et al. 2017 §5).

Expected values come from the NumPy loops of `loss_refs_acer_continuous.py`, written from
the paper's equations (Algorithm 3 for Q_ret and Q_opc, §5.1 for the SDN, §5.2 for the
policy gradient, eq. 12–13 for the trust region), never from the JAX code. The losses are
surrogates: their gradients are compared with the paper's update directions.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from loss_refs import f32, projection_np
from loss_refs_acer_continuous import (
    continuous_acer_gradient_np,
    continuous_retrace_np,
    gaussian_entropy_np,
    gaussian_kl_np,
    gaussian_logpdf_np,
    kl_gradient_fd_np,
    sdn_q_np,
    sdn_value_np,
)

from agents import losses

SHAPES = [(1, 1, 1), (3, 2, 1), (5, 3, 2), (7, 2, 6)]  # (T, B, D)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def _masks(rng, T, B):
    """Masks with some zeros (never all: each trace keeps a real step)."""
    mask = (rng.random((T, B)) > 0.25).astype(np.float64)
    mask[0] = 1.0
    return mask


def gaussian_inputs(rng, T, B, D):
    """Current and behaviour statistics close enough for moderate ratios, actions drawn from
    the behaviour policy, and a' from the current one."""
    mean = rng.normal(size=(T, B, D)) * 0.5
    log_std = rng.normal(size=(T, B, D)) * 0.2 - 0.5
    mu_mean = mean + rng.normal(size=(T, B, D)) * 0.3
    mu_log_std = log_std + rng.normal(size=(T, B, D)) * 0.2
    a = mu_mean + np.exp(mu_log_std) * rng.normal(size=(T, B, D))
    a_prime = mean + np.exp(log_std) * rng.normal(size=(T, B, D))
    return mean, log_std, mu_mean, mu_log_std, a, a_prime


def log_densities(mean, log_std, a):
    T, B, _ = mean.shape
    return np.array(
        [
            [gaussian_logpdf_np(a[t, b], mean[t, b], log_std[t, b]) for b in range(B)]
            for t in range(T)
        ]
    )


# ---------------------------------------------------------------------------------------------
# Gaussians
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_gaussian_log_prob_entropy_and_kl_match_numpy(shape):
    rng = np.random.default_rng(sum(shape))
    mean, log_std, mu_mean, mu_log_std, a, _ = gaussian_inputs(rng, *shape)
    got = jax.jit(losses.gaussian_log_prob)(*f32(a, mean, log_std))
    np.testing.assert_allclose(np.asarray(got), log_densities(mean, log_std, a), **TOL)
    T, B, _ = shape
    ent = jax.jit(losses.gaussian_entropy)(f32(log_std))
    want = [[gaussian_entropy_np(log_std[t, b]) for b in range(B)] for t in range(T)]
    np.testing.assert_allclose(np.asarray(ent), want, **TOL)
    kl = jax.jit(losses.gaussian_kl)(*f32(mu_mean, mu_log_std, mean, log_std))
    want = [
        [
            gaussian_kl_np(mu_mean[t, b], mu_log_std[t, b], mean[t, b], log_std[t, b])
            for b in range(B)
        ]
        for t in range(T)
    ]
    np.testing.assert_allclose(np.asarray(kl), want, **TOL)
    assert np.all(np.asarray(kl) >= -1e-6)
    same = losses.gaussian_kl(*f32(mean, log_std, mean, log_std))
    np.testing.assert_allclose(np.asarray(same), 0.0, atol=1e-6)


def test_gaussian_density_integrates_to_one():
    """A 1-D density on a fine grid sums to 1 (the normalising constant is right)."""
    x = np.linspace(-8.0, 8.0, 20001)
    mean, log_std = 0.7, math.log(0.6)
    logp = losses.gaussian_log_prob(
        f32(x[:, None]), jnp.full((x.size, 1), mean), jnp.full((x.size, 1), log_std)
    )
    np.testing.assert_allclose(
        np.sum(np.exp(np.asarray(logp, np.float64))) * (x[1] - x[0]), 1.0, rtol=1e-5
    )


# ---------------------------------------------------------------------------------------------
# SDN
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T, B, n", [(1, 1, 1), (4, 3, 5), (6, 2, 2)])
def test_sdn_q_values_match_numpy_and_pass_gradient_to_every_input(T, B, n):
    rng = np.random.default_rng(T * B * n)
    v, adv, samples = rng.normal(size=(T, B)), rng.normal(size=(T, B)), rng.normal(size=(T, B, n))
    got = jax.jit(losses.sdn_q_values)(*f32(v, adv, samples))
    np.testing.assert_allclose(np.asarray(got), sdn_q_np(v, adv, samples), **TOL)
    gv, ga, gs = jax.grad(lambda *x: jnp.sum(losses.sdn_q_values(*x)), argnums=(0, 1, 2))(
        *f32(v, adv, samples)
    )
    np.testing.assert_allclose(np.asarray(gv), 1.0)
    np.testing.assert_allclose(np.asarray(ga), 1.0)
    np.testing.assert_allclose(np.asarray(gs), -1.0 / n, rtol=1e-6)


def test_sdn_q_values_reject_bad_shapes():
    v = jnp.zeros((3, 2))
    with pytest.raises(ValueError, match="adv_samples_t"):
        losses.sdn_q_values(v, v, jnp.zeros((3, 2)))
    with pytest.raises(ValueError, match="adv_samples_t"):
        losses.sdn_q_values(v, v, jnp.zeros((3, 2, 0)))
    with pytest.raises(ValueError, match="adv_t"):
        losses.sdn_q_values(v, jnp.zeros((3, 2, 1)), jnp.zeros((3, 2, 4)))


# ---------------------------------------------------------------------------------------------
# Q_ret and Q_opc
# ---------------------------------------------------------------------------------------------


def retrace_inputs(rng, T, B, spread=1.0):
    q = rng.normal(size=(T, B)) * 2.0
    v = rng.normal(size=(T, B)) * 2.0
    log_pi = rng.normal(size=(T, B)) * spread
    log_mu = rng.normal(size=(T, B)) * spread
    r = rng.normal(size=(T, B))
    d = 0.9 * (rng.random((T, B)) > 0.2)
    boot = rng.normal(size=(B,))
    return q, v, log_pi, log_mu, r, d, boot


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("T, B, dim", [(1, 1, 1), (4, 2, 1), (6, 3, 3), (9, 2, 17)])
@pytest.mark.parametrize("masked", [False, True])
def test_continuous_retrace_matches_algorithm_3(seed, T, B, dim, masked):
    rng = np.random.default_rng([seed, T, B, dim])
    q, v, log_pi, log_mu, r, d, boot = retrace_inputs(rng, T, B)
    mask = _masks(rng, T, B) if masked else None
    lam, c_max = (1.0, 1.0) if seed == 0 else (0.8, 1.5)
    out = jax.jit(
        losses.continuous_retrace_targets, static_argnums=(7,), static_argnames=("lambda_", "c_max")
    )(*f32(q, v, log_pi, log_mu, r, d, boot), dim, lambda_=lam, c_max=c_max,
      mask_t=None if mask is None else f32(mask))  # fmt: skip
    q_ret, q_opc = continuous_retrace_np(q, v, log_pi, log_mu, r, d, boot, dim, lam, c_max, mask)
    np.testing.assert_allclose(np.asarray(out.q_ret), q_ret, **TOL)
    np.testing.assert_allclose(np.asarray(out.q_opc), q_opc, **TOL)
    m = np.ones((T, B)) if mask is None else mask
    c_want = lam * np.minimum(c_max, np.exp((log_pi - log_mu) / dim)) * m
    np.testing.assert_allclose(np.asarray(out.c), c_want, **TOL)


def test_q_opc_is_q_ret_with_unit_traces_and_the_root_raises_the_traces():
    rng = np.random.default_rng(0)
    T, B = 6, 4
    q, v, log_pi, log_mu, r, d, boot = retrace_inputs(rng, T, B)
    # ρ ≥ 1 everywhere: c = min(1, ρ^{1/d}) = 1, so Q_ret = Q_opc.
    up = losses.continuous_retrace_targets(
        *f32(q, v, np.abs(log_pi) + 0.1, -np.abs(log_mu), r, d, boot), 3
    )
    np.testing.assert_allclose(np.asarray(up.q_ret), np.asarray(up.q_opc), rtol=1e-6)
    # ρ < 1 everywhere: the d-th root moves c towards 1.
    low_pi = -np.abs(log_pi) - 0.1
    c1 = losses.continuous_retrace_targets(*f32(q, v, low_pi, np.abs(log_mu), r, d, boot), 1).c
    c6 = losses.continuous_retrace_targets(*f32(q, v, low_pi, np.abs(log_mu), r, d, boot), 6).c
    assert np.all(np.asarray(c6) > np.asarray(c1)) and np.all(np.asarray(c6) < 1.0)


@pytest.mark.parametrize("kind", ["terminated", "truncated"])
def test_episode_end_inside_a_trace(kind):
    """Step 2 ends an episode; step 3 is the fake auto-reset step (mask 0) whose observation
    x_3 is the episode's final one. Terminated: Q(2) = r_2 (discount 0). Truncated: Q(2) =
    r_2 + γ V(x_3). The later piece does not see the earlier one, and step 3's targets are
    the estimate itself."""
    T, B, gamma = 6, 1, 0.9
    rng = np.random.default_rng(1)
    q, v, log_pi, log_mu, r, _, boot = retrace_inputs(rng, T, B)
    d = np.full((T, B), gamma)
    d[2] = 0.0 if kind == "terminated" else gamma
    mask = np.ones((T, B))
    mask[3] = 0.0
    out = losses.continuous_retrace_targets(
        *f32(q, v, log_pi, log_mu, r, d, boot), 2, mask_t=f32(mask)
    )
    want2 = r[2, 0] + (0.0 if kind == "terminated" else gamma * v[3, 0])
    for target in (out.q_ret, out.q_opc):
        np.testing.assert_allclose(np.asarray(target)[2, 0], want2, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(target)[3, 0], q[3, 0], rtol=1e-6)
    # The piece after the boundary is the same as a trace of its own.
    tail = losses.continuous_retrace_targets(
        *f32(q[4:], v[4:], log_pi[4:], log_mu[4:], r[4:], d[4:], boot), 2
    )
    np.testing.assert_allclose(np.asarray(out.q_ret)[4:], np.asarray(tail.q_ret), rtol=1e-5)
    # ...and the piece before it does not depend on anything after x_3.
    later = r + 5.0 * (np.arange(T)[:, None] > 3)
    changed = losses.continuous_retrace_targets(
        *f32(q, v, log_pi, log_mu, later, d, boot), 2, mask_t=f32(mask)
    )
    np.testing.assert_allclose(np.asarray(changed.q_ret)[:4], np.asarray(out.q_ret)[:4], rtol=1e-6)


def test_targets_carry_no_gradient():
    rng = np.random.default_rng(2)
    args = f32(*retrace_inputs(rng, 5, 3))

    def total(*x):
        out = losses.continuous_retrace_targets(*x, 2)
        return jnp.sum(out.q_ret) + jnp.sum(out.q_opc)

    for g in jax.grad(total, argnums=tuple(range(7)))(*args):
        np.testing.assert_array_equal(np.asarray(g), 0.0)


def test_vmap_matches_per_slice():
    rng = np.random.default_rng(3)
    stacked = f32(*(np.stack([x, 0.5 * x[::-1]]) for x in retrace_inputs(rng, 5, 3)))
    fn = lambda *x: losses.continuous_retrace_targets(*x, 3).q_ret  # noqa: E731
    got = jax.vmap(fn)(*stacked)
    for i in range(2):
        np.testing.assert_allclose(
            np.asarray(got[i]), np.asarray(fn(*(x[i] for x in stacked))), rtol=1e-6
        )


@pytest.mark.parametrize(
    "change, match",
    [
        ({"q_t": jnp.zeros((5, 3, 1))}, "q_t"),
        ({"v_t": jnp.zeros((5, 2))}, "v_t"),
        ({"log_mu_t": jnp.zeros((5, 3), jnp.int32)}, "log_mu_t"),
        ({"bootstrap_value": jnp.zeros((3, 1))}, "bootstrap_value"),
        ({"action_dim": 0}, "action_dim"),
        ({"action_dim": 2.0}, "action_dim"),
        ({"lambda_": 1.5}, "lambda_"),
        ({"discount_t": np.full((5, 3), 1.5, np.float32)}, "discount_t"),
    ],
)
def test_continuous_retrace_bad_inputs_raise(change, match):
    names = ("q_t", "v_t", "log_pi_t", "log_mu_t", "r_t", "discount_t", "bootstrap_value")
    args = dict(zip(names, f32(*retrace_inputs(np.random.default_rng(0), 5, 3)), strict=True))
    args["action_dim"] = 2
    args.update(change)
    with pytest.raises(ValueError, match=match):
        losses.continuous_retrace_targets(**args)


# ---------------------------------------------------------------------------------------------
# SDN critic loss
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("masked", [False, True])
def test_sdn_value_loss_target_and_gradients_match_algorithm_3(seed, masked):
    rng = np.random.default_rng(seed)
    T, B = 5, 4
    q, v, log_pi, log_mu, _, _, _ = retrace_inputs(rng, T, B)
    q_ret = rng.normal(size=(T, B)) * 2.0
    mask = _masks(rng, T, B) if masked else None
    m = None if mask is None else f32(mask)
    v_target, loss, dq, dv = sdn_value_np(q, v, q_ret, log_pi, log_mu, mask)
    args = f32(q, v, q_ret, log_pi, log_mu)
    got_target = losses.sdn_value_targets(*args, mask_t=m)
    np.testing.assert_allclose(np.asarray(got_target), v_target, **TOL)
    got = jax.jit(losses.sdn_value_loss)(*args, mask_t=m)
    np.testing.assert_allclose(np.asarray(got), loss, **TOL)

    def total(*x):
        return jnp.sum(losses.sdn_value_loss(*x, mask_t=m))

    grads = jax.grad(total, argnums=(0, 1, 2, 3, 4))(*args)
    # Minus the gradient is the paper's update: (Q_ret − Q̃) on Q̃, min(1, ρ)(Q_ret − Q̃) on V.
    np.testing.assert_allclose(-np.asarray(grads[0]), dq, **TOL)
    np.testing.assert_allclose(-np.asarray(grads[1]), dv, **TOL)
    for g in grads[2:]:  # Q_ret and the log-densities are constants
        np.testing.assert_array_equal(np.asarray(g), 0.0)


# ---------------------------------------------------------------------------------------------
# Policy gradient with the sampled bias correction
# ---------------------------------------------------------------------------------------------


def policy_inputs(rng, T, B, D):
    mean, log_std, mu_mean, mu_log_std, a, a_prime = gaussian_inputs(rng, T, B, D)
    q_opc, v, q_prime = (rng.normal(size=(T, B)) * 2.0 for _ in range(3))
    return mean, log_std, a, mu_mean, mu_log_std, q_opc, v, a_prime, q_prime


def _policy_total(*args, c=1.0, mask=None):
    return jnp.sum(losses.acer_continuous_policy_loss(*args, c=c, mask_t=mask))


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("c", [0.5, 1.0, 5.0])
@pytest.mark.parametrize("masked", [False, True])
def test_policy_gradient_is_minus_the_papers_estimate(seed, shape, c, masked):
    rng = np.random.default_rng([seed, *shape])
    inputs = policy_inputs(rng, *shape)
    mask = _masks(rng, *shape[:2]) if masked else None
    m = None if mask is None else f32(mask)
    grads = jax.jit(jax.grad(_policy_total, argnums=tuple(range(9))), static_argnames="c")(
        *f32(*inputs), c=c, mask=m
    )
    want = continuous_acer_gradient_np(*inputs, c, mask)
    D = shape[2]
    np.testing.assert_allclose(-np.asarray(grads[0]), want[..., :D], **TOL)
    np.testing.assert_allclose(-np.asarray(grads[1]), want[..., D:], **TOL)
    for g in grads[2:]:  # actions, behaviour statistics, Q_opc, V, a', Q̃(a'): constants
        np.testing.assert_array_equal(np.asarray(g), 0.0)


def test_bias_correction_is_active_and_vanishes_for_large_c():
    """With c below the ratios the a' term contributes; with c → ∞ only the first term
    is left, min(c, ρ) = ρ: ∇ log f(a) ρ (Q_opc − V)."""
    rng = np.random.default_rng(5)
    inputs = policy_inputs(rng, 4, 3, 2)
    g_small = jax.grad(_policy_total)(*f32(*inputs), c=0.1)
    g_big = jax.grad(_policy_total)(*f32(*inputs), c=1e6)
    no_bc = list(inputs)
    no_bc[8] = inputs[6]  # Q̃(a') = V: the a' term is zero
    g_no_bc = jax.grad(_policy_total)(*f32(*no_bc), c=0.1)
    assert not np.allclose(np.asarray(g_small), np.asarray(g_no_bc))
    g_big_no_bc = jax.grad(_policy_total)(*f32(*no_bc), c=1e6)
    np.testing.assert_allclose(np.asarray(g_big), np.asarray(g_big_no_bc), rtol=1e-6)


def test_policy_loss_bad_shapes_raise():
    inputs = list(f32(*policy_inputs(np.random.default_rng(0), 3, 2, 2)))
    bad = inputs.copy()
    bad[1] = inputs[1][..., :1]  # log_std not broadcast to the mean's shape
    with pytest.raises(ValueError, match="log_std_t"):
        losses.acer_continuous_policy_loss(*bad)
    bad = inputs.copy()
    bad[8] = inputs[8][..., None]
    with pytest.raises(ValueError, match="q_prime_t"):
        losses.acer_continuous_policy_loss(*bad)
    with pytest.raises(ValueError, match="c must be >= 0"):
        losses.acer_continuous_policy_loss(*inputs, c=-1.0)


# ---------------------------------------------------------------------------------------------
# Trust region on the Gaussian's statistics
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shape", [(2, 3, 1), (3, 2, 4)])
@pytest.mark.parametrize("delta", [0.01, 1.0])
def test_trust_region_gradient_is_minus_the_projected_estimate(seed, shape, delta):
    rng = np.random.default_rng([seed, *shape])
    inputs = policy_inputs(rng, *shape)
    mean, log_std = inputs[0], inputs[1]
    avg_mean = mean + rng.normal(size=shape) * 0.3
    avg_log_std = log_std + rng.normal(size=shape) * 0.2
    rest = f32(*inputs[2:])

    def policy_loss(m, s):
        return losses.acer_continuous_policy_loss(m, s, *rest, c=1.0)

    def surrogate(m, s):
        out = losses.gaussian_trust_region_policy_loss(
            policy_loss, m, s, *f32(avg_mean, avg_log_std), delta
        )
        return jnp.sum(out.loss), out

    (g_mean, g_log_std), out = jax.grad(surrogate, argnums=(0, 1), has_aux=True)(
        *f32(mean, log_std)
    )
    T, B, D = shape
    g = continuous_acer_gradient_np(*inputs, 1.0)
    k = np.zeros((T, B, 2 * D))
    for t in range(T):
        for b in range(B):
            k[t, b] = kl_gradient_fd_np(
                avg_mean[t, b], avg_log_std[t, b], mean[t, b], log_std[t, b]
            )
    np.testing.assert_allclose(np.asarray(out.g), g, **TOL)
    np.testing.assert_allclose(np.asarray(out.k), k, rtol=1e-4, atol=1e-4)
    z = projection_np(g, k, delta)
    np.testing.assert_allclose(-np.asarray(g_mean), z[..., :D], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(-np.asarray(g_log_std), z[..., D:], rtol=1e-4, atol=1e-4)
    if delta == 0.01:
        assert np.any(np.asarray(out.scale) > 0)  # the constraint binds somewhere


def test_trust_region_is_void_when_the_average_is_the_policy():
    rng = np.random.default_rng(4)
    inputs = f32(*policy_inputs(rng, 3, 2, 2))
    mean, log_std, rest = inputs[0], inputs[1], inputs[2:]

    def policy_loss(m, s):
        return losses.acer_continuous_policy_loss(m, s, *rest, c=1.0)

    def surrogate(m, s):
        out = losses.gaussian_trust_region_policy_loss(policy_loss, m, s, m, s, 0.5)
        return jnp.sum(out.loss)

    got = jax.grad(surrogate, argnums=(0, 1))(mean, log_std)
    want = jax.grad(lambda m, s: jnp.sum(policy_loss(m, s)), argnums=(0, 1))(mean, log_std)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_trust_region_gradients_reach_a_state_independent_log_std():
    """A `[D]` log-std broadcast to every step gets the sum of the per-step projected
    gradients (jnp.broadcast_to keeps the gradient path)."""
    rng = np.random.default_rng(6)
    inputs = f32(*policy_inputs(rng, 3, 2, 2))
    mean, rest = inputs[0], inputs[2:]
    log_std_param = jnp.asarray([-0.3, 0.2])
    # the average policy's statistics: constants, so that no gradient path runs through them
    avg_mean, avg_log_std = mean + 0.2, jnp.broadcast_to(log_std_param + 0.1, mean.shape)

    def policy_loss(m, s):
        return losses.acer_continuous_policy_loss(m, s, *rest, c=1.0)

    def per_step(s):
        out = losses.gaussian_trust_region_policy_loss(
            policy_loss, mean, s, avg_mean, avg_log_std, 0.1
        )
        return jnp.sum(out.loss)

    def surrogate(p):
        return per_step(jnp.broadcast_to(p, mean.shape))

    got = jax.grad(surrogate)(log_std_param)
    want = jnp.sum(jax.grad(per_step)(jnp.broadcast_to(log_std_param, mean.shape)), axis=(0, 1))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def test_trust_region_average_policy_carries_no_gradient():
    """The average policy (ACER's φ_θa) enters through the KL's gradient k only: it moves the
    projected policy gradient, and receives no gradient itself."""
    rng = np.random.default_rng(7)
    inputs = f32(*policy_inputs(rng, 3, 2, 2))
    mean, log_std, rest = inputs[0], inputs[1], inputs[2:]

    def policy_loss(m, s):
        return losses.acer_continuous_policy_loss(m, s, *rest, c=1.0)

    def surrogate(m, s, am, als):
        out = losses.gaussian_trust_region_policy_loss(policy_loss, m, s, am, als, 0.05)
        return jnp.sum(out.loss)

    grad = jax.jit(jax.grad(surrogate, argnums=(0, 1, 2, 3)))
    near = grad(mean, log_std, mean + 0.3, log_std - 0.2)
    far = grad(mean, log_std, mean - 0.6, log_std + 0.4)
    assert not np.allclose(np.asarray(near[0]), np.asarray(far[0]))  # k matters
    for g in (*near[2:], *far[2:]):
        np.testing.assert_array_equal(np.asarray(g), 0.0)


def test_trust_region_bad_shapes_raise():
    x = jnp.zeros((2, 3, 2))
    with pytest.raises(ValueError, match="avg_log_std_t"):
        losses.gaussian_trust_region_policy_loss(lambda m, s: m[..., 0], x, x, x, x[..., :1], 1.0)
    with pytest.raises(ValueError, match="delta"):
        losses.gaussian_trust_region_policy_loss(lambda m, s: m[..., 0], x, x, x, x, -1.0)
