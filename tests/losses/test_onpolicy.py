"""Tests for `agents.losses.onpolicy`: PPO's clipped surrogate, the clipped value loss and
advantage normalisation (also across devices under `jax.shard_map`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from loss_refs import f32
from loss_refs_families import clipped_value_np, normalize_np, ppo_clip_np

from agents import losses

SHAPES = [(1, 1), (3, 2), (5, 4)]  # (T, B)
TOL = {"rtol": 1e-5, "atol": 1e-5}
SETTINGS = settings(max_examples=15, deadline=None)

ppo_jit = jax.jit(losses.ppo_clip_loss)
value_jit = jax.jit(losses.clipped_value_loss)
normalize_jit = jax.jit(losses.normalize_advantages)


def ppo_grad(logp, old_logp, adv, eps, mask):
    """d Σ loss / d (logp, old_logp, adv)."""
    return jax.grad(
        lambda *x: jnp.sum(losses.ppo_clip_loss(*x, eps, mask_t=mask).loss), argnums=(0, 1, 2)
    )(logp, old_logp, adv)


ppo_grad_jit = jax.jit(ppo_grad)


@jax.jit
def value_grad_jit(v, old_v, ret, eps, mask):
    """d Σ loss / d (v, old_v, ret)."""
    return jax.grad(
        lambda *x: jnp.sum(losses.clipped_value_loss(*x, eps, mask_t=mask)), argnums=(0, 1, 2)
    )(v, old_v, ret)


def make_ppo_inputs(rng, T, B, p_mask=0.0):
    logp = rng.normal(size=(T, B)) - 1.0
    old_logp = logp + rng.normal(size=(T, B)) * 0.3  # ratios on both sides of 1 ± ε
    adv = rng.normal(size=(T, B)) * 2.0
    mask = (rng.random((T, B)) >= p_mask).astype(np.float64)
    return logp, old_logp, adv, mask


# ---------------------------------------------------------------------------------------------
# PPO clipped surrogate
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    eps=st.sampled_from([0.1, 0.2]),
    p_mask=st.sampled_from([0.0, 0.3]),
)
def test_ppo_clip_loss_and_gradient_match_reference(seed, shape, eps, p_mask):
    rng = np.random.default_rng(seed)
    logp, old_logp, adv, mask = make_ppo_inputs(rng, *shape, p_mask)
    want_loss, want_clipped, want_kl, want_grad = ppo_clip_np(logp, old_logp, adv, eps, mask)
    out = ppo_jit(*f32(logp, old_logp, adv), eps, mask_t=f32(mask))
    assert isinstance(out, losses.PPOClipOutput)
    np.testing.assert_allclose(np.asarray(out.loss), want_loss, **TOL)
    np.testing.assert_array_equal(np.asarray(out.clipped), want_clipped)
    np.testing.assert_allclose(np.asarray(out.approx_kl), want_kl, rtol=1e-4, atol=1e-6)
    g_logp, g_old, g_adv = ppo_grad_jit(*f32(logp, old_logp, adv), eps, f32(mask))
    np.testing.assert_allclose(np.asarray(g_logp), want_grad, **TOL)
    # Only log π_θ carries gradient: the old log-probabilities and the advantages are constants.
    assert np.all(np.asarray(g_old) == 0.0) and np.all(np.asarray(g_adv) == 0.0)


def test_ppo_clip_loss_hand_checked():
    # ε = 0.2. Ratios 1.5, 0.5, 1.1, 0.5 with advantages 2, 2, −1, −1:
    #   min(3, 2.4) = 2.4; min(1, 1.6) = 1; min(−1.1, −1.1) = −1.1; min(−0.5, −0.8) = −0.8.
    ratio = np.array([[1.5, 0.5, 1.1, 0.5]])
    adv = np.array([[2.0, 2.0, -1.0, -1.0]])
    old = np.zeros_like(ratio)
    out = ppo_jit(*f32(np.log(ratio), old, adv), 0.2)
    np.testing.assert_allclose(np.asarray(out.loss)[0], [-2.4, -1.0, 1.1, 0.8], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out.clipped)[0], [1.0, 1.0, 0.0, 1.0])
    kl = (ratio - 1.0) - np.log(ratio)
    np.testing.assert_allclose(np.asarray(out.approx_kl), kl, rtol=1e-5)
    # Gradient: zero where the clipped branch is the minimum (first and last), −ρ·A elsewhere.
    g = ppo_grad_jit(*f32(np.log(ratio), old, adv), 0.2, f32(np.ones_like(ratio)))[0]
    np.testing.assert_allclose(np.asarray(g)[0], [0.0, -1.0, 1.1, 0.0], rtol=1e-6)


def test_ppo_masked_steps_ignore_garbage():
    # Masked steps may hold anything (±inf log-probabilities of a fake transition): the loss,
    # the diagnostics and the gradient stay finite and are zero there.
    rng = np.random.default_rng(0)
    logp, old_logp, adv, _ = make_ppo_inputs(rng, 4, 3)
    mask = np.ones((4, 3))
    mask[1, 0] = mask[3, 2] = 0.0
    logp[1, 0], old_logp[3, 2], adv[1, 0] = np.inf, -np.inf, np.nan
    out = ppo_jit(*f32(logp, old_logp, adv), 0.2, mask_t=f32(mask))
    g = ppo_grad_jit(*f32(logp, old_logp, adv), 0.2, f32(mask))[0]
    for x in (*out, g):
        x = np.asarray(x)
        assert np.all(np.isfinite(x))
        assert x[1, 0] == 0.0 and x[3, 2] == 0.0


# ---------------------------------------------------------------------------------------------
# Clipped value loss
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    eps=st.sampled_from([0.1, 0.5]),
    p_mask=st.sampled_from([0.0, 0.3]),
)
def test_clipped_value_loss_and_gradient_match_reference(seed, shape, eps, p_mask):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=shape)
    old_v = v + rng.normal(size=shape) * 0.4
    ret = v + rng.normal(size=shape)
    mask = (rng.random(shape) >= p_mask).astype(np.float64)
    want_loss, want_grad = clipped_value_np(v, old_v, ret, eps, mask)
    got = value_jit(*f32(v, old_v, ret), eps, mask_t=f32(mask))
    np.testing.assert_allclose(np.asarray(got), want_loss, **TOL)
    grads = value_grad_jit(*f32(v, old_v, ret), eps, f32(mask))
    np.testing.assert_allclose(np.asarray(grads[0]), want_grad, **TOL)
    assert np.all(np.asarray(grads[1]) == 0.0) and np.all(np.asarray(grads[2]) == 0.0)


def test_clipped_value_loss_hand_checked():
    # ε = 0.5, V_old = 0, R = 2. V = 1: clipped to 0.5, max(1, 2.25)/2 = 1.125 (gradient 0).
    # V = 0.2: inside, (1.8)²/2 = 1.62 (gradient −1.8). V = 3: clipped to 0.5, max(1, 2.25)/2.
    v = np.array([[1.0, 0.2, 3.0]])
    zeros, ret = np.zeros_like(v), np.full_like(v, 2.0)
    ones = np.ones_like(v)
    got = value_jit(*f32(v, zeros, ret), 0.5)
    np.testing.assert_allclose(np.asarray(got)[0], [1.125, 1.62, 1.125], rtol=1e-6)
    g = value_grad_jit(*f32(v, zeros, ret), 0.5, f32(ones))[0]
    np.testing.assert_allclose(np.asarray(g)[0], [0.0, -1.8, 0.0], rtol=1e-6, atol=1e-7)
    # ε = ∞ (no clipping) is the plain ½(V − R)².
    plain = value_jit(*f32(v, zeros, ret), np.inf)
    np.testing.assert_allclose(np.asarray(plain), 0.5 * (v - ret) ** 2, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Advantage normalisation
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.sampled_from(SHAPES),
    p_mask=st.sampled_from([0.0, 0.4, 1.0]),
)
def test_normalize_advantages_matches_reference(seed, shape, p_mask):
    rng = np.random.default_rng(seed)
    adv = rng.normal(size=shape) * 3.0 + 1.0
    mask = (rng.random(shape) >= p_mask).astype(np.float64)
    got = np.asarray(normalize_jit(f32(adv), mask_t=f32(mask)))
    np.testing.assert_allclose(got, normalize_np(adv, mask), rtol=1e-4, atol=1e-5)
    valid = got[mask > 0]
    if valid.size > 1 and np.std(adv[mask > 0]) > 1e-3:
        np.testing.assert_allclose([valid.mean(), valid.std()], [0.0, 1.0], atol=1e-4)
    assert np.all(got[mask == 0] == 0.0)


def test_normalize_advantages_eps_and_gradient():
    # All equal: std 0, so the output is 0 / eps = 0, not NaN.
    got = normalize_jit(jnp.full((3, 2), 4.0))
    np.testing.assert_array_equal(np.asarray(got), np.zeros((3, 2)))
    adv = f32(np.random.default_rng(1).normal(size=(3, 2)))
    g = jax.jit(jax.grad(lambda a: jnp.sum(losses.normalize_advantages(a) * a)))(adv)
    # The output is a constant: the gradient of Σ c·a is c.
    np.testing.assert_allclose(g, normalize_jit(adv), rtol=1e-6)


def _sharded_normalize(axis_name):
    mesh = Mesh(np.array(jax.devices()[:2]), ("d",))

    def fn(adv, mask):
        return losses.normalize_advantages(adv, mask_t=mask, axis_name=axis_name)

    spec = P(None, "d")
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=(spec, spec), out_specs=spec))


def test_normalize_advantages_across_devices_uses_global_statistics():
    assert len(jax.devices()) >= 2  # tests/conftest.py asks for fake host devices
    rng = np.random.default_rng(2)
    T, B = 5, 6
    adv = rng.normal(size=(T, B)) + np.linspace(-3.0, 3.0, B)  # shards with different means
    mask = (rng.random((T, B)) > 0.25).astype(np.float64)
    got = np.asarray(_sharded_normalize("d")(*f32(adv, mask)))
    np.testing.assert_allclose(got, normalize_np(adv, mask), rtol=1e-4, atol=1e-5)
    # Without the axis name each device normalises its own half of the batch.
    local = np.asarray(_sharded_normalize(None)(*f32(adv, mask)))
    half = B // 2
    for cols in (slice(0, half), slice(half, B)):
        want = normalize_np(adv[:, cols], mask[:, cols])
        np.testing.assert_allclose(local[:, cols], want, rtol=1e-4, atol=1e-5)
    assert np.max(np.abs(local - got)) > 0.1


# ---------------------------------------------------------------------------------------------
# vmap, sharding without collectives, bad inputs
# ---------------------------------------------------------------------------------------------

CALLS = {
    "ppo_clip_loss": lambda a, b, c, m: losses.ppo_clip_loss(a, b, c, 0.2, mask_t=m),
    "clipped_value_loss": lambda a, b, c, m: losses.clipped_value_loss(a, b, c, 0.3, mask_t=m),
    "normalize_advantages": lambda a, b, c, m: losses.normalize_advantages(a, mask_t=m),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_vmap_matches_per_slice(name):
    fn = CALLS[name]
    rng = np.random.default_rng(3)
    N, (T, B) = 3, (4, 3)
    slices = [make_ppo_inputs(rng, T, B, p_mask=0.3) for _ in range(N)]
    stacked = [np.stack(x) for x in zip(*slices, strict=True)]
    got = jax.tree.leaves(jax.jit(jax.vmap(fn))(*f32(*stacked)))
    one_jit = jax.jit(fn)
    for i in range(N):
        one = jax.tree.leaves(one_jit(*f32(*slices[i])))
        for g, o in zip(got, one, strict=True):
            np.testing.assert_allclose(np.asarray(g)[i], np.asarray(o), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["ppo_clip_loss", "clipped_value_loss"])
def test_per_step_losses_under_shard_map_match_unsharded(name):
    fn = CALLS[name]
    args = f32(*make_ppo_inputs(np.random.default_rng(4), 3, 4, p_mask=0.2))
    mesh = Mesh(np.array(jax.devices()[:2]), ("d",))
    spec = P(None, "d")
    sharded = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=(spec,) * 4, out_specs=spec))
    for s, u in zip(jax.tree.leaves(sharded(*args)), jax.tree.leaves(fn(*args)), strict=True):
        np.testing.assert_allclose(np.asarray(s), np.asarray(u), rtol=1e-6, atol=1e-7)


def valid_kwargs(name):
    logp, old_logp, adv, mask = f32(*make_ppo_inputs(np.random.default_rng(5), 4, 2))
    if name == "ppo_clip_loss":
        return dict(logp_t=logp, old_logp_t=old_logp, adv_t=adv, epsilon=0.2, mask_t=mask)
    if name == "clipped_value_loss":
        return dict(v_t=logp, old_v_t=old_logp, return_t=adv, epsilon=0.2, mask_t=mask)
    return dict(adv_t=adv, mask_t=mask)


RANK_OR_DTYPE = [lambda x: x[..., None], lambda x: x[None], lambda x: x.astype(jnp.int32)]
LENGTH = [lambda x: x[:3], lambda x: x[:, :1]]
# (function, argument, corruption): [T, B, 1] for [T, B] never broadcasts; the first array
# argument sets (T, B), so only its rank and dtype are checked against itself.
SHAPE_CASES = [
    (name, arg, i)
    for name in sorted(CALLS)
    for position, arg in enumerate(k for k, v in valid_kwargs(name).items() if np.ndim(v))
    for i in range(5)
    if (position > 0 or i < 3) and not (arg == "mask_t" and i == 2)
]


@pytest.mark.parametrize(("name", "arg", "corrupt"), SHAPE_CASES)
def test_bad_shapes_raise_one_line_error_naming_the_argument(name, arg, corrupt):
    kwargs = valid_kwargs(name)
    kwargs[arg] = (RANK_OR_DTYPE + LENGTH)[corrupt](kwargs[arg])
    with pytest.raises(ValueError, match=rf"^{arg} ") as info:
        getattr(losses, name)(**kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "arg", "bad"),
    [
        ("ppo_clip_loss", "epsilon", -0.1),
        ("ppo_clip_loss", "epsilon", np.full((4, 2), 0.2, np.float32)),
        ("clipped_value_loss", "epsilon", float("nan")),
        ("clipped_value_loss", "epsilon", np.float32(-1.0)),
        ("normalize_advantages", "eps", -1e-8),
        ("normalize_advantages", "eps", np.ones(2)),
    ],
)
def test_bad_hyperparameters_raise_one_line_error(name, arg, bad):
    with pytest.raises(ValueError, match=rf"^{arg} must ") as info:
        getattr(losses, name)(**{**valid_kwargs(name), arg: bad})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["ppo_clip_loss", "clipped_value_loss"])
def test_traced_epsilon_is_checked_only_under_checked(name):
    kwargs = valid_kwargs(name)
    fn = getattr(losses, name)
    # Under jit a negative ε is a tracer: no eager check, the call runs.
    jax.jit(lambda e: fn(**{**kwargs, "epsilon": e}))(jnp.asarray(-0.1))
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        losses.checked(fn)(**{**kwargs, "epsilon": jnp.asarray(-0.1)})
    got = losses.checked(fn)(**{**kwargs, "epsilon": jnp.asarray(0.2)})
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6), got, fn(**kwargs))


@pytest.mark.parametrize("name", sorted(CALLS))
def test_unwrapped_losses_emit_no_checks(name):
    kwargs = valid_kwargs(name)
    assert "check" not in str(jax.make_jaxpr(lambda: getattr(losses, name)(**kwargs))())
