"""Tests for `agents.losses.distributional`: the categorical projection (C51 Alg. 1), Reactor's
distributional Retrace and the categorical cross-entropy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loss_refs import (
    GAMMA,
    distributional_retrace_np,
    f32,
    mask_pieces,
    project_np,
    rand_discounts,
    rand_probs,
    retrace_recursive,
    softmax_np,
)

from agents import losses

SETTINGS = settings(max_examples=20, deadline=None)
TOL = {"rtol": 1e-5, "atol": 2e-5}

project_jit = jax.jit(losses.categorical_projection)
dist_jit = jax.jit(losses.distributional_retrace_targets)
xent_jit = jax.jit(losses.categorical_cross_entropy)

UNIFORM_5 = np.linspace(-2.0, 2.0, 5)
NONUNIFORM_5 = np.array([-3.0, -1.0, -0.5, 0.25, 2.0])
NONUNIFORM_7 = np.array([-2.0, -1.5, -0.2, 0.0, 0.3, 1.0, 2.5])


# ---------------------------------------------------------------------------------------------
# categorical_projection
# ---------------------------------------------------------------------------------------------


def test_projection_hand_checked():
    z_q = np.array([0.0, 1.0, 2.0])
    z_p = np.array([0.25, 1.5, 5.0, -3.0])
    p = np.array([0.4, 0.3, 0.2, 0.1])
    # .25 → (.75, .25)·.4 = (.3, .1); 1.5 → (.15, .15) on atoms 1, 2; 5 → clipped to 2;
    # −3 → clipped to 0. Total (.3 + .1, .1 + .15, .15 + .2).
    got = project_jit(*f32(z_p, p, z_q))
    np.testing.assert_allclose(np.asarray(got), [0.4, 0.25, 0.35], rtol=1e-6)
    # Non-uniform support (0, 1, 3): z = 2 is half-way between 1 and 3.
    got = project_jit(*f32([2.0, 0.5], [1.0, 1.0], [0.0, 1.0, 3.0]))
    np.testing.assert_allclose(np.asarray(got), [0.5, 1.0, 0.5], rtol=1e-6)


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    lead=st.sampled_from([(), (3,), (2, 3)]),
    z_q=st.sampled_from([UNIFORM_5, NONUNIFORM_5, NONUNIFORM_7]),
    kp=st.sampled_from([4, 7]),
    signed=st.booleans(),
)
def test_projection_matches_c51_loop(seed, lead, z_q, kp, signed):
    rng = np.random.default_rng(seed)
    z_p = rng.uniform(-4.0, 4.0, size=(*lead, kp))  # some mass is clipped at both edges
    z_p[..., 0] = z_q[rng.integers(len(z_q))]  # an atom sitting exactly on the support
    probs = rng.normal(size=(*lead, kp)) if signed else rand_probs(rng, (*lead, kp))
    got = np.asarray(project_jit(*f32(z_p, probs, z_q)))
    assert got.shape == (*lead, len(z_q))
    np.testing.assert_allclose(got, project_np(z_p, probs, z_q), **TOL)
    np.testing.assert_allclose(got.sum(-1), probs.sum(-1), **TOL)  # mass preserved


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), z_q=st.sampled_from([UNIFORM_5, NONUNIFORM_7]))
def test_projection_preserves_mean_without_clipping(seed, z_q):
    rng = np.random.default_rng(seed)
    z_p = rng.uniform(z_q[0], z_q[-1], size=(3, 6))
    probs = rand_probs(rng, (3, 6))
    got = np.asarray(project_jit(*f32(z_p, probs, z_q)), np.float64)
    np.testing.assert_allclose(got @ z_q, np.sum(probs * z_p, axis=-1), **TOL)
    assert np.all(got >= -1e-7)


def test_projection_of_atoms_on_the_support_is_identity():
    probs = rand_probs(np.random.default_rng(0), (2, 7))
    for z_q in (NONUNIFORM_7, np.linspace(-1.0, 1.0, 7)):
        got = project_jit(*f32(np.broadcast_to(z_q, (2, 7)), probs, z_q))
        np.testing.assert_allclose(np.asarray(got), probs, rtol=1e-6, atol=1e-7)
    # A permuted source support is a permutation of the masses.
    perm = np.array([3, 0, 6, 1, 5, 2, 4])
    got = project_jit(*f32(NONUNIFORM_7[perm], probs[0, perm], NONUNIFORM_7))
    np.testing.assert_allclose(np.asarray(got), probs[0], rtol=1e-6, atol=1e-7)


def test_projection_onto_one_or_two_atoms():
    z_p, p = f32([0.3, -1.0, 5.0], [0.2, 0.3, 0.5])
    np.testing.assert_allclose(np.asarray(project_jit(z_p, p, f32([1.0]))), [1.0], rtol=1e-6)
    # Two atoms (0, 1): .3 → (.14, .06), −1 → (.3, 0), 5 → (0, .5).
    got = project_jit(z_p, p, f32([0.0, 1.0]))
    np.testing.assert_allclose(np.asarray(got), [0.44, 0.56], rtol=1e-6)


@pytest.mark.parametrize(("seed", "kp", "kq"), [(0, 5, 7), (1, 9, 4), (2, 3, 11)])
def test_projection_gradient_into_the_masses_is_the_projection_matrix(seed, kp, kq):
    """The projection is linear in `probs`: ∂(wᵀ q)/∂p_j = wᵀ Φ(e_j), the NumPy projection of a
    unit mass at z_j (some of the source atoms fall outside the support and are clipped)."""
    rng = np.random.default_rng(seed)
    z_p = np.sort(rng.normal(size=(2, kp)) * 3.0, axis=-1)
    probs = rand_probs(rng, (2, kp))
    z_q = np.linspace(-3.0, 3.0, kq)
    w = rng.normal(size=(2, kq))
    grad = jax.jit(jax.grad(lambda p: jnp.sum(f32(w) * losses.categorical_projection(*p))))
    g_zp, g_probs, _ = (np.asarray(x) for x in grad(f32(z_p, probs, z_q)))
    want = np.zeros((2, kp))
    for b in range(2):
        for j in range(kp):
            want[b, j] = w[b] @ project_np(z_p[b, j : j + 1], [1.0], z_q)
    np.testing.assert_allclose(g_probs, want, rtol=1e-5, atol=1e-6)
    # ∂/∂z_j: within the support the masses slide between neighbours: p_j wᵀ ∂Φ(z_j)/∂z_j,
    # from finite differences of the NumPy projection; 0 where z_j is clipped
    h, moved = 1e-4, 0
    for b in range(2):
        for j in range(kp):
            if np.min(np.abs(z_q - z_p[b, j])) < 2 * h:
                continue  # on a kink of the piecewise-linear Φ (an atom, or an edge)
            up = w[b] @ project_np(z_p[b, j : j + 1] + h, probs[b, j : j + 1], z_q)
            down = w[b] @ project_np(z_p[b, j : j + 1] - h, probs[b, j : j + 1], z_q)
            np.testing.assert_allclose(g_zp[b, j], (up - down) / (2 * h), atol=1e-3)
            moved += abs(z_p[b, j]) < 3.0
    assert moved > 0  # some atoms inside the support, where the gradient is not 0


def test_projection_vmap_matches_per_slice():
    rng = np.random.default_rng(3)
    z_p = rng.uniform(-3.0, 3.0, size=(4, 2, 6))
    probs = rand_probs(rng, (4, 2, 6))
    z_q = f32(NONUNIFORM_7)
    got = np.asarray(
        jax.jit(jax.vmap(losses.categorical_projection, (0, 0, None)))(*f32(z_p, probs), z_q)
    )
    for i in range(4):
        one = project_jit(*f32(z_p[i], probs[i]), z_q)
        np.testing.assert_allclose(got[i], np.asarray(one), rtol=1e-6, atol=1e-7)


def test_projection_bad_inputs_raise():
    z = jnp.zeros((3, 4))
    with pytest.raises(ValueError, match="probs"):
        losses.categorical_projection(z, jnp.zeros((3, 5)), jnp.arange(5.0))
    with pytest.raises(ValueError, match="z_q"):
        losses.categorical_projection(z, z, jnp.zeros((5, 1)))
    with pytest.raises(ValueError, match="z_q"):
        losses.categorical_projection(z, z, jnp.arange(5))
    with pytest.raises(ValueError, match="z_p"):
        losses.categorical_projection(jnp.zeros((3, 4), jnp.int32), z, jnp.arange(5.0))


# ---------------------------------------------------------------------------------------------
# distributional_retrace_targets
# ---------------------------------------------------------------------------------------------


def make_inputs(rng, T, B, A, K, inner=None, p_term=0.3):
    """Random inputs; `inner` restricts every Z to the atoms with those indices."""
    q_probs = rand_probs(rng, (T, B, A, K))
    boot = rand_probs(rng, (B, K))
    if inner is not None:
        keep = np.zeros(K)
        keep[inner] = 1.0
        q_probs = q_probs * keep
        q_probs /= q_probs.sum(-1, keepdims=True)
        boot = boot * keep
        boot /= boot.sum(-1, keepdims=True)
    pi = rand_probs(rng, (T, B, A))
    mu = rand_probs(rng, (T, B, A))
    a = rng.integers(0, A, size=(T, B)).astype(np.int32)
    r = rng.uniform(-1.0, 1.0, size=(T, B))
    d = rand_discounts(rng, (T, B), p_term)
    return q_probs, pi, mu, a, r, d, boot


def to_jax(q_probs, pi, mu, a, r, d, boot, atoms):
    return (*f32(q_probs, pi, mu), jnp.asarray(a), *f32(r, d, boot, atoms))


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    # T = 11 and 20: horizons in several loops (HORIZON_BLOCKS), the last one shorter
    shape=st.sampled_from([(1, 1, 3), (3, 1, 2), (4, 2, 3), (11, 2, 3), (20, 1, 2)]),
    atoms=st.sampled_from([UNIFORM_5, NONUNIFORM_5]),
    lam=st.sampled_from([1.0, 0.6]),
)
def test_distributional_retrace_matches_double_loop(seed, shape, atoms, lam):
    rng = np.random.default_rng(seed)
    inputs = make_inputs(rng, *shape, len(atoms))  # narrow support: clipping happens
    want = distributional_retrace_np(*inputs, atoms, lam=lam)
    got = np.asarray(dist_jit(*to_jax(*inputs, atoms), lam))
    assert got.shape == (*shape[:2], len(atoms))
    np.testing.assert_allclose(got, want, **TOL)
    # The mixture weights Σ_s C_{t,s}(1 − c_{s+1}) sum to one, so each target has mass one.
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)


WIDE = np.array([-12.0, -8.0, -5.0, -2.0, -1.0, 0.0, 0.5, 2.0, 3.5, 7.0, 12.0])
WIDE_INNER = [3, 4, 5, 6, 7]  # atoms in [−2, 2]; |G| ≤ 4 and Γ ≤ 1 keep every shift inside


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from([(1, 1, 3), (4, 2, 3)]),
    lam=st.sampled_from([1.0, 0.6]),
)
def test_distributional_retrace_mean_is_retrace_on_expected_q(seed, shape, lam):
    rng = np.random.default_rng(seed)
    q_probs, pi, mu, a, r, d, boot = make_inputs(rng, *shape, len(WIDE), inner=WIDE_INNER)
    got = np.asarray(dist_jit(*to_jax(q_probs, pi, mu, a, r, d, boot, WIDE), lam), np.float64)
    mean = got @ WIDE
    q_mean = q_probs @ WIDE
    boot_mean = boot @ WIDE
    scalar = jax.jit(losses.retrace_targets)(
        *f32(q_mean, pi, mu), jnp.asarray(a), *f32(r, d, boot_mean), lam, 1.0
    )
    np.testing.assert_allclose(mean, np.asarray(scalar), rtol=1e-5, atol=1e-4)
    want = retrace_recursive(q_mean, pi, mu, a, r, d, boot_mean, lam=lam, c_max=1.0)
    np.testing.assert_allclose(mean, want, rtol=1e-5, atol=1e-4)


def test_distributional_retrace_hand_checked_two_steps():
    # T = 2, B = 1, A = 2, atoms (0, 1, 2).
    # x_1: Z(x_1, 0) = δ_1, Z(x_1, 1) = δ_2, π_1 = (.25, .75), μ_1 = (.5, .5), a_1 = 0,
    #      so c_1 = min(1, .25/.5) = .5. Bootstrap Σ_b π(b|x_2) Z(x_2, b) = (.5, 0, .5).
    # r = (0, .5), d = (.5, .5).
    # t = 1: atoms ↦ .5 + .5 z: 0 → .5 (.25 to atoms 0 and 1), 2 → 1.5 (.25 to 1 and 2):
    #        Z_ret(1) = (.25, .5, .25).
    # t = 0, s = 0: C = 1, α_1 = π_1 − c_1·1{b = 0} = (−.25, .75): masses (0, −.25, .75),
    #        atoms ↦ 0 + .5 z: 1 → .5 (−.125 to atoms 0 and 1), 2 → 1 (.75 to atom 1):
    #        (−.125, .625, 0).
    # t = 0, s = 1: C = c_1 = .5, G = 0 + .5·.5 = .25, Γ = .25, masses = bootstrap:
    #        0 → .25 (.375 to 0, .125 to 1), 2 → .75 (.125 to 0, .375 to 1): (.5, .5, 0).
    #        Z_ret(0) = (−.125, .625, 0) + .5·(.5, .5, 0) = (.125, .875, 0).
    # Means: .875 and 1 = scalar Retrace with Q(x_1, ·) = (1, 2), V(x_1) = 1.75, V(x_2) = 1.
    q_probs = np.zeros((2, 1, 2, 3))
    q_probs[0, 0, :, 1] = 1.0  # Z(x_0, ·): irrelevant to the targets
    q_probs[1, 0, 0] = [0.0, 1.0, 0.0]
    q_probs[1, 0, 1] = [0.0, 0.0, 1.0]
    pi = np.array([[[0.5, 0.5]], [[0.25, 0.75]]])
    mu = np.array([[[0.9, 0.1]], [[0.5, 0.5]]])
    a = np.array([[1], [0]], np.int32)
    r = np.array([[0.0], [0.5]])
    d = np.array([[0.5], [0.5]])
    boot = np.array([[0.5, 0.0, 0.5]])
    atoms = np.array([0.0, 1.0, 2.0])
    got = np.asarray(dist_jit(*to_jax(q_probs, pi, mu, a, r, d, boot, atoms)))
    np.testing.assert_allclose(got[:, 0], [[0.125, 0.875, 0.0], [0.25, 0.5, 0.25]], atol=1e-6)
    # The same numbers from the double-loop reference.
    ref = distributional_retrace_np(q_probs, pi, mu, a, r, d, boot, atoms)
    np.testing.assert_allclose(ref[:, 0], [[0.125, 0.875, 0.0], [0.25, 0.5, 0.25]], atol=1e-12)


def test_distributional_retrace_vmap_matches_per_slice():
    rng = np.random.default_rng(1)
    N, (T, B, A), K = 3, (4, 2, 3), 5
    slices = [make_inputs(rng, T, B, A, K) for _ in range(N)]
    masks = (rng.random((N, T, B)) > 0.3).astype(np.float32)
    stacked = [np.stack(x) for x in zip(*slices, strict=True)]
    fn = jax.jit(
        jax.vmap(
            lambda qp, pi, mu, a, r, d, bp, m: losses.distributional_retrace_targets(
                qp, pi, mu, a, r, d, bp, f32(UNIFORM_5), 0.9, mask_t=m
            )
        )
    )
    got = np.asarray(fn(*to_jax(*stacked, UNIFORM_5)[:7], jnp.asarray(masks)))
    for i in range(N):
        one = dist_jit(*to_jax(*slices[i], UNIFORM_5), 0.9, mask_t=jnp.asarray(masks[i]))
        np.testing.assert_allclose(got[i], np.asarray(one), rtol=1e-6, atol=1e-6)


def test_distributional_retrace_targets_carry_no_gradient():
    rng = np.random.default_rng(2)
    q_probs, pi, mu, a, r, d, boot, atoms = to_jax(*make_inputs(rng, 4, 2, 3, 5), UNIFORM_5)
    mask = f32([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    weights = jnp.arange(5.0)  # a weighted sum, since Σ_k target = 1 would hide nothing

    def total(q_probs, pi, mu, r, d, boot, atoms, lam):
        out = losses.distributional_retrace_targets(
            q_probs, pi, mu, a, r, d, boot, atoms, lam, mask_t=mask
        )
        return jnp.sum(out * weights[None, None, :])

    args = (q_probs, pi, mu, r, d, boot, atoms, 0.9)
    for g in jax.jit(jax.grad(total, argnums=tuple(range(8))))(*args):
        assert np.all(np.asarray(g) == 0.0)
    assert float(total(*args)) != 0.0


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_distributional_retrace_random_mask_splits_into_pieces(seed):
    rng = np.random.default_rng(seed)
    T, B, A, K = 5, 2, 3, 5
    q_probs, pi, mu, a, r, d, boot = make_inputs(rng, T, B, A, K)
    mask = rng.random((T, B)) > 0.35
    want = np.zeros((T, B, K))
    for b in range(B):
        for t in range(T):
            if not mask[t, b]:
                want[t, b] = q_probs[t, b, a[t, b]]  # Z(x_t, a_t) itself
        for start, stop in mask_pieces(mask[:, b]):
            piece_boot = boot[b] if stop == T else pi[stop, b] @ q_probs[stop, b]
            sl, col = slice(start, stop), slice(b, b + 1)
            want[sl, b] = distributional_retrace_np(
                q_probs[sl, col],
                pi[sl, col],
                mu[sl, col],
                a[sl, col],
                r[sl, col],
                d[sl, col],
                piece_boot[None],
                UNIFORM_5,
                lam=0.9,
            )[:, 0]
    got = dist_jit(*to_jax(q_probs, pi, mu, a, r, d, boot, UNIFORM_5), 0.9, mask_t=f32(mask))
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


@pytest.mark.parametrize("kind", ["termination", "truncation"])
@pytest.mark.parametrize("k", [0, 2])
def test_distributional_retrace_episode_boundary(kind, k):
    rng = np.random.default_rng(30 + k)
    T, B, A, K = 6, 2, 3, 5
    q_probs, pi, mu, a, r, d, boot = make_inputs(rng, T, B, A, K, p_term=0.0)
    d[k] = 0.0 if kind == "termination" else GAMMA
    r[k + 1] = 0.0
    mask = np.ones((T, B))
    mask[k + 1] = 0.0
    whole = np.asarray(
        dist_jit(*to_jax(q_probs, pi, mu, a, r, d, boot, UNIFORM_5), mask_t=f32(mask))
    )
    head, tail = slice(0, k + 1), slice(k + 2, T)
    if kind == "truncation":  # Σ_b π(b|x_{k+1}) Z(x_{k+1}, b) of the final observation
        head_boot = np.einsum("ba,bak->bk", pi[k + 1], q_probs[k + 1])
    else:
        head_boot = rand_probs(rng, (B, K))  # must not matter
    parts = (q_probs, pi, mu, a, r, d)
    first = dist_jit(*to_jax(*(x[head] for x in parts), head_boot, UNIFORM_5))
    second = dist_jit(*to_jax(*(x[tail] for x in parts), boot, UNIFORM_5))
    np.testing.assert_allclose(whole[head], np.asarray(first), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(whole[tail], np.asarray(second), rtol=1e-6, atol=1e-6)
    z_a = np.take_along_axis(q_probs, a[..., None, None], axis=2)[:, :, 0]
    np.testing.assert_allclose(whole[k + 1], z_a[k + 1], rtol=1e-6)
    ref = distributional_retrace_np(*(x[head] for x in parts), head_boot, UNIFORM_5)
    np.testing.assert_allclose(whole[head], ref, **TOL)
    if kind == "termination":  # Z_ret(k) = δ_{r_k} projected
        want_k = project_np(np.broadcast_to(r[k][:, None], (B, 1)), np.ones((B, 1)), UNIFORM_5)
        np.testing.assert_allclose(whole[k], want_k, **TOL)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def valid_args():
    inputs = to_jax(*make_inputs(np.random.default_rng(4), 4, 2, 3, 5), UNIFORM_5)
    names = ["q_probs_t", "pi_t", "mu_t", "a_t", "r_t", "discount_t", "bootstrap_probs", "atoms"]
    return dict(zip(names, inputs, strict=True))


@pytest.mark.parametrize(
    ("name", "corrupt"),
    [
        ("q_probs_t", lambda x: x[..., 0, :]),  # rank 3
        ("q_probs_t", lambda x: x.astype(jnp.int32)),
        ("pi_t", lambda x: x[:3]),  # mismatched T
        ("mu_t", lambda x: x[..., :2]),  # mu shape mismatch
        ("mu_t", lambda x: x[:, :1]),  # mismatched B
        ("a_t", lambda x: x.astype(jnp.float32)),  # float actions
        ("r_t", lambda x: x.astype(jnp.int32)),  # integer rewards
        ("r_t", lambda x: x[..., None]),  # [T, B, 1] for [T, B]
        ("r_t", lambda x: x[:3]),
        ("discount_t", lambda x: x[..., None]),
        ("bootstrap_probs", lambda x: x[:, 0]),  # bootstrap shape wrong
        ("bootstrap_probs", lambda x: jnp.zeros((2, 6))),
        ("atoms", lambda x: x[:4]),  # atoms wrong shape
        ("atoms", lambda x: x[:, None]),
        ("atoms", lambda x: jnp.arange(5)),
    ],
)
def test_distributional_retrace_bad_inputs_raise(name, corrupt):
    args = valid_args()
    args[name] = corrupt(args[name])
    with pytest.raises(ValueError, match=name):
        losses.distributional_retrace_targets(**args)


def test_distributional_retrace_bad_mask_raises():
    with pytest.raises(ValueError, match="mask_t"):
        losses.distributional_retrace_targets(**valid_args(), mask_t=jnp.ones((4, 2, 5)))


# ---------------------------------------------------------------------------------------------
# categorical_cross_entropy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 1, 5), (4, 3, 7)])
def test_cross_entropy_value_and_gradients(shape):
    rng = np.random.default_rng(5)
    logits = rng.normal(size=shape) * 2.0
    target = rand_probs(rng, shape)
    mask = (rng.random(shape[:2]) > 0.3).astype(np.float64)
    log_q = np.log(softmax_np(logits))
    want = np.zeros(shape[:2])
    for t in range(shape[0]):
        for b in range(shape[1]):
            want[t, b] = -mask[t, b] * sum(
                target[t, b, k] * log_q[t, b, k] for k in range(shape[2])
            )
    got = xent_jit(*f32(target, logits), mask_t=f32(mask))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(got)[mask == 0] == 0.0)

    def total(target, logits):
        return jnp.sum(losses.categorical_cross_entropy(target, logits, mask_t=f32(mask)))

    d_target, d_logits = jax.jit(jax.grad(total, argnums=(0, 1)))(*f32(target, logits))
    np.testing.assert_allclose(
        np.asarray(d_logits), mask[..., None] * (softmax_np(logits) - target), atol=1e-6
    )
    assert np.all(np.asarray(d_target) == 0.0)


def test_cross_entropy_signed_target_gradient():
    # Distributional Retrace targets may be signed mixtures; ∂/∂l_j = softmax_j·Σp − p_j.
    rng = np.random.default_rng(6)
    logits = rng.normal(size=(2, 2, 5))
    target = rng.normal(size=(2, 2, 5))
    d_logits = jax.grad(lambda lg: jnp.sum(losses.categorical_cross_entropy(f32(target), lg)))(
        f32(logits)
    )
    want = softmax_np(logits) * target.sum(-1, keepdims=True) - target
    np.testing.assert_allclose(np.asarray(d_logits), want, rtol=1e-5, atol=1e-6)


def test_cross_entropy_vmap_matches_per_slice():
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(3, 4, 2, 5))
    target = rand_probs(rng, (3, 4, 2, 5))
    got = np.asarray(jax.jit(jax.vmap(losses.categorical_cross_entropy))(*f32(target, logits)))
    for i in range(3):
        one = xent_jit(*f32(target[i], logits[i]))
        np.testing.assert_allclose(got[i], np.asarray(one), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target_probs_t": jnp.zeros((4, 2, 6))}, "target_probs_t"),
        ({"target_probs_t": jnp.zeros((4, 2, 5), jnp.int32)}, "target_probs_t"),
        ({"logits_t": jnp.zeros((4, 5))}, "logits_t"),
        ({"mask_t": jnp.ones((4, 2, 1))}, "mask_t"),
    ],
)
def test_cross_entropy_bad_inputs_raise(kwargs, match):
    args = {"target_probs_t": jnp.zeros((4, 2, 5)), "logits_t": jnp.zeros((4, 2, 5))}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        losses.categorical_cross_entropy(**args)
