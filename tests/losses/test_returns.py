"""Tests for `agents.losses.returns`: V-trace, λ-returns, n-step returns and GAE."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loss_refs import (
    GAMMA,
    f32,
    gae_np,
    lambda_returns_np,
    mask_pieces,
    n_step_returns_np,
    rand_discounts,
    vtrace_sum_form,
)

from agents import losses

SHAPES = [(1, 1), (3, 1), (6, 2), (4, 3)]  # (T, B)
TOL = {"rtol": 1e-5, "atol": 1e-4}
SETTINGS = settings(max_examples=20, deadline=None)

vtrace_jit = jax.jit(losses.vtrace)
lambda_jit = jax.jit(losses.lambda_returns)
n_step_jit = jax.jit(losses.n_step_returns, static_argnames="n")
gae_jit = jax.jit(losses.gae)


def make_inputs(rng, T, B, p_term=0.3):
    r = rng.normal(size=(T, B))
    d = rand_discounts(rng, (T, B), p_term)
    v = rng.normal(size=(T, B)) * 2.0
    boot = rng.normal(size=(B,)) * 2.0
    rho = np.exp(rng.normal(size=(T, B)))  # both sides of every clipping threshold
    return r, d, v, boot, rho


# ---------------------------------------------------------------------------------------------
# Against the references
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    lam=st.sampled_from([1.0, 0.8]),
    clips=st.sampled_from([(1.0, 1.0, 1.0), (2.0, 0.5, 1.5), (0.7, 1.2, 0.9)]),
)
def test_vtrace_matches_impala_sum_form(seed, shape, lam, clips):
    rng = np.random.default_rng(seed)
    r, d, v, boot, rho = make_inputs(rng, *shape)
    clip_rho, clip_c, clip_pg = clips
    want_vs, want_adv = vtrace_sum_form(v, boot, r, d, rho, lam, clip_rho, clip_c, clip_pg)
    out = vtrace_jit(*f32(v, boot, r, d, rho), lam, clip_rho, clip_c, clip_pg)
    assert isinstance(out, losses.VTraceOutput)
    assert out.vs.shape == shape and out.pg_advantages.shape == shape
    np.testing.assert_allclose(np.asarray(out.vs), want_vs, **TOL)
    np.testing.assert_allclose(np.asarray(out.pg_advantages), want_adv, **TOL)


def test_vtrace_on_policy_is_discounted_return():
    # ρ = 1, λ = 1: every c = ρ̄ = 1 and v_s is the discounted return bootstrapped at T.
    # r = 1, 2, 3, d = .5, 0, .5, V(x_3) = 4: v = 1 + .5·2 = 2, 2 (terminal), 3 + 2 = 5.
    r = np.array([[1.0], [2.0], [3.0]])
    d = np.array([[0.5], [0.0], [0.5]])
    v = np.array([[10.0], [-3.0], [7.0]])
    out = vtrace_jit(*f32(v, np.array([4.0]), r, d, np.ones((3, 1))))
    np.testing.assert_allclose(np.asarray(out.vs)[:, 0], [2.0, 2.0, 5.0], rtol=1e-6)
    # A_s = r_s + d_s v_{s+1} − V(x_s) = (1 + 1 − 10, 2 − (−3), 3 + 2 − 7).
    np.testing.assert_allclose(np.asarray(out.pg_advantages)[:, 0], [-8.0, 5.0, -2.0], rtol=1e-6)


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    lam=st.sampled_from([0.0, 0.5, 0.95, 1.0, "array"]),
)
def test_lambda_returns_match_weighted_n_step_average(seed, shape, lam):
    rng = np.random.default_rng(seed)
    r, d, v, boot, _ = make_inputs(rng, *shape)
    if lam == "array":
        lam = rng.random(shape)
        got = lambda_jit(*f32(r, d, v, boot), f32(lam))
    else:
        got = lambda_jit(*f32(r, d, v, boot), lam)
    np.testing.assert_allclose(np.asarray(got), lambda_returns_np(r, d, v, boot, lam), **TOL)


def test_lambda_returns_hand_checked():
    # r = (1, 1), d = (.5, .5), V(x_1) = 2, V(x_2) = 4, λ = .5:
    # G_1 = 1 + .5·4 = 3; G_0 = 1 + .5·(.5·2 + .5·3) = 2.25.
    got = lambda_jit(*f32([[1.0], [1.0]], [[0.5], [0.5]], [[7.0], [2.0]], [4.0]), 0.5)
    np.testing.assert_allclose(np.asarray(got)[:, 0], [2.25, 3.0], rtol=1e-6)


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    n=st.sampled_from([1, 2, 5]),
)
def test_n_step_returns_match_reference(seed, shape, n):
    rng = np.random.default_rng(seed)
    r, d, v, boot, _ = make_inputs(rng, *shape)
    got = n_step_jit(*f32(r, d, v, boot), n=n)
    np.testing.assert_allclose(np.asarray(got), n_step_returns_np(r, d, v, boot, n), **TOL)


def test_n_step_returns_hand_checked():
    # r = (1, 2, 3), d = (.5, .5, .5), V = (0, 10, 20), V(x_3) = 40, n = 2:
    # G_0 = 1 + .5·2 + .25·20 = 7; G_1 = 2 + .5·3 + .25·40 = 13.5; G_2 = 3 + .5·40 = 23.
    args = f32([[1.0], [2.0], [3.0]], np.full((3, 1), 0.5), [[0.0], [10.0], [20.0]], [40.0])
    np.testing.assert_allclose(np.asarray(n_step_jit(*args, n=2))[:, 0], [7.0, 13.5, 23.0])
    with pytest.raises(ValueError, match="n must"):
        losses.n_step_returns(*args, n=0)
    with pytest.raises(ValueError, match="n must"):
        losses.n_step_returns(*args, n=2.0)


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    lam=st.sampled_from([0.0, 0.95, 1.0]),
)
def test_gae_matches_reference_and_lambda_returns(seed, shape, lam):
    rng = np.random.default_rng(seed)
    r, d, v, boot, _ = make_inputs(rng, *shape)
    got = np.asarray(gae_jit(*f32(r, d, v, boot), lam))
    np.testing.assert_allclose(got, gae_np(r, d, v, boot, lam), **TOL)
    np.testing.assert_allclose(got + v, lambda_returns_np(r, d, v, boot, lam), **TOL)


def test_gae_default_lambda_is_095():
    rng = np.random.default_rng(0)
    r, d, v, boot, _ = make_inputs(rng, 5, 2)
    got = losses.gae(*f32(r, d, v, boot))
    np.testing.assert_allclose(np.asarray(got), gae_np(r, d, v, boot, 0.95), **TOL)


# ---------------------------------------------------------------------------------------------
# vmap, gradients
# ---------------------------------------------------------------------------------------------


ALL_FUNCTIONS = {
    "vtrace": lambda r, d, v, boot, rho, m: losses.vtrace(
        v, boot, r, d, rho, 0.9, 1.0, 1.0, 1.0, mask_t=m
    ),
    "lambda_returns": lambda r, d, v, boot, rho, m: losses.lambda_returns(
        r, d, v, boot, 0.8, mask_t=m
    ),
    "n_step_returns": lambda r, d, v, boot, rho, m: losses.n_step_returns(
        r, d, v, boot, 3, mask_t=m
    ),
    "gae": lambda r, d, v, boot, rho, m: losses.gae(r, d, v, boot, 0.9, mask_t=m),
}


@pytest.mark.parametrize("name", sorted(ALL_FUNCTIONS))
def test_vmap_matches_per_slice(name):
    fn = ALL_FUNCTIONS[name]
    rng = np.random.default_rng(1)
    N, (T, B) = 3, SHAPES[2]
    slices = [(*make_inputs(rng, T, B), rng.random((T, B)) > 0.3) for _ in range(N)]
    stacked = [np.stack(x) for x in zip(*slices, strict=True)]
    got = jax.tree.leaves(jax.jit(jax.vmap(fn))(*f32(*stacked)))
    for i in range(N):
        one = jax.tree.leaves(jax.jit(fn)(*f32(*slices[i])))
        for g, o in zip(got, one, strict=True):
            np.testing.assert_allclose(np.asarray(g)[i], np.asarray(o), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(ALL_FUNCTIONS))
def test_targets_carry_no_gradient(name):
    fn = ALL_FUNCTIONS[name]
    rng = np.random.default_rng(2)
    r, d, v, boot, rho = f32(*make_inputs(rng, 4, 2))
    mask = f32([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    for leaf in range(2 if name == "vtrace" else 1):

        def total(*xs, leaf=leaf):
            return jnp.sum(jax.tree.leaves(fn(*xs, mask))[leaf])

        grads = jax.jit(jax.grad(total, argnums=(0, 1, 2, 3, 4)))(r, d, v, boot, rho)
        for g in grads:
            assert np.all(np.asarray(g) == 0.0)
        assert float(total(r, d, v, boot, rho)) != 0.0


def test_lambda_and_clip_arguments_carry_no_gradient():
    rng = np.random.default_rng(3)
    r, d, v, boot, rho = f32(*make_inputs(rng, 4, 2))
    grads = jax.grad(
        lambda lam, cr, cc, cp: jnp.sum(losses.vtrace(v, boot, r, d, rho, lam, cr, cc, cp).vs),
        argnums=(0, 1, 2, 3),
    )(0.9, 1.0, 1.0, 1.0)
    assert all(float(g) == 0.0 for g in grads)
    assert float(jax.grad(lambda lam: jnp.sum(losses.lambda_returns(r, d, v, boot, lam)))(0.5)) == 0
    assert float(jax.grad(lambda lam: jnp.sum(losses.gae(r, d, v, boot, lam)))(0.5)) == 0


# ---------------------------------------------------------------------------------------------
# Masks and episode boundaries
# ---------------------------------------------------------------------------------------------


def reference_outputs(name, r, d, v, boot, rho):
    """The NumPy reference of each function, as a tuple of `[T, B]` arrays."""
    if name == "vtrace":
        return vtrace_sum_form(v, boot, r, d, rho, 0.9)
    if name == "lambda_returns":
        return (lambda_returns_np(r, d, v, boot, 0.8),)
    if name == "n_step_returns":
        return (n_step_returns_np(r, d, v, boot, 3),)
    return (gae_np(r, d, v, boot, 0.9),)


def masked_estimates(name, v):
    """What every output equals at a masked step: V(x_t) for targets, 0 for advantages."""
    if name == "vtrace":
        return (v, np.zeros_like(v))
    if name == "gae":
        return (np.zeros_like(v),)
    return (v,)


@pytest.mark.parametrize("name", sorted(ALL_FUNCTIONS))
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shape=st.sampled_from(SHAPES[1:]))
def test_random_mask_splits_into_independent_pieces(name, seed, shape):
    rng = np.random.default_rng(seed)
    r, d, v, boot, rho = make_inputs(rng, *shape)
    T, B = shape
    mask = rng.random((T, B)) > 0.35
    want = [w.copy() for w in masked_estimates(name, v)]
    for b in range(B):
        for start, stop in mask_pieces(mask[:, b]):
            piece_boot = boot[b] if stop == T else v[stop, b]  # V(x_stop) before a masked step
            sl, col = slice(start, stop), slice(b, b + 1)
            piece = reference_outputs(
                name, r[sl, col], d[sl, col], v[sl, col], np.array([piece_boot]), rho[sl, col]
            )
            for w, p in zip(want, piece, strict=True):
                w[sl, b] = p[:, 0]
    got = jax.tree.leaves(jax.jit(ALL_FUNCTIONS[name])(*f32(r, d, v, boot, rho, mask)))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, **TOL)


@pytest.mark.parametrize("name", sorted(ALL_FUNCTIONS))
@pytest.mark.parametrize("kind", ["termination", "truncation"])
@pytest.mark.parametrize("k", [0, 3])
def test_episode_boundary(name, kind, k):
    """Episode 1 ends at step k, k+1 is envpool's fake auto-reset step, episode 2 starts at k+2."""
    fn = jax.jit(ALL_FUNCTIONS[name])
    rng = np.random.default_rng(20 + k)
    T, B = 8, 2
    r, d, v, boot, rho = make_inputs(rng, T, B, p_term=0.0)
    d[k] = 0.0 if kind == "termination" else GAMMA
    r[k + 1] = 0.0
    mask = np.ones((T, B))
    mask[k + 1] = 0.0
    whole = [np.asarray(x) for x in jax.tree.leaves(fn(*f32(r, d, v, boot, rho, mask)))]

    head, tail = slice(0, k + 1), slice(k + 2, T)
    # Truncation bootstraps from the final observation x_{k+1}; after a termination the
    # bootstrap of the first piece must not matter.
    head_boot = v[k + 1] if kind == "truncation" else np.full(B, -55.0)
    ones = np.ones((k + 1, B))
    first = jax.tree.leaves(fn(*f32(r[head], d[head], v[head], head_boot, rho[head], ones)))
    second = jax.tree.leaves(
        fn(*f32(r[tail], d[tail], v[tail], boot, rho[tail], np.ones((T - k - 2, B))))
    )
    at_reset = masked_estimates(name, v)
    for w, f, s, e in zip(whole, first, second, at_reset, strict=True):
        np.testing.assert_allclose(w[head], np.asarray(f), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(w[tail], np.asarray(s), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(w[k + 1], e[k + 1], rtol=1e-6, atol=1e-7)
    # And the first piece against the NumPy reference.
    for w, ref in zip(
        whole, reference_outputs(name, r[head], d[head], v[head], head_boot, rho[head]), strict=True
    ):
        np.testing.assert_allclose(w[head], ref, **TOL)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def valid_args():
    r, d, v, boot, rho = f32(*make_inputs(np.random.default_rng(4), 4, 2))
    return {"r_t": r, "discount_t": d, "v_t": v, "bootstrap_value": boot, "rho_t": rho}


BAD = [
    ("r_t", lambda x: x[:3], "discount_t"),  # r_t sets T, so the others disagree with it
    ("v_t", lambda x: x[:3], "v_t"),  # mismatched T
    ("discount_t", lambda x: x[:, :1], "discount_t"),  # mismatched B
    ("v_t", lambda x: x[..., None], "v_t"),  # [T, B, 1] for [T, B]
    ("discount_t", lambda x: x[..., None], "discount_t"),
    ("r_t", lambda x: x[..., None], "r_t"),
    ("r_t", lambda x: x.astype(jnp.int32), "r_t"),  # integer rewards
    ("discount_t", lambda x: x.astype(jnp.int32), "discount_t"),
    ("v_t", lambda x: x.astype(jnp.int32), "v_t"),
    ("bootstrap_value", lambda x: x[None], "bootstrap_value"),  # bootstrap shape wrong
    ("bootstrap_value", lambda x: jnp.zeros(()), "bootstrap_value"),
    ("bootstrap_value", lambda x: x.astype(jnp.int32), "bootstrap_value"),
]

CALLS = {
    "vtrace": lambda a, **kw: losses.vtrace(
        a["v_t"], a["bootstrap_value"], a["r_t"], a["discount_t"], a["rho_t"], **kw
    ),
    "lambda_returns": lambda a, **kw: losses.lambda_returns(
        a["r_t"], a["discount_t"], a["v_t"], a["bootstrap_value"], **kw
    ),
    "n_step_returns": lambda a, **kw: losses.n_step_returns(
        a["r_t"], a["discount_t"], a["v_t"], a["bootstrap_value"], 2, **kw
    ),
    "gae": lambda a, **kw: losses.gae(
        a["r_t"], a["discount_t"], a["v_t"], a["bootstrap_value"], **kw
    ),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize(("name", "corrupt", "match"), BAD)
def test_bad_inputs_raise(call, name, corrupt, match):
    args = valid_args()
    args[name] = corrupt(args[name])
    with pytest.raises(ValueError, match=match):
        CALLS[call](args)


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("mask", [np.ones((4,)), np.ones((4, 2, 1)), np.ones((2, 4))])
def test_bad_mask_raises(call, mask):
    with pytest.raises(ValueError, match="mask_t"):
        CALLS[call](valid_args(), mask_t=f32(mask))


@pytest.mark.parametrize(
    "corrupt", [lambda x: x[..., None], lambda x: x[:3], lambda x: x.astype(jnp.int32)]
)
def test_vtrace_bad_rho_raises(corrupt):
    args = valid_args()
    args["rho_t"] = corrupt(args["rho_t"])
    with pytest.raises(ValueError, match="rho_t"):
        CALLS["vtrace"](args)


def test_functools_partial_jit_static_n():
    # `n` must be static: n-step returns under jit with n bound by functools.partial.
    r, d, v, boot, _ = make_inputs(np.random.default_rng(5), 5, 2)
    got = jax.jit(functools.partial(losses.n_step_returns, n=2))(*f32(r, d, v, boot))
    np.testing.assert_allclose(np.asarray(got), n_step_returns_np(r, d, v, boot, 2), **TOL)


def test_defaults():
    # vtrace: λ = 1 and every clip 1; lambda_returns: λ = 1.
    r, d, v, boot, rho = make_inputs(np.random.default_rng(6), 5, 2)
    out = losses.vtrace(*f32(v, boot, r, d, rho))
    want_vs, want_adv = vtrace_sum_form(v, boot, r, d, rho)
    np.testing.assert_allclose(np.asarray(out.vs), want_vs, **TOL)
    np.testing.assert_allclose(np.asarray(out.pg_advantages), want_adv, **TOL)
    got = losses.lambda_returns(*f32(r, d, v, boot))
    np.testing.assert_allclose(np.asarray(got), lambda_returns_np(r, d, v, boot, 1.0), **TOL)
