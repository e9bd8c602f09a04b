"""Tests for `agents.losses.retrace`: Retrace targets (ACER eq. 5) and the ACER critic loss."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loss_refs import (
    GAMMA,
    f32,
    mask_pieces,
    rand_discounts,
    rand_probs,
    retrace_recursive,
    retrace_sum_form,
)

from agents import losses

SHAPES = [(1, 1, 3), (3, 1, 2), (5, 2, 3), (4, 3, 5)]  # (T, B, A): T=1, B=1, odd A
TOL = {"rtol": 1e-5, "atol": 1e-4}
SETTINGS = settings(max_examples=20, deadline=None)

retrace_jit = jax.jit(losses.retrace_targets)
value_loss_jit = jax.jit(losses.acer_value_loss)


def make_inputs(rng, T, B, A, p_term=0.3):
    q = rng.normal(size=(T, B, A)) * 2.0
    pi = rand_probs(rng, (T, B, A))
    mu = rand_probs(rng, (T, B, A))
    a = rng.integers(0, A, size=(T, B)).astype(np.int32)
    r = rng.normal(size=(T, B))
    d = rand_discounts(rng, (T, B), p_term)
    boot = rng.normal(size=(B,)) * 2.0
    return q, pi, mu, a, r, d, boot


def to_jax(q, pi, mu, a, r, d, boot):
    return (*f32(q, pi, mu), jnp.asarray(a), *f32(r, d, boot))


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    lam=st.sampled_from([1.0, 0.7, 0.0]),
    c_max=st.sampled_from([1.0, 0.5, 3.0]),
)
def test_retrace_matches_recursive_and_sum_form(seed, shape, lam, c_max):
    rng = np.random.default_rng(seed)
    inputs = make_inputs(rng, *shape)
    want = retrace_recursive(*inputs, lam=lam, c_max=c_max)
    # The two references are independent derivations of the same operator.
    np.testing.assert_allclose(want, retrace_sum_form(*inputs, lam=lam, c_max=c_max), atol=1e-10)
    got = retrace_jit(*to_jax(*inputs), lam, c_max)
    assert got.shape == shape[:2]
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


def test_retrace_on_policy_deterministic_is_discounted_return():
    # π = μ = one-hot on the taken action, λ = 1: c = 1 and V(x) = Q(x, a), so
    # Q_ret(t) = r_t + d_t Q_ret(t+1) whatever the Q values.
    # Trace 0: r = 1, 2, 3, d = .5, .5, .5, V(x_3) = 4 → 5, 4.5, 3.25.
    # Trace 1: r = 1, 1, 1, d = .5, 0, .5, V(x_3) = 10 → 6, 1 (termination), 1.5.
    T, B, A = 3, 2, 3
    a = np.array([[0, 2], [1, 1], [2, 0]], np.int32)
    one_hot = np.eye(A)[a]
    q = np.random.default_rng(0).normal(size=(T, B, A)) * 5.0
    r = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    d = np.array([[0.5, 0.5], [0.5, 0.0], [0.5, 0.5]])
    boot = np.array([4.0, 10.0])
    want = np.array([[3.25, 1.5], [4.5, 1.0], [5.0, 6.0]])
    for c_max in (1.0, 2.5):
        got = retrace_jit(*to_jax(q, one_hot, one_hot, a, r, d, boot), 1.0, c_max)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize(
    ("lam", "c_max", "want0"),
    [
        # c_1 = min(1, (1/2)/(3/4)) = 2/3: Q_ret(0) = 1 + .5·(2/3·(4 − 5) + 4) = 8/3.
        (1.0, 1.0, 8.0 / 3.0),
        # c_1 = min(.5, 2/3) = .5: Q_ret(0) = 1 + .5·(.5·(−1) + 4) = 2.75.
        (1.0, 0.5, 2.75),
        # c_1 = .3·2/3 = .2: Q_ret(0) = 1 + .5·(.2·(−1) + 4) = 2.9.
        (0.3, 1.0, 2.9),
    ],
)
def test_retrace_hand_checked_two_steps(lam, c_max, want0):
    # T = 2, B = 1, A = 2. Q(x_1, ·) = (3, 5), π_1 = (.5, .5) so V(x_1) = 4; a_1 = 1 with
    # μ_1(1) = .75. r = (1, 2), d = (.5, .5), V(x_2) = 4: Q_ret(1) = 2 + .5·4 = 4.
    q = np.array([[[1.0, 2.0]], [[3.0, 5.0]]])
    pi = np.full((2, 1, 2), 0.5)
    mu = np.array([[[0.5, 0.5]], [[0.25, 0.75]]])
    a = np.array([[0], [1]], np.int32)
    r = np.array([[1.0], [2.0]])
    d = np.array([[0.5], [0.5]])
    boot = np.array([4.0])
    got = retrace_jit(*to_jax(q, pi, mu, a, r, d, boot), lam, c_max)
    np.testing.assert_allclose(np.asarray(got)[:, 0], [want0, 4.0], rtol=1e-6)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), shape=st.sampled_from(SHAPES))
def test_retrace_lambda_zero_is_expected_sarsa(seed, shape):
    rng = np.random.default_rng(seed)
    q, pi, mu, a, r, d, boot = make_inputs(rng, *shape)
    T, B, _ = shape
    want = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            v_next = boot[b] if t == T - 1 else float(pi[t + 1, b] @ q[t + 1, b])
            want[t, b] = r[t, b] + d[t, b] * v_next
    got = retrace_jit(*to_jax(q, pi, mu, a, r, d, boot), 0.0, 1.0)
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


def test_retrace_vmap_matches_per_slice():
    rng = np.random.default_rng(1)
    N, (T, B, A) = 3, SHAPES[2]
    slices = [make_inputs(rng, T, B, A) for _ in range(N)]
    masks = (rng.random((N, T, B)) > 0.3).astype(np.float32)
    stacked = [np.stack(x) for x in zip(*slices, strict=True)]
    fn = jax.jit(
        jax.vmap(
            lambda q, pi, mu, a, r, d, boot, m: losses.retrace_targets(
                q, pi, mu, a, r, d, boot, 0.9, 1.0, mask_t=m
            )
        )
    )
    got = np.asarray(fn(*to_jax(*stacked), jnp.asarray(masks)))
    for i in range(N):
        one = retrace_jit(*to_jax(*slices[i]), 0.9, 1.0, mask_t=jnp.asarray(masks[i]))
        np.testing.assert_allclose(got[i], np.asarray(one), rtol=1e-6, atol=1e-6)


def test_retrace_targets_carry_no_gradient():
    rng = np.random.default_rng(2)
    q, pi, mu, a, r, d, boot = to_jax(*make_inputs(rng, 4, 2, 3))
    mask = jnp.asarray([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])

    def total(q, pi, mu, r, d, boot, lam, c_max):
        return jnp.sum(losses.retrace_targets(q, pi, mu, a, r, d, boot, lam, c_max, mask_t=mask))

    grads = jax.jit(jax.grad(total, argnums=tuple(range(8))))(q, pi, mu, r, d, boot, 0.8, 1.0)
    for g in grads:
        assert np.all(np.asarray(g) == 0.0)
    assert float(total(q, pi, mu, r, d, boot, 0.8, 1.0)) != 0.0


def test_trace_coefficients():
    pi_a = jnp.asarray([0.2, 0.9, 0.5, 0.6])
    mu_a = jnp.asarray([0.4, 0.3, 0.5, 0.1])
    mask = jnp.asarray([1.0, 1.0, 1.0, 0.0])
    got = losses.trace_coefficients(pi_a, mu_a, 0.5, 2.0, mask)
    # λ·min(c_max, π/μ)·mask = .5·(.5, 2 (3 clipped), 1, 0).
    np.testing.assert_allclose(np.asarray(got), [0.25, 1.0, 0.5, 0.0], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Masks and episode boundaries
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), shape=st.sampled_from(SHAPES[1:]))
def test_retrace_random_mask_splits_into_independent_pieces(seed, shape):
    rng = np.random.default_rng(seed)
    q, pi, mu, a, r, d, boot = make_inputs(rng, *shape)
    T, B, _ = shape
    mask = rng.random((T, B)) > 0.35
    want = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            if not mask[t, b]:
                want[t, b] = q[t, b, a[t, b]]  # the estimate itself
        for start, stop in mask_pieces(mask[:, b]):
            # A piece ending before T is followed by a masked step: bootstrap from V(x_stop).
            piece_boot = boot[b] if stop == T else float(pi[stop, b] @ q[stop, b])
            sl = slice(start, stop)
            want[sl, b] = retrace_recursive(
                q[sl, b : b + 1],
                pi[sl, b : b + 1],
                mu[sl, b : b + 1],
                a[sl, b : b + 1],
                r[sl, b : b + 1],
                d[sl, b : b + 1],
                np.array([piece_boot]),
                lam=0.9,
            )[:, 0]
    got = retrace_jit(*to_jax(q, pi, mu, a, r, d, boot), 0.9, 1.0, mask_t=f32(mask))
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


def boundary_trace(rng, T, B, A, k, kind):
    """Two episodes joined by an auto-reset: episode 1 ends at step k, k+1 is the fake step."""
    q, pi, mu, a, r, d, boot = make_inputs(rng, T, B, A, p_term=0.0)
    d[k] = 0.0 if kind == "termination" else GAMMA
    r[k + 1] = 0.0
    mask = np.ones((T, B))
    mask[k + 1] = 0.0
    return (q, pi, mu, a, r, d, boot), mask


@pytest.mark.parametrize("kind", ["termination", "truncation"])
@pytest.mark.parametrize("k", [0, 2])
def test_retrace_episode_boundary(kind, k):
    rng = np.random.default_rng(10 + k)
    T, B, A = 6, 2, 3
    (q, pi, mu, a, r, d, boot), mask = boundary_trace(rng, T, B, A, k, kind)
    whole = np.asarray(retrace_jit(*to_jax(q, pi, mu, a, r, d, boot), 1.0, 1.0, mask_t=f32(mask)))

    head = slice(0, k + 1)
    if kind == "truncation":
        head_boot = np.einsum("ba,ba->b", pi[k + 1], q[k + 1])  # V of the final observation
    else:
        head_boot = np.full(B, 123.0)  # ignored: d_k = 0
    first = retrace_jit(
        *to_jax(q[head], pi[head], mu[head], a[head], r[head], d[head], head_boot), 1.0, 1.0
    )
    tail = slice(k + 2, T)
    second = retrace_jit(
        *to_jax(q[tail], pi[tail], mu[tail], a[tail], r[tail], d[tail], boot), 1.0, 1.0
    )
    np.testing.assert_allclose(whole[head], np.asarray(first), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(whole[tail], np.asarray(second), rtol=1e-6, atol=1e-6)
    q_a = np.take_along_axis(q, a[..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(whole[k + 1], q_a[k + 1], rtol=1e-6)
    # And both pieces against the NumPy reference.
    np.testing.assert_allclose(
        whole[head],
        retrace_recursive(q[head], pi[head], mu[head], a[head], r[head], d[head], head_boot),
        **TOL,
    )
    if kind == "termination":
        assert np.allclose(whole[k], r[k], atol=1e-6)
    loss = value_loss_jit(f32(q), jnp.asarray(a), jnp.asarray(whole), mask_t=f32(mask))
    assert np.all(np.asarray(loss)[k + 1] == 0.0)


# ---------------------------------------------------------------------------------------------
# acer_value_loss
# ---------------------------------------------------------------------------------------------


def test_acer_value_loss_value_and_gradient():
    rng = np.random.default_rng(3)
    T, B, A = 4, 3, 5
    q = rng.normal(size=(T, B, A))
    a = rng.integers(0, A, size=(T, B)).astype(np.int32)
    q_ret = rng.normal(size=(T, B))
    mask = (rng.random((T, B)) > 0.3).astype(np.float64)
    mask[0, 0] = 0.0
    want = np.zeros((T, B))
    want_dq = np.zeros((T, B, A))
    for t in range(T):
        for b in range(B):
            td = q_ret[t, b] - q[t, b, a[t, b]]
            want[t, b] = mask[t, b] * 0.5 * td**2
            want_dq[t, b, a[t, b]] = -mask[t, b] * td
    args = (f32(q), jnp.asarray(a), f32(q_ret))
    got = value_loss_jit(*args, mask_t=f32(mask))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    no_mask = value_loss_jit(*args)
    np.testing.assert_allclose(np.asarray(no_mask)[mask > 0], want[mask > 0], rtol=1e-5)

    def total(q, q_ret):
        return jnp.sum(losses.acer_value_loss(q, args[1], q_ret, mask_t=f32(mask)))

    dq, dret = jax.grad(total, argnums=(0, 1))(args[0], args[2])
    np.testing.assert_allclose(np.asarray(dq), want_dq, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(dret) == 0.0)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def valid_retrace_args():
    rng = np.random.default_rng(4)
    q, pi, mu, a, r, d, boot = to_jax(*make_inputs(rng, 4, 2, 3))
    return {
        "q_t": q,
        "pi_t": pi,
        "mu_t": mu,
        "a_t": a,
        "r_t": r,
        "discount_t": d,
        "bootstrap_value": boot,
    }


RETRACE_BAD = [
    ("r_t", lambda x: jnp.zeros((5, 2)), "r_t"),  # mismatched T
    ("discount_t", lambda x: jnp.zeros((4, 3)), "discount_t"),  # mismatched B
    ("r_t", lambda x: x[..., None], "r_t"),  # [T, B, 1] for [T, B]
    ("discount_t", lambda x: x[..., None], "discount_t"),
    ("r_t", lambda x: x.astype(jnp.int32), "r_t"),  # integer rewards
    ("discount_t", lambda x: jnp.ones(x.shape, jnp.int32), "discount_t"),
    ("a_t", lambda x: x.astype(jnp.float32), "a_t"),  # float actions
    ("a_t", lambda x: x[:3], "a_t"),
    ("mu_t", lambda x: x[..., :2], "mu_t"),  # mu shape mismatch
    ("pi_t", lambda x: x[:, :1], "pi_t"),
    ("bootstrap_value", lambda x: x[None], "bootstrap_value"),  # bootstrap shape wrong
    ("bootstrap_value", lambda x: jnp.zeros((3,)), "bootstrap_value"),
    ("q_t", lambda x: x[..., 0], "q_t"),  # rank 2 Q
    ("q_t", lambda x: x.astype(jnp.int32), "q_t"),
]


@pytest.mark.parametrize(("name", "corrupt", "match"), RETRACE_BAD)
def test_retrace_bad_inputs_raise(name, corrupt, match):
    args = valid_retrace_args()
    args[name] = corrupt(args[name])
    with pytest.raises(ValueError, match=match):
        losses.retrace_targets(**args)


@pytest.mark.parametrize("mask", [jnp.ones((4,)), jnp.ones((4, 2, 1)), jnp.ones((3, 2))])
def test_retrace_bad_mask_raises(mask):
    with pytest.raises(ValueError, match="mask_t"):
        losses.retrace_targets(**valid_retrace_args(), mask_t=mask)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"q_ret_t": jnp.zeros((4, 2, 1))}, "q_ret_t"),
        ({"q_ret_t": jnp.zeros((4, 2), jnp.int32)}, "q_ret_t"),
        ({"a_t": jnp.zeros((4, 2))}, "a_t"),
        ({"a_t": jnp.zeros((4, 3), jnp.int32)}, "a_t"),
        ({"mask_t": jnp.ones((2, 4))}, "mask_t"),
    ],
)
def test_acer_value_loss_bad_inputs_raise(kwargs, match):
    args = {"q_t": jnp.zeros((4, 2, 3)), "a_t": jnp.zeros((4, 2), jnp.int32)}
    args["q_ret_t"] = jnp.zeros((4, 2))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        losses.acer_value_loss(**args)


# ---------------------------------------------------------------------------------------------
# Defaults, boolean masks, sharding
# ---------------------------------------------------------------------------------------------


def test_retrace_defaults_are_lambda_one_c_max_one():
    rng = np.random.default_rng(12)
    inputs = make_inputs(rng, 4, 3, 5)
    got = losses.retrace_targets(*to_jax(*inputs))
    np.testing.assert_allclose(np.asarray(got), retrace_recursive(*inputs), **TOL)


def test_retrace_boolean_mask_equals_float_mask():
    rng = np.random.default_rng(13)
    args = to_jax(*make_inputs(rng, 5, 2, 3))
    mask = rng.random((5, 2)) > 0.4
    as_bool = losses.retrace_targets(*args, mask_t=jnp.asarray(mask))
    as_float = losses.retrace_targets(*args, mask_t=f32(mask))
    np.testing.assert_array_equal(np.asarray(as_bool), np.asarray(as_float))


# The slow tier (issue 67): retrace's sharding over 2 devices is the fast tier's in
# tests/losses/test_sharding.py (under shard_map, as the learners run it), its values against
# the recursive reference in the tests above.
@pytest.mark.slow
def test_retrace_with_batch_sharded_over_two_devices():
    devices = jax.devices()
    if len(devices) < 2:
        pytest.skip("needs the two fake CPU devices of tests/conftest.py")
    mesh = jax.sharding.Mesh(np.array(devices[:2]), ("batch",))
    P = jax.sharding.PartitionSpec
    rng = np.random.default_rng(14)
    inputs = make_inputs(rng, 3, 4, 3)
    specs = [P(None, "batch", None)] * 3 + [P(None, "batch")] * 3 + [P("batch")]
    sharded = [
        jax.device_put(x, jax.sharding.NamedSharding(mesh, s))
        for x, s in zip(to_jax(*inputs), specs, strict=True)
    ]
    got = retrace_jit(*sharded, 0.9, 1.0)
    np.testing.assert_allclose(np.asarray(got), retrace_recursive(*inputs, lam=0.9), **TOL)


def test_acer_value_loss_vmap_matches_per_slice():
    rng = np.random.default_rng(15)
    q = rng.normal(size=(3, 4, 2, 5))
    a = rng.integers(0, 5, size=(3, 4, 2)).astype(np.int32)
    q_ret = rng.normal(size=(3, 4, 2))
    mask = (rng.random((3, 4, 2)) > 0.3).astype(np.float32)
    fn = jax.vmap(lambda q, a, qr, m: losses.acer_value_loss(q, a, qr, mask_t=m))
    got = np.asarray(jax.jit(fn)(f32(q), jnp.asarray(a), f32(q_ret), jnp.asarray(mask)))
    for i in range(3):
        one = value_loss_jit(f32(q[i]), jnp.asarray(a[i]), f32(q_ret[i]), mask_t=f32(mask[i]))
        np.testing.assert_allclose(got[i], np.asarray(one), rtol=1e-6, atol=1e-7)
