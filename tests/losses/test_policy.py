"""Tests for `agents.losses.policy`: ACER eq. 9, Reactor's β-LOO, entropy, ACER's trust region.

The losses are surrogates, so the tests compare their gradients with respect to the logits
with the papers' gradient estimates, computed in NumPy with ∂log π(a)/∂l_j = 1{a=j} − π_j.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from loss_refs import (
    acer_policy_gradient,
    beta_loo_gradient,
    entropy_np,
    f32,
    kl_np,
    projection_np,
    rand_probs,
    softmax_np,
)

from agents import losses

SHAPES = [(1, 1, 3), (3, 1, 2), (4, 2, 5)]  # (T, B, A)
SETTINGS = settings(max_examples=20, deadline=None)
GTOL = {"rtol": 1e-4, "atol": 1e-5}


def acer_inputs(rng, T, B, A):
    logits = rng.normal(size=(T, B, A)) * 1.5
    q = rng.normal(size=(T, B, A)) * 2.0
    # A small floor on μ makes some ρ(a) = π(a)/μ(a) large, so the bias correction is active.
    mu = rand_probs(rng, (T, B, A), floor=0.01)
    a = rng.integers(0, A, size=(T, B)).astype(np.int32)
    q_ret = rng.normal(size=(T, B)) * 2.0
    return logits, q, mu, a, q_ret


def _acer_total(logits, q, mu, a, q_ret, c, mask):
    return jnp.sum(losses.acer_policy_loss(logits, q, mu, a, q_ret, c, mask_t=mask))


acer_loss_jit = jax.jit(losses.acer_policy_loss)
acer_grads_jit = jax.jit(jax.grad(_acer_total, argnums=(0, 1, 2, 4)))


# ---------------------------------------------------------------------------------------------
# entropy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3,), (1, 1, 3), (4, 2, 5), (2, 3, 4, 7)])
def test_entropy_matches_numpy(shape):
    logits = np.random.default_rng(0).normal(size=shape) * 3.0
    got = jax.jit(losses.entropy)(f32(logits))
    assert got.shape == shape[:-1]
    np.testing.assert_allclose(np.asarray(got), entropy_np(logits), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(4,), (3, 2, 5), (2, 3, 1, 6)])
def test_entropy_gradient_matches_numpy(shape):
    # ∂H/∂l_j = −π_j (log π_j + H), from H = −Σ_a π_a log π_a and ∂π_a/∂l_j = π_a (δ_aj − π_j).
    logits = np.random.default_rng(list(shape)).normal(size=shape) * 2.0
    got = jax.jit(jax.grad(lambda x: jnp.sum(losses.entropy(x))))(f32(logits))
    p = softmax_np(logits)
    want = -p * (np.log(p) + entropy_np(logits)[..., None])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-6)


def test_entropy_with_masked_actions_has_finite_value_and_gradient():
    """A −inf logit (a masked action) is an action of probability 0: the value and the
    gradient equal those of the policy over the other actions, and its own gradient is 0."""
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(3, 2, 5))
    masked = logits.copy()
    masked[..., 1] = -np.inf
    masked[0, 0, 3] = -np.inf  # two masked actions in one row
    fn = jax.jit(jax.value_and_grad(lambda x: jnp.sum(losses.entropy(x))))
    value, grad = (np.asarray(x) for x in fn(f32(masked)))
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    keep = np.isfinite(masked)
    want_value = 0.0
    for idx in np.ndindex(masked.shape[:-1]):
        row = masked[idx][keep[idx]]
        want_value += entropy_np(row)
        p = softmax_np(row)
        want_grad = -p * (np.log(p) + entropy_np(row))
        np.testing.assert_allclose(grad[idx][keep[idx]], want_grad, rtol=1e-4, atol=1e-6)
        assert np.all(grad[idx][~keep[idx]] == 0.0)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)


def test_entropy_extremes():
    logits = jnp.asarray([[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, -1e4, -1e4, -1e4, -1e4]])
    got = np.asarray(losses.entropy(logits))
    np.testing.assert_allclose(got, [np.log(5.0), 0.0], atol=1e-6)
    with pytest.raises(ValueError, match="logits_t"):
        losses.entropy(jnp.zeros((2, 3), jnp.int32))


# ---------------------------------------------------------------------------------------------
# acer_policy_loss (ACER eq. 9)
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    c=st.sampled_from([0.5, 1.0, 10.0]),
    masked=st.booleans(),
)
def test_acer_policy_gradient_is_minus_eq9(seed, shape, c, masked):
    rng = np.random.default_rng(seed)
    logits, q, mu, a, q_ret = acer_inputs(rng, *shape)
    mask = (rng.random(shape[:2]) > 0.3).astype(float) if masked else np.ones(shape[:2])
    g = acer_policy_gradient(logits, q, mu, a, q_ret, c)
    args = (*f32(logits, q, mu), jnp.asarray(a), f32(q_ret))
    d_logits, d_q, d_mu, d_ret = acer_grads_jit(*args, c, f32(mask))
    np.testing.assert_allclose(np.asarray(d_logits), -mask[..., None] * g, **GTOL)
    # π, ρ, V, Q and Q_ret are constants: nothing flows into the critic or μ.
    for other in (d_q, d_mu, d_ret):
        assert np.all(np.asarray(other) == 0.0)
    loss = np.asarray(acer_loss_jit(*args, c, mask_t=f32(mask)))
    assert loss.shape == shape[:2]
    assert np.all(loss[mask == 0] == 0.0)


def test_acer_policy_gradient_bias_correction_active():
    # One state, A = 3, c = 1: ρ = π/μ = (0.5/0.1, 0.3/0.3, 0.2/0.6) = (5, 1, 1/3), so only
    # action 0 gets a bias-correction weight, [1 − 1/5]_+ = 0.8.
    pi = np.array([0.5, 0.3, 0.2])
    logits = np.log(pi)[None, None]
    mu = np.array([0.1, 0.3, 0.6])[None, None]
    q = np.array([1.0, -2.0, 3.0])[None, None]
    a = np.array([[2]], np.int32)
    q_ret = np.array([[4.0]])
    v = pi @ q[0, 0]
    assert np.isclose(v, 0.5)  # 0.5 − 0.6 + 0.6
    dlog = np.eye(3) - pi[None, :]  # row i: ∂log π(i)/∂l
    # min(1, 1/3)·(4 − 0.5)·∇log π(2) + 0.8·0.5·(1 − 0.5)·∇log π(0)
    want = (1.0 / 3.0) * 3.5 * dlog[2] + 0.8 * 0.5 * 0.5 * dlog[0]
    np.testing.assert_allclose(acer_policy_gradient(logits, q, mu, a, q_ret, 1.0)[0, 0], want)
    d_logits = acer_grads_jit(*f32(logits, q, mu), jnp.asarray(a), f32(q_ret), 1.0, f32([[1.0]]))
    np.testing.assert_allclose(np.asarray(d_logits[0])[0, 0], -want, rtol=1e-5)


def test_acer_policy_loss_vmap_matches_per_slice():
    rng = np.random.default_rng(5)
    N, (T, B, A) = 3, SHAPES[2]
    slices = [acer_inputs(rng, T, B, A) for _ in range(N)]
    stacked = [np.stack(x) for x in zip(*slices, strict=True)]
    fn = jax.jit(jax.vmap(lambda lg, q, mu, a, qr: losses.acer_policy_loss(lg, q, mu, a, qr, 2.0)))
    got = np.asarray(fn(*f32(*stacked[:3]), jnp.asarray(stacked[3]), f32(stacked[4])))
    for i, (lg, q, mu, a, qr) in enumerate(slices):
        one = acer_loss_jit(*f32(lg, q, mu), jnp.asarray(a), f32(qr), 2.0)
        np.testing.assert_allclose(got[i], np.asarray(one), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# beta_loo_policy_loss (Reactor eq. 8)
# ---------------------------------------------------------------------------------------------


def _loo_total(logits, q, a, mu_a, ret, c, mask):
    return jnp.sum(losses.beta_loo_policy_loss(logits, q, a, mu_a, ret, c, mask_t=mask))


loo_grads_jit = jax.jit(jax.grad(_loo_total, argnums=(0, 1, 3, 4)))


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    c=st.sampled_from([1.0, 2.0, 1e6]),
    masked=st.booleans(),
)
def test_beta_loo_gradient_is_minus_eq8(seed, shape, c, masked):
    rng = np.random.default_rng(seed)
    logits, q, mu, a, ret = acer_inputs(rng, *shape)
    mu_a = np.take_along_axis(mu, a[..., None], axis=-1)[..., 0]
    mask = (rng.random(shape[:2]) > 0.3).astype(float) if masked else np.ones(shape[:2])
    g = beta_loo_gradient(logits, q, a, mu_a, ret, c)
    args = (*f32(logits, q), jnp.asarray(a), *f32(mu_a, ret))
    d_logits, d_q, d_mu, d_ret = loo_grads_jit(*args, c, f32(mask))
    np.testing.assert_allclose(np.asarray(d_logits), -mask[..., None] * g, **GTOL)
    for other in (d_q, d_mu, d_ret):
        assert np.all(np.asarray(other) == 0.0)
    loss = np.asarray(jax.jit(losses.beta_loo_policy_loss)(*args, c, mask_t=f32(mask)))
    assert np.all(loss[mask == 0] == 0.0)


def test_beta_loo_with_beta_one_over_mu_is_unbiased():
    # With β = 1/μ(A), E_{A∼μ}[G_β] = Σ_a R(a)∇π(a): average the code's gradient over every
    # action, weighted by μ, with a per-action return R(a).
    rng = np.random.default_rng(6)
    A = 5
    logits = rng.normal(size=A)
    q = rng.normal(size=A)
    mu = rand_probs(rng, (A,), floor=0.2)
    ret = rng.normal(size=A) * 3.0
    pi = softmax_np(logits)
    want = sum(ret[i] * pi[i] * (np.eye(A)[i] - pi) for i in range(A))
    tiled = lambda x: np.broadcast_to(x, (A, 1, A))  # noqa: E731  one row per action
    acts = np.arange(A, dtype=np.int32)[:, None]
    d_logits = loo_grads_jit(
        *f32(tiled(logits), tiled(q)),
        jnp.asarray(acts),
        *f32(mu[:, None], ret[:, None]),
        1e9,
        f32(np.ones((A, 1))),
    )[0]
    expected_grad = np.einsum("a,aj->j", mu, np.asarray(d_logits)[:, 0])
    np.testing.assert_allclose(expected_grad, -want, rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# trust_region_projection (ACER eq. 12–13)
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    lead=st.sampled_from([(), (7,), (3, 2)]),
    delta=st.sampled_from([0.0, 0.1, 1.0, 5.0]),
)
def test_trust_region_projection_matches_eq13_and_is_the_l2_projection(seed, lead, delta):
    rng = np.random.default_rng(seed)
    A = 5
    g = rng.normal(size=(*lead, A)) * 3.0
    k = rng.normal(size=(*lead, A))
    z = np.asarray(jax.jit(losses.trust_region_projection)(*f32(g, k), delta), np.float64)
    assert z.shape == g.shape
    np.testing.assert_allclose(z, projection_np(g, k, delta), rtol=1e-5, atol=1e-5)
    kz = np.sum(k * z, axis=-1)
    kg = np.sum(k * g, axis=-1)
    assert np.all(kz <= delta + 1e-4)
    inactive = kg <= delta
    np.testing.assert_allclose(z[inactive], g[inactive], rtol=1e-6)
    active = ~inactive
    np.testing.assert_allclose(kz[active], delta, atol=1e-4)  # lands on the constraint
    # The closest feasible point: no random feasible y is nearer to g.
    dist = np.linalg.norm(z - g, axis=-1)
    for _ in range(20):
        y = g + rng.normal(size=g.shape) * 2.0
        ky = np.sum(k * y, axis=-1)
        feasible = ky <= delta
        assert np.all(np.linalg.norm(y - g, axis=-1)[feasible] >= dist[feasible] - 1e-4)


def test_trust_region_projection_zero_k_and_edge_cases():
    g = jnp.asarray([[1.0, -2.0, 3.0], [0.5, 0.5, 0.5], [1.0, 1.0, 0.0]])
    k = jnp.asarray([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    z = np.asarray(losses.trust_region_projection(g, k, 1.0))
    assert np.all(np.isfinite(z))
    np.testing.assert_array_equal(z[0], [1.0, -2.0, 3.0])  # k = 0: unconstrained
    np.testing.assert_array_equal(z[1], [0.5, 0.5, 0.5])  # kᵀg = .5 ≤ 1: unchanged
    # kᵀg = 2, ‖k‖² = 2: z = g − ((2 − 1)/2)·k = (.5, .5, 0).
    np.testing.assert_allclose(z[2], [0.5, 0.5, 0.0], rtol=1e-6)

    def total(g):
        return jnp.sum(losses.trust_region_projection(g, jnp.zeros_like(g), 1.0))

    assert np.all(np.isfinite(np.asarray(jax.grad(total)(g))))
    with pytest.raises(ValueError, match="k"):
        losses.trust_region_projection(g, k[:, :2], 1.0)
    with pytest.raises(ValueError, match="g"):
        losses.trust_region_projection(g.astype(jnp.int32), k, 1.0)


# ---------------------------------------------------------------------------------------------
# trust_region_policy_loss
# ---------------------------------------------------------------------------------------------


def test_kl_gradient_is_pi_minus_avg_pi():
    # k = ∂KL(π_avg ‖ π)/∂logits = π − π_avg, by central finite differences in float64.
    rng = np.random.default_rng(7)
    logits, avg = rng.normal(size=5), rng.normal(size=5)
    eps = 1e-6
    fd = np.array(
        [
            (kl_np(avg, logits + eps * e) - kl_np(avg, logits - eps * e)) / (2 * eps)
            for e in np.eye(5)
        ]
    )
    np.testing.assert_allclose(fd, softmax_np(logits) - softmax_np(avg), atol=1e-8)
    out = losses.trust_region_policy_loss(
        lambda x: jnp.sum(x, axis=-1), *f32(logits[None], avg[None]), 1.0
    )
    np.testing.assert_allclose(np.asarray(out.k)[0], fd, atol=1e-6)


def _tr_acer(logits, avg, q, mu, a, q_ret, c, delta):
    return losses.trust_region_policy_loss(
        lambda x: losses.acer_policy_loss(x, q, mu, a, q_ret, c), logits, avg, delta
    )


tr_acer_jit = jax.jit(_tr_acer)
tr_acer_grad_jit = jax.jit(
    jax.grad(lambda lg, *rest: jnp.sum(_tr_acer(lg, *rest).loss), argnums=(0, 1))
)


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    delta=st.sampled_from([0.0, 0.05, 1.0, 1e3]),
)
@example(seed=1657, shape=(3, 1, 2), delta=0.0)  # |k| = 1.7e-4: ill-conditioned (below)
def test_trust_region_policy_loss_gradient_is_minus_projected_eq9(seed, shape, delta):
    rng = np.random.default_rng(seed)
    logits, q, mu, a, q_ret = acer_inputs(rng, *shape)
    avg = logits + rng.normal(size=shape)
    c = 1.0
    g = acer_policy_gradient(logits, q, mu, a, q_ret, c)  # ascent direction, eq. 9
    k = softmax_np(logits) - softmax_np(avg)
    z = projection_np(g, k, delta)
    args = (*f32(logits, avg, q, mu), jnp.asarray(a), f32(q_ret), c, delta)
    out = tr_acer_jit(*args)
    assert out.loss.shape == shape[:2]
    np.testing.assert_allclose(np.asarray(out.g), g, **GTOL)
    np.testing.assert_allclose(np.asarray(out.k), k, rtol=1e-5, atol=1e-6)
    kk = np.sum(k * k, axis=-1)
    scale = np.where(kk > 0, np.maximum(0.0, (np.sum(k * g, axis=-1) - delta) / kk), 0.0)
    # k = π − π_avg computed in float32 is off by about 1e-7 (the softmaxes' rounding), so
    # where |k| is small the projection is ill-conditioned: the error of k·g/kk relative to
    # itself, and that of z relative to |g|, grow like 1e-7/|k| (seed 1657, shape (3, 1, 2),
    # δ = 0: |k| = 1.7e-4, z's error 7.8e-4 against |g| = 2.1). The tolerances allow 10x that
    # on top of the fixed ones, which it leaves as they were wherever |k| is not tiny.
    cond = 1e-6 / np.maximum(np.sqrt(kk), 1e-12)  # [T, B]
    got_scale = np.asarray(out.scale)
    assert np.all(np.abs(got_scale - scale) <= 1e-4 + (1e-3 + 2 * cond) * np.abs(scale)), (
        got_scale, scale,
    )  # fmt: skip
    d_logits, d_avg = tr_acer_grad_jit(*args)
    d_logits = np.asarray(d_logits)
    g_size = np.max(np.abs(g), axis=-1, keepdims=True)
    tol = 1e-4 + 1e-3 * np.abs(z) + cond[..., None] * g_size
    assert np.all(np.abs(d_logits + z) <= tol), (d_logits, -z)
    assert np.all(np.asarray(d_avg) == 0.0)
    if delta >= 1e3:  # constraint inactive everywhere: plain eq. 9
        np.testing.assert_allclose(np.asarray(d_logits), -g, **GTOL)


def test_trust_region_same_policy_is_unconstrained():
    rng = np.random.default_rng(8)
    logits, q, mu, a, q_ret = acer_inputs(rng, 4, 2, 5)
    # δ > 0: under jit π − π_avg is round-off (~1e-8) rather than exactly 0, and with δ = 0
    # the half-space kᵀz ≤ 0 would point in a direction set by that noise.
    args = (*f32(logits, logits, q, mu), jnp.asarray(a), f32(q_ret), 1.0, 0.01)
    d_logits, _ = tr_acer_grad_jit(*args)
    g = acer_policy_gradient(logits, q, mu, a, q_ret, 1.0)
    np.testing.assert_allclose(np.asarray(d_logits), -g, **GTOL)


def test_trust_region_backprop_through_linear_network():
    # logits = x @ W: the surrogate's gradient must be z* back-propagated, ∂/∂W = −xᵀ z*.
    rng = np.random.default_rng(9)
    N, D, A = 6, 4, 3
    x = rng.normal(size=(N, D))
    w = rng.normal(size=(D, A))
    w_avg = w + 0.5 * rng.normal(size=(D, A))
    y = rng.random((N, A))  # per-sample loss ℓ = −Σ_a y_a log π_a
    delta = 0.05

    def total(w_):
        logits = f32(x) @ w_
        out = losses.trust_region_policy_loss(
            lambda lg: -jnp.sum(f32(y) * jax.nn.log_softmax(lg), axis=-1),
            logits,
            f32(x) @ f32(w_avg),
            delta,
        )
        return jnp.sum(out.loss), out.scale

    d_w, scale = jax.jit(jax.grad(total, has_aux=True))(f32(w))
    pi = softmax_np(x @ w)
    g = y - pi * y.sum(axis=-1, keepdims=True)  # −∂ℓ/∂logits
    k = pi - softmax_np(x @ w_avg)
    z = projection_np(g, k, delta)
    assert np.any(np.asarray(scale) > 0)  # the projection really bites somewhere
    np.testing.assert_allclose(np.asarray(d_w), -x.T @ z, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def valid_acer_args():
    logits, q, mu, a, q_ret = acer_inputs(np.random.default_rng(11), 4, 2, 3)
    return {
        "logits_t": f32(logits),
        "q_t": f32(q),
        "mu_t": f32(mu),
        "a_t": jnp.asarray(a),
        "q_ret_t": f32(q_ret),
    }


@pytest.mark.parametrize(
    ("name", "corrupt"),
    [
        ("q_t", lambda x: x[:3]),  # mismatched T
        ("q_t", lambda x: x[:, :1]),  # mismatched B
        ("q_t", lambda x: x[..., :2]),
        ("mu_t", lambda x: x[..., :2]),  # mu shape mismatch
        ("mu_t", lambda x: x[:3]),
        ("a_t", lambda x: x.astype(jnp.float32)),  # float actions
        ("a_t", lambda x: x[..., None]),
        ("q_ret_t", lambda x: x[..., None]),  # [T, B, 1] for [T, B]
        ("q_ret_t", lambda x: x.astype(jnp.int32)),
        ("logits_t", lambda x: x[..., 0]),
        ("logits_t", lambda x: x.astype(jnp.int32)),
    ],
)
def test_acer_policy_loss_bad_inputs_raise(name, corrupt):
    args = valid_acer_args()
    args[name] = corrupt(args[name])
    with pytest.raises(ValueError, match=name):
        losses.acer_policy_loss(**args)


def test_acer_policy_loss_bad_mask_raises():
    with pytest.raises(ValueError, match="mask_t"):
        losses.acer_policy_loss(**valid_acer_args(), mask_t=jnp.ones((4, 2, 1)))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("mu_a_t", jnp.full((4, 2, 1), 0.5)),
        ("mu_a_t", jnp.full((4, 2, 3), 0.5)),
        ("return_t", jnp.zeros((4, 2), jnp.int32)),
        ("return_t", jnp.zeros((5, 2))),
        ("a_t", jnp.zeros((4, 2))),
        ("q_t", jnp.zeros((4, 1, 3))),
        ("mask_t", jnp.ones((4,))),
    ],
)
def test_beta_loo_bad_inputs_raise(name, value):
    args = valid_acer_args()
    del args["mu_t"]
    args["return_t"] = args.pop("q_ret_t")
    args["mu_a_t"] = jnp.full((4, 2), 0.5)
    args[name] = value
    with pytest.raises(ValueError, match=name):
        losses.beta_loo_policy_loss(**args)


def test_trust_region_policy_loss_bad_inputs_raise():
    logits = jnp.zeros((4, 2, 3))
    fn = lambda x: jnp.sum(x, axis=-1)  # noqa: E731
    with pytest.raises(ValueError, match="avg_logits_t"):
        losses.trust_region_policy_loss(fn, logits, jnp.zeros((4, 2, 4)), 1.0)
    with pytest.raises(ValueError, match="avg_logits_t"):
        losses.trust_region_policy_loss(fn, logits, jnp.zeros((4, 2, 3), jnp.int32), 1.0)
    with pytest.raises(ValueError, match="logits_t"):
        losses.trust_region_policy_loss(fn, logits.astype(jnp.int32), logits, 1.0)


def test_policy_loss_defaults():
    # acer_policy_loss: c = 10; beta_loo_policy_loss: c = 1.
    rng = np.random.default_rng(12)
    logits, q, mu, a, q_ret = acer_inputs(rng, 3, 2, 5)
    mu[0, 0] = [0.001, 0.001, 0.001, 0.001, 0.996]  # ρ > 10 somewhere
    d_acer = jax.jit(
        jax.grad(lambda lg: jnp.sum(losses.acer_policy_loss(lg, *f32(q, mu), a, f32(q_ret))))
    )(f32(logits))
    want = acer_policy_gradient(logits, q, mu, a, q_ret, 10.0)
    np.testing.assert_allclose(np.asarray(d_acer), -want, **GTOL)
    mu_a = np.take_along_axis(mu, a[..., None], axis=-1)[..., 0]
    d_loo = jax.jit(
        jax.grad(lambda lg: jnp.sum(losses.beta_loo_policy_loss(lg, f32(q), a, *f32(mu_a, q_ret))))
    )(f32(logits))
    want = beta_loo_gradient(logits, q, a, mu_a, q_ret, 1.0)
    np.testing.assert_allclose(np.asarray(d_loo), -want, **GTOL)


def test_vmap_matches_per_slice_for_loo_trust_region_and_entropy():
    rng = np.random.default_rng(13)
    N, (T, B, A) = 3, SHAPES[2]
    slices = [(*acer_inputs(rng, T, B, A), rng.normal(size=(T, B, A))) for _ in range(N)]

    def all_losses(logits, q, mu, a, q_ret, avg):
        mu_a = jnp.take_along_axis(mu, a[..., None], axis=-1)[..., 0]
        tr = _tr_acer(logits, avg, q, mu, a, q_ret, 1.0, 0.1)
        loo = losses.beta_loo_policy_loss(logits, q, a, mu_a, q_ret, 2.0)
        proj = losses.trust_region_projection(logits, avg, 0.1)
        return (loo, losses.entropy(logits), proj, *tr)

    def as_jax(logits, q, mu, a, q_ret, avg):
        return (*f32(logits, q, mu), jnp.asarray(a), *f32(q_ret, avg))

    stacked = [np.stack(x) for x in zip(*slices, strict=True)]
    got = jax.jit(jax.vmap(all_losses))(*as_jax(*stacked))
    one_fn = jax.jit(all_losses)
    for i in range(N):
        for g, o in zip(got, one_fn(*as_jax(*slices[i])), strict=True):
            np.testing.assert_allclose(np.asarray(g)[i], np.asarray(o), rtol=1e-5, atol=1e-6)
