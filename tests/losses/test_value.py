"""Tests for `agents.losses.value`: value rescaling, the Huber loss, n-step (double) Q-learning
targets with and without rescaling, categorical (C51) targets and their losses."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from loss_refs import GAMMA, f32, rand_discounts, rand_probs
from loss_refs_families import (
    categorical_loss_np,
    categorical_targets_np,
    h_inv_np,
    h_np,
    huber_np,
    q_loss_np,
    q_targets_np,
)

from agents import losses

TOL = {"rtol": 1e-5, "atol": 1e-4}
SETTINGS = settings(max_examples=10, deadline=None)


def make_inputs(rng, T, B, A, p_term=0.3, p_mask=0.0):
    """Rewards, discounts, mask, and target/online Q values at x_0..x_T `[T + 1, B, A]`."""
    r = rng.normal(size=(T, B))
    d = rand_discounts(rng, (T, B), p_term)
    mask = (rng.random((T, B)) >= p_mask).astype(np.float64)
    q_target = rng.normal(size=(T + 1, B, A)) * 3.0
    q_online = q_target + rng.normal(size=(T + 1, B, A))  # often, not always, the same argmax
    return r, d, mask, q_target, q_online


@functools.partial(jax.jit, static_argnames=("n", "double", "rescale_eps"))
def q_targets(r, d, mask, q_target, q_online, *, n, double, rescale_eps=None):
    T = r.shape[0]
    kw = dict(mask_t=mask, rescale_eps=rescale_eps)
    if double:
        return losses.double_q_learning_targets(
            r, d, q_target[:T], q_target[T], q_online[:T], q_online[T], n, **kw
        )
    return losses.q_learning_targets(r, d, q_target[:T], q_target[T], n, **kw)


# ---------------------------------------------------------------------------------------------
# Value rescaling and Huber
# ---------------------------------------------------------------------------------------------

WIDE = np.concatenate(
    [
        [0.0, 1e-7, -1e-7, 1e5, -1e5, 1.0, -1.0],
        np.logspace(-6, 5, 23),
        -np.logspace(-6, 5, 23),
        np.random.default_rng(0).normal(size=20) * 30.0,
    ]
)
value_rescale_jit = jax.jit(losses.value_rescale)
inverse_rescale_jit = jax.jit(losses.inverse_value_rescale)


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 0.0])
def test_value_rescale_and_inverse_match_pohlen(eps):
    x = f32(WIDE)
    h, h_inv = np.asarray(value_rescale_jit(x, eps)), np.asarray(inverse_rescale_jit(x, eps))
    np.testing.assert_allclose(h, h_np(x, eps), rtol=2e-6, atol=1e-30)
    # The closed form of Prop. A.2 cancels near 0 even in float64 (errors ~1e-13 there).
    np.testing.assert_allclose(h_inv, h_inv_np(x, eps), rtol=2e-6, atol=1e-12)
    assert h[0] == 0.0 and h_inv[0] == 0.0


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 0.0])
def test_value_rescale_round_trips(eps):
    x = f32(WIDE)
    there_and_back = np.asarray(inverse_rescale_jit(value_rescale_jit(x, eps), eps))
    back_and_there = np.asarray(value_rescale_jit(inverse_rescale_jit(x, eps), eps))
    # Relative float32 precision everywhere, including |x| ~ 1e-7 and 1e5.
    np.testing.assert_allclose(there_and_back, x, rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(back_and_there, x, rtol=1e-5, atol=1e-30)
    # The reference pair is also inverse (a check of the references themselves).
    np.testing.assert_allclose(h_inv_np(h_np(WIDE, eps), eps), WIDE, rtol=1e-9, atol=1e-12)


def test_value_rescale_slope_at_zero_and_monotone():
    slopes = jax.jit(
        lambda eps: (
            jax.grad(losses.value_rescale)(0.0, eps),
            jax.grad(losses.inverse_value_rescale)(0.0, eps),
        )
    )
    for eps in (1e-3, 0.0):
        h_slope, h_inv_slope = slopes(eps)
        assert float(h_slope) == pytest.approx(0.5 + eps)
        assert float(h_inv_slope) == pytest.approx(2.0 / (1.0 + 2.0 * eps))
    h = np.asarray(value_rescale_jit(f32(np.sort(WIDE))))
    assert np.all(np.diff(h) >= 0)


@jax.jit
def huber_and_grad(x, delta):
    return losses.huber_loss(x, delta), jax.vmap(jax.grad(losses.huber_loss), (0, None))(x, delta)


@pytest.mark.parametrize("delta", [0.5, 1.0, 2.0])
def test_huber_loss_and_gradient_match_reference(delta):
    x = f32(np.concatenate([WIDE[:40] / 1e3, [delta, -delta, 0.999 * delta, 1.001 * delta]]))
    want, want_grad = huber_np(x, delta)
    loss, grad = huber_and_grad(x, delta)
    np.testing.assert_allclose(np.asarray(loss), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(np.asarray(grad), np.clip(x, -delta, delta), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# n-step (double) Q-learning targets
# ---------------------------------------------------------------------------------------------


# (shape, n, double, rescale_eps): each configuration compiles once; the data, episode ends
# and masks are drawn per example.
Q_CONFIGS = [
    ((1, 1, 2), 1, False, None),
    ((4, 2, 3), 3, True, 1e-3),
    ((7, 3, 4), 3, False, 1e-3),
    ((7, 3, 4), 5, True, None),
]


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    config=st.sampled_from(Q_CONFIGS),
    p_mask=st.sampled_from([0.0, 0.3]),
)
def test_q_targets_match_reference(seed, config, p_mask):
    shape, n, double, rescale_eps = config
    rng = np.random.default_rng(seed)
    r, d, mask, q_target, q_online = make_inputs(rng, *shape, p_mask=p_mask)
    got = q_targets(*f32(r, d, mask, q_target, q_online), n=n, double=double,
                    rescale_eps=rescale_eps)  # fmt: skip
    want = q_targets_np(r, d, q_target, q_online if double else None, n, mask, rescale_eps)
    assert got.shape == shape[:2]
    np.testing.assert_allclose(np.asarray(got), want, **TOL)


def test_q_targets_hand_checked():
    # T = 3, n = 2, one trace; Q_target(x_s, ·) = [s, 10 − s], Q_online(x_s, ·) = [1, 0].
    # V(x) = max: 10 − s; double: Q_target(x_s, 0) = s.
    # r = (1, 2, 3), d = (.5, .5, .5):
    #   max:    G_0 = 1 + .5·2 + .25·8 = 4;  G_1 = 2 + .5·3 + .25·7 = 5.25;  G_2 = 3 + .5·7
    #   double: G_0 = 1 + 1 + .25·2 = 2.5;   G_1 = 2 + 1.5 + .25·3 = 4.25;   G_2 = 3 + .5·3
    s = np.arange(4.0)
    q_target = np.stack([s, 10.0 - s], axis=-1)[:, None, :]
    q_online = np.broadcast_to(np.array([1.0, 0.0]), (4, 1, 2))
    r, d, mask = np.array([[1.0], [2.0], [3.0]]), np.full((3, 1), 0.5), np.ones((3, 1))
    args = f32(r, d, mask, q_target, q_online)
    got = q_targets(*args, n=2, double=False)
    np.testing.assert_allclose(np.asarray(got)[:, 0], [4.0, 5.25, 6.5], rtol=1e-6)
    got = q_targets(*args, n=2, double=True)
    np.testing.assert_allclose(np.asarray(got)[:, 0], [2.5, 4.25, 4.5], rtol=1e-6)
    with pytest.raises(ValueError, match="n must"):
        losses.q_learning_targets(*f32(r, d, q_target[:3], q_target[3]), 0)


@pytest.mark.parametrize("kind", ["termination", "truncation"])
@pytest.mark.parametrize("double", [False, True])
def test_episode_boundary(kind, double):
    """Episode 1 ends at step k, k+1 is envpool's fake auto-reset step, episode 2 starts at k+2.

    A termination zeroes the discount (the bootstrap beyond it must not matter); a truncation
    keeps γ and bootstraps from the final observation x_{k+1}, as if the trace ended there."""
    T, B, A, k, n = 8, 2, 3, 3, 4
    rng = np.random.default_rng(7)
    r, d, mask, q_target, q_online = make_inputs(rng, T, B, A, p_term=0.0)
    d[k] = 0.0 if kind == "termination" else GAMMA
    r[k + 1] = 0.0
    mask[k + 1] = 0.0
    fn = functools.partial(q_targets, n=n, double=double, rescale_eps=1e-3)
    whole = np.asarray(fn(*f32(r, d, mask, q_target, q_online)))
    want = q_targets_np(r, d, q_target, q_online if double else None, n, mask, 1e-3)
    np.testing.assert_allclose(whole, want, **TOL)

    # The two episodes as separate traces, with no mask: the first ends at x_{k+1}.
    head, tail = slice(0, k + 1), slice(k + 2, T)
    head_q, head_online = q_target[: k + 2].copy(), q_online[: k + 2]
    if kind == "termination":
        head_q[k + 1] = 1e4  # garbage where nothing should bootstrap
    selector = (lambda q: q) if double else (lambda q: None)
    first = q_targets_np(r[head], d[head], head_q, selector(head_online), n, None, 1e-3)
    second = q_targets_np(
        r[tail], d[tail], q_target[k + 2 :], selector(q_online[k + 2 :]), n, None, 1e-3
    )
    np.testing.assert_allclose(whole[head], first, **TOL)
    np.testing.assert_allclose(whole[tail], second, **TOL)


def test_rescaled_targets_are_h_of_plain_targets_on_h_inverse_values():
    # R2D2: rescaling the whole return, not the rewards: G = h(Σ γ^k r + γ^n h⁻¹(V)).
    rng = np.random.default_rng(8)
    r, d, mask, q_target, q_online = make_inputs(rng, 6, 3, 4, p_mask=0.2)
    # the reference from NumPy's h and h⁻¹ and the unrescaled NumPy targets
    plain = q_targets_np(r, d, h_inv_np(q_target, 1e-3), q_online, 3, mask, None)
    rescaled = q_targets(*f32(r, d, mask, q_target, q_online), n=3, double=True, rescale_eps=1e-3)
    np.testing.assert_allclose(np.asarray(rescaled), h_np(plain, 1e-3), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Categorical (C51) targets
# ---------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("n", "double"))
def cat_targets(r, d, mask, probs, q_online, atoms, *, n, double):
    T = r.shape[0]
    if double:
        return losses.categorical_double_q_learning_targets(
            r, d, probs[:T], probs[T], q_online[:T], q_online[T], atoms, n, mask_t=mask
        )
    return losses.categorical_q_learning_targets(r, d, probs[:T], probs[T], atoms, n, mask_t=mask)


# (shape, K, n, double), as Q_CONFIGS.
CATEGORICAL_CONFIGS = [
    ((1, 1, 2), 5, 1, True),
    ((4, 2, 3), 11, 3, False),
    ((7, 3, 4), 7, 3, True),
]


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    config=st.sampled_from(CATEGORICAL_CONFIGS),
    p_mask=st.sampled_from([0.0, 0.3]),
)
def test_categorical_targets_match_algorithm_1(seed, config, p_mask):
    shape, K, n, double = config
    rng = np.random.default_rng(seed)
    r, d, mask, _, q_online = make_inputs(rng, *shape, p_mask=p_mask)
    T, B, A = shape
    probs = rand_probs(rng, (T + 1, B, A, K))
    atoms = np.linspace(-4.0, 4.0, K)  # narrow: some mass is clipped at the edges
    got = cat_targets(*f32(r, d, mask, probs, q_online, atoms), n=n, double=double)
    want = categorical_targets_np(r, d, probs, atoms, q_online if double else None, n, mask)
    assert got.shape == (T, B, K)
    np.testing.assert_allclose(np.asarray(got), want, **TOL)
    np.testing.assert_allclose(np.asarray(got).sum(-1), 1.0, rtol=1e-5)


def test_categorical_target_mean_is_the_scalar_target():
    # With no mass near the edges of a wide support nothing is clipped: the projection keeps
    # the mean, so E[target] = the n-step double Q target on the mean Q values.
    rng = np.random.default_rng(9)
    T, B, A, K = 6, 3, 4, 21
    r, d, mask, _, q_online = make_inputs(rng, T, B, A, p_mask=0.2)
    atoms = np.linspace(-50.0, 50.0, K)
    probs = rand_probs(rng, (T + 1, B, A, K))
    probs[..., np.abs(atoms) > 30.0] = 0.0
    probs /= probs.sum(-1, keepdims=True)
    got = cat_targets(*f32(r, d, mask, probs, q_online, atoms), n=3, double=True)
    means = probs @ atoms
    want = q_targets_np(r, d, means, q_online, 3, mask, None)
    np.testing.assert_allclose(np.asarray(got) @ atoms, want, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Losses and gradients
# ---------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames="delta")
def q_loss_and_grads(q, a, target, mask, delta):
    def total(q, target):
        return jnp.sum(losses.q_learning_loss(q, a, target, mask_t=mask, huber_delta=delta))

    return (
        losses.q_learning_loss(q, a, target, mask_t=mask, huber_delta=delta),
        *jax.grad(total, argnums=(0, 1))(q, target),
    )


@pytest.mark.parametrize(
    ("seed", "huber_delta", "shape"),
    [(0, None, (7, 3, 4)), (1, 1.0, (1, 5, 2)), (2, 0.5, (4, 1, 6)), (3, 1.0, (9, 2, 3))],
)
def test_q_learning_loss_gradient_only_into_the_taken_action(seed, huber_delta, shape):
    rng = np.random.default_rng(seed)
    T, B, A = shape
    q = rng.normal(size=(T, B, A))
    a = rng.integers(0, A, size=(T, B)).astype(np.int32)
    target = rng.normal(size=(T, B)) * 3.0  # TD errors on both sides of δ
    mask = (rng.random((T, B)) > 0.3).astype(np.float64)
    loss, g_q, g_target = q_loss_and_grads(f32(q), a, *f32(target, mask), delta=huber_delta)
    want_loss, want_grad = q_loss_np(q, a, target, mask, huber_delta)
    np.testing.assert_allclose(np.asarray(loss), want_loss, **TOL)
    np.testing.assert_allclose(np.asarray(g_q), want_grad, **TOL)
    assert np.all(np.asarray(g_target) == 0.0)


@jax.jit
def cat_loss_and_grads(logits, a, target, mask):
    def total(logits, target):
        return jnp.sum(losses.categorical_q_learning_loss(logits, a, target, mask_t=mask))

    return (
        losses.categorical_q_learning_loss(logits, a, target, mask_t=mask),
        *jax.grad(total, argnums=(0, 1))(logits, target),
    )


@pytest.mark.parametrize("shape", [(5, 3, 4, 7), (1, 2, 2, 3), (6, 1, 3, 11)])
def test_categorical_loss_matches_reference_and_only_moves_the_taken_action(shape):
    rng = np.random.default_rng(list(shape))
    T, B, A, K = shape
    logits = rng.normal(size=(T, B, A, K))
    a = rng.integers(0, A, size=(T, B)).astype(np.int32)
    target = rand_probs(rng, (T, B, K))
    mask = (rng.random((T, B)) > 0.3).astype(np.float64)
    loss, g_logits, g_target = cat_loss_and_grads(f32(logits), a, *f32(target, mask))
    np.testing.assert_allclose(
        np.asarray(loss), categorical_loss_np(logits, a, target, mask), **TOL
    )
    g = np.asarray(g_logits)
    taken = np.zeros((T, B, A), bool)
    taken[np.arange(T)[:, None], np.arange(B)[None, :], a] = True
    assert np.all(g[~taken] == 0.0)
    assert np.all(g[~(mask > 0)] == 0.0)
    # d/d logits of −Σ p log softmax = softmax − p at the taken action of valid steps.
    for t, b in zip(*np.nonzero(mask), strict=True):
        e = np.exp(logits[t, b, a[t, b]] - logits[t, b, a[t, b]].max())
        np.testing.assert_allclose(g[t, b, a[t, b]], e / e.sum() - target[t, b], atol=1e-5)
    assert np.all(np.asarray(g_target) == 0.0)


TARGET_FNS = {
    "q_learning_targets": lambda r, d, m, q, o, p, z: losses.q_learning_targets(
        r, d, q[:-1], q[-1], 2, mask_t=m
    ),
    "double_q_learning_targets": lambda r, d, m, q, o, p, z: losses.double_q_learning_targets(
        r, d, q[:-1], q[-1], o[:-1], o[-1], 2, mask_t=m, rescale_eps=1e-3
    ),
    "categorical_q_learning_targets": lambda r, d, m, q, o, p, z: (
        losses.categorical_q_learning_targets(r, d, p[:-1], p[-1], z, 2, mask_t=m)
    ),
    "categorical_double_q_learning_targets": lambda r, d, m, q, o, p, z: (
        losses.categorical_double_q_learning_targets(
            r, d, p[:-1], p[-1], o[:-1], o[-1], z, 2, mask_t=m
        )
    ),
}


def target_inputs(seed, T=4, B=4, A=3, K=5):
    rng = np.random.default_rng(seed)
    r, d, mask, q_target, q_online = make_inputs(rng, T, B, A, p_mask=0.2)
    probs = rand_probs(rng, (T + 1, B, A, K))
    return (*f32(r, d, mask, q_target, q_online, probs), f32(np.linspace(-3.0, 3.0, K)))


# the inputs each target function reads, by position in TARGET_FNS' (r, d, mask, q, online,
# probs, atoms)
TARGET_INPUTS = {
    "q_learning_targets": (0, 1, 2, 3),
    "double_q_learning_targets": (0, 1, 2, 3, 4),
    "categorical_q_learning_targets": (0, 1, 2, 5, 6),
    "categorical_double_q_learning_targets": (0, 1, 2, 4, 5, 6),
}


@pytest.mark.parametrize("name", sorted(TARGET_FNS))
def test_targets_carry_no_gradient(name):
    fn, used = TARGET_FNS[name], TARGET_INPUTS[name]
    args = target_inputs(11)
    base = np.asarray(fn(*args))
    for i in used:  # each input it reads moves the targets, so a zero gradient means something
        moved = list(args)
        moved[i] = args[i] * 0.5 + 0.25 if i != 2 else 1.0 - args[i]  # the mask flipped
        if i == 4:  # the online values choose the action: another argmax
            moved[i] = -args[i]
        if i == 5:  # probabilities stay normalised
            moved[i] = jnp.flip(args[i], axis=-1)
        assert not np.allclose(np.asarray(fn(*moved)), base), f"{name} ignores input {i}"
    grads = jax.jit(jax.grad(lambda *x: jnp.sum(fn(*x) ** 2), argnums=used))(*args)
    for i, g in zip(used, grads, strict=True):
        assert np.all(np.asarray(g) == 0.0), f"{name}: gradient into input {i}"


@pytest.mark.parametrize(
    "name", ["double_q_learning_targets", "categorical_double_q_learning_targets"]
)
def test_targets_under_shard_map_and_vmap_match_reference(name):
    fn = TARGET_FNS[name]
    args = target_inputs(12)
    r, d, mask, q_target, q_online, probs, atoms = args
    if name == "double_q_learning_targets":
        want = q_targets_np(r, d, q_target, q_online, 2, mask, 1e-3)
        # vmap over a leading axis of two traces (the second one negated).
        two = [np.stack([x, x]) for x in (r, d, mask)] + [np.stack([x, -x]) for x in args[3:6]]
        got = jax.jit(jax.vmap(fn, in_axes=(0,) * 6 + (None,)))(*two, atoms)
        np.testing.assert_allclose(np.asarray(got)[0], want, **TOL)
        other = q_targets_np(r, d, -q_target, -q_online, 2, mask, 1e-3)
        np.testing.assert_allclose(np.asarray(got)[1], other, **TOL)
    else:
        want = categorical_targets_np(r, d, probs, atoms, q_online, 2, mask)
    # shard_map over the batch axis (axis 1 of every time-major input) on 2 devices.
    mesh = Mesh(np.array(jax.devices()[:2]), ("d",))
    specs = (P(None, "d"),) * 6 + (P(),)
    sharded = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=P(None, "d")))
    np.testing.assert_allclose(np.asarray(sharded(*args)), want, **TOL)


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def valid_kwargs(name):
    r, d, m, q, o, p, z = target_inputs(13)
    a = jnp.zeros(r.shape, jnp.int32)
    trace = dict(r_t=r, discount_t=d)
    return {
        "q_learning_targets": dict(**trace, target_q_t=q[:-1], bootstrap_target_q=q[-1], mask_t=m),
        "double_q_learning_targets": dict(
            **trace,
            target_q_t=q[:-1],
            bootstrap_target_q=q[-1],
            online_q_t=o[:-1],
            bootstrap_online_q=o[-1],
            mask_t=m,
        ),
        "categorical_q_learning_targets": dict(
            **trace, target_probs_t=p[:-1], bootstrap_target_probs=p[-1], atoms=z, mask_t=m
        ),
        "categorical_double_q_learning_targets": dict(
            **trace,
            target_probs_t=p[:-1],
            bootstrap_target_probs=p[-1],
            online_q_t=o[:-1],
            bootstrap_online_q=o[-1],
            atoms=z,
            mask_t=m,
        ),
        "q_learning_loss": dict(q_t=q[:-1], a_t=a, target_t=r, mask_t=m),
        "categorical_q_learning_loss": dict(logits_t=p[:-1], a_t=a, target_probs_t=p[:-1, :, 0]),
    }[name]


# The argument that sets (T, B, ...) for each function: its length is not checked against itself.
SETS_SHAPE = {
    "q_learning_targets": "target_q_t",
    "double_q_learning_targets": "target_q_t",
    "categorical_q_learning_targets": "target_probs_t",
    "categorical_double_q_learning_targets": "target_probs_t",
    "q_learning_loss": "q_t",
    "categorical_q_learning_loss": "logits_t",
}
CORRUPT = {
    "extra axis": lambda x: x[..., None],
    "shorter": lambda x: x[:-1],
    "other dtype": lambda x: x.astype(jnp.float32 if x.dtype == jnp.int32 else jnp.int32),
}
SHAPE_CASES = [
    (name, arg, how)
    for name in sorted(SETS_SHAPE)
    for arg in valid_kwargs(name)
    for how in CORRUPT
    if not (arg == SETS_SHAPE[name] and how == "shorter")
    and not (arg == "mask_t" and how != "extra axis")  # a mask is cast to the loss's dtype
]


@pytest.mark.parametrize(("name", "arg", "how"), SHAPE_CASES)
def test_bad_shapes_raise_one_line_error_naming_the_argument(name, arg, how):
    kwargs = valid_kwargs(name)
    kwargs[arg] = CORRUPT[how](kwargs[arg])
    with pytest.raises(ValueError, match=rf"^{arg} ") as info:
        getattr(losses, name)(**kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        (lambda: losses.value_rescale(f32(WIDE), -1e-3), "eps"),
        (lambda: losses.inverse_value_rescale(f32(WIDE), np.ones(2)), "eps"),
        (lambda: losses.value_rescale(jnp.arange(3)), "x"),
        (lambda: losses.huber_loss(f32(WIDE), -1.0), "delta"),
        (lambda: losses.huber_loss(f32(WIDE), np.ones(3)), "delta"),
        (lambda: losses.q_learning_loss(**valid_kwargs("q_learning_loss"), huber_delta=-1.0),
         "delta"),
        (lambda: losses.q_learning_targets(**valid_kwargs("q_learning_targets"),
                                           rescale_eps=-0.1), "eps"),
        (lambda: losses.q_learning_targets(**{**valid_kwargs("q_learning_targets"),
                                              "discount_t": np.full((4, 4), 1.5, np.float32)}),
         "discount_t"),
        (lambda: losses.categorical_q_learning_targets(
            **{**valid_kwargs("categorical_q_learning_targets"),
               "atoms": np.array([0.0, 1.0, 1.0, 2.0, 3.0], np.float32)}), "atoms"),
    ],
)  # fmt: skip
def test_bad_hyperparameters_raise_one_line_error(call, arg):
    with pytest.raises(ValueError, match=rf"^{arg} must ") as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["q_learning_loss", "categorical_q_learning_loss"])
def test_checked_catches_out_of_range_actions(name):
    kwargs = valid_kwargs(name)
    bad = {**kwargs, "a_t": kwargs["a_t"].at[1, 0].set(3)}
    with pytest.raises(ValueError, match=r"a_t must lie in \[0, 3\)"):
        losses.checked(getattr(losses, name))(**bad)
    got = losses.checked(getattr(losses, name))(**kwargs)
    np.testing.assert_allclose(got, getattr(losses, name)(**kwargs), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(SETS_SHAPE))
def test_unwrapped_losses_emit_no_checks(name):
    kwargs = valid_kwargs(name)
    assert "check" not in str(jax.make_jaxpr(lambda: getattr(losses, name)(**kwargs))())
