"""Value checks of `agents.losses`: eager range checks on concrete hyperparameters, and the
`checked` debug mode (checkify) for actions, probabilities and traced values."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from loss_refs import rand_discounts, rand_probs

from agents import losses

T, B, A, K = 4, 2, 3, 5


def valid_inputs(seed=0):
    """Valid keyword arguments for every loss, keyed by loss name (float32 / int32)."""
    rng = np.random.default_rng(seed)
    f32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    q = f32(rng.normal(size=(T, B, A)))
    pi, mu = f32(rand_probs(rng, (T, B, A))), f32(rand_probs(rng, (T, B, A)))
    a = jnp.asarray(rng.integers(0, A, size=(T, B)), jnp.int32)
    r, d = f32(rng.normal(size=(T, B))), f32(rand_discounts(rng, (T, B)))
    v, boot = f32(rng.normal(size=(T, B))), f32(rng.normal(size=(B,)))
    logits = f32(rng.normal(size=(T, B, A)))
    q_probs, boot_probs = f32(rand_probs(rng, (T, B, A, K))), f32(rand_probs(rng, (B, K)))
    atoms = f32(np.linspace(-2.0, 2.0, K))
    mu_a = jnp.take_along_axis(mu, a[..., None], axis=-1)[..., 0]
    trace = dict(pi_t=pi, mu_t=mu, a_t=a, r_t=r, discount_t=d)
    returns = dict(r_t=r, discount_t=d, v_t=v, bootstrap_value=boot)
    acer = dict(logits_t=logits, q_t=q, mu_t=mu, a_t=a, q_ret_t=r)
    return {
        "retrace_targets": dict(q_t=q, **trace, bootstrap_value=boot, lambda_=0.9, c_max=1.0),
        "trace_coefficients": dict(
            pi_a_t=mu_a, mu_a_t=mu_a, lambda_=0.9, c_max=1.0, mask_t=jnp.ones((T, B))
        ),
        "acer_value_loss": dict(q_t=q, a_t=a, q_ret_t=r),
        "acer_policy_loss": dict(**acer, c=10.0),
        "beta_loo_policy_loss": dict(logits_t=logits, q_t=q, a_t=a, mu_a_t=mu_a, return_t=r, c=1.0),
        "trust_region_projection": dict(g=q, k=logits, delta=1.0),
        "trust_region_policy_loss": dict(
            policy_loss_fn=lambda lg: losses.acer_policy_loss(lg, q, mu, a, r),
            logits_t=logits,
            avg_logits_t=logits + 0.1,
            delta=1.0,
        ),
        "categorical_projection": dict(
            z_p=r[..., None] + atoms[None, None, :], probs=q_probs[:, :, 0], z_q=atoms
        ),
        "distributional_retrace_targets": dict(
            q_probs_t=q_probs, **trace, bootstrap_probs=boot_probs, atoms=atoms, lambda_=0.9
        ),
        "categorical_cross_entropy": dict(
            target_probs_t=q_probs[:, :, 0], logits_t=q_probs[:, :, 1]
        ),
        "vtrace": dict(
            **returns,
            rho_t=f32(rng.uniform(0.2, 2.0, (T, B))),
            lambda_=1.0,
            clip_rho=1.0,
            clip_c=1.0,
            clip_pg_rho=1.0,
        ),
        "lambda_returns": dict(**returns, lambda_=0.9),
        "n_step_returns": dict(**returns, n=3),
        "gae": dict(**returns, lambda_=0.95),
        "icm_inverse_loss": dict(logits_t=logits, a_t=a, mask_t=f32(rng.random((T, B)) > 0.2)),
    }


def call(name, **overrides):
    kwargs = {**valid_inputs()[name], **overrides}
    return getattr(losses, name)(**kwargs)


def bad_discount(value):
    d = np.full((T, B), 0.9, np.float32)
    d[2, 1] = value
    return d


# (loss, argument, a bad Python or NumPy value)
BAD_VALUES = [
    ("retrace_targets", "lambda_", 1.5),
    ("retrace_targets", "lambda_", -0.1),
    ("retrace_targets", "lambda_", float("nan")),
    ("retrace_targets", "c_max", -1.0),
    ("retrace_targets", "discount_t", bad_discount(1.2)),
    ("retrace_targets", "discount_t", bad_discount(-0.5)),
    ("trace_coefficients", "lambda_", np.float32(2.0)),
    ("trace_coefficients", "c_max", -0.5),
    ("acer_policy_loss", "c", -1.0),
    ("beta_loo_policy_loss", "c", -1.0),
    ("trust_region_projection", "delta", -1.0),
    ("trust_region_policy_loss", "delta", -0.5),
    ("categorical_projection", "z_q", np.array([-1.0, 0.0, 0.0, 1.0, 2.0], np.float32)),
    ("categorical_projection", "z_q", np.array([2.0, 1.0, 0.0, -1.0, -2.0], np.float32)),
    ("categorical_projection", "z_q", np.array([-np.inf, 0.0, 1.0, 2.0, 3.0], np.float32)),
    ("distributional_retrace_targets", "atoms", np.linspace(2.0, -2.0, K, dtype=np.float32)),
    ("distributional_retrace_targets", "lambda_", 1.5),
    ("distributional_retrace_targets", "discount_t", bad_discount(1.01)),
    ("vtrace", "lambda_", 1.5),
    ("vtrace", "clip_rho", -1.0),
    ("vtrace", "clip_c", -1.0),
    ("vtrace", "clip_pg_rho", -1.0),
    ("vtrace", "discount_t", bad_discount(2.0)),
    ("lambda_returns", "lambda_", 1.1),
    ("lambda_returns", "lambda_", bad_discount(-0.2)),  # one λ per step
    ("lambda_returns", "discount_t", bad_discount(-0.2)),
    ("n_step_returns", "discount_t", bad_discount(np.nan)),
    ("gae", "lambda_", -0.5),
    ("gae", "discount_t", bad_discount(1.5)),
]
IDS = [f"{n}-{arg}-{i}" for i, (n, arg, _) in enumerate(BAD_VALUES)]


@pytest.mark.parametrize(("name", "arg", "bad"), BAD_VALUES, ids=IDS)
def test_bad_concrete_value_raises_one_line_error_naming_the_argument(name, arg, bad):
    with pytest.raises(ValueError, match=rf"^{arg} must ") as info:
        call(name, **{arg: bad})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("name", "arg", "bad"), BAD_VALUES, ids=IDS)
def test_traced_values_are_not_checked_but_checked_catches_them(name, arg, bad):
    kwargs = valid_inputs()[name]
    fn = getattr(losses, name)

    def with_value(value):
        return fn(**{**kwargs, arg: value})

    # Under jit the value is a tracer: no eager check, the call compiles and runs.
    want_shapes = jax.tree.map(jnp.shape, with_value(kwargs[arg]))
    out = jax.jit(with_value)(jnp.asarray(bad))
    assert jax.tree.map(jnp.shape, out) == want_shapes
    # Valid traced values give exactly what the eager call gives.
    jax.tree.map(
        lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6),
        jax.jit(with_value)(jnp.asarray(kwargs[arg])),
        with_value(kwargs[arg]),
    )
    # A jax Array is not checked eagerly either; the debug mode checks it at run time.
    with pytest.raises(ValueError, match=rf"{arg} must "):
        losses.checked(fn)(**{**kwargs, arg: jnp.asarray(bad)})


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("retrace_targets", dict(lambda_=0.0, c_max=0.0)),
        ("retrace_targets", dict(lambda_=1, discount_t=np.zeros((T, B), np.float32))),
        ("retrace_targets", dict(discount_t=np.ones((T, B), np.float32))),
        ("acer_policy_loss", dict(c=0.0)),
        ("trust_region_projection", dict(delta=0.0)),
        ("lambda_returns", dict(lambda_=np.ones((T, B), np.float32))),
        ("categorical_projection", dict(z_q=np.array([-1.0, 0.5, 3.0], np.float32))),
    ],
)
def test_boundary_values_pass(name, overrides):
    for leaf in jax.tree.leaves(call(name, **overrides)):
        assert np.all(np.isfinite(leaf))


# ---------------------------------------------------------------------------------------------
# The debug mode: actions and probabilities
# ---------------------------------------------------------------------------------------------

WITH_ACTIONS = [
    "retrace_targets",
    "acer_value_loss",
    "acer_policy_loss",
    "beta_loo_policy_loss",
    "distributional_retrace_targets",
    "icm_inverse_loss",
]


@pytest.mark.parametrize("name", WITH_ACTIONS)
@pytest.mark.parametrize("bad_action", [-1, A])
def test_checked_raises_on_out_of_range_actions(name, bad_action):
    kwargs = valid_inputs()[name]
    a = kwargs["a_t"].at[1, 0].set(bad_action)
    fn = losses.checked(getattr(losses, name))
    with pytest.raises(ValueError, match=rf"a_t must lie in \[0, {A}\)"):
        fn(**{**kwargs, "a_t": a})
    # Without the wrapper nothing is checked: the call returns (a wrong or NaN value).
    getattr(losses, name)(**{**kwargs, "a_t": a})


ALL_LOSSES = sorted(valid_inputs())


@pytest.mark.parametrize("name", ALL_LOSSES)
def test_checked_passes_valid_inputs_through_unchanged(name):
    kwargs = valid_inputs()[name]
    fn = getattr(losses, name)
    got = losses.checked(fn)(**kwargs)
    want = jax.jit(lambda kw: fn(**{**kwargs, **kw}))(
        {k: v for k, v in kwargs.items() if isinstance(v, jax.Array)}
    )
    assert jax.tree.structure(got) == jax.tree.structure(want)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6), got, want)


@pytest.mark.parametrize("name", ALL_LOSSES)
def test_unwrapped_losses_emit_no_checks(name):
    kwargs = valid_inputs()[name]
    jaxpr = jax.make_jaxpr(lambda: getattr(losses, name)(**kwargs))()
    assert "check" not in str(jaxpr)


def _corrupt(x, index, value):
    return x.at[index].set(value)


@pytest.mark.parametrize(
    ("name", "arg", "corrupt", "match"),
    [
        (
            "retrace_targets",
            "mu_t",
            lambda x: _corrupt(x, (0, 0, 0), np.nan),
            "mu_t must be finite",
        ),
        ("retrace_targets", "pi_t", lambda x: x * 1.1, "pi_t must sum to 1"),
        (
            "retrace_targets",
            "pi_t",
            lambda x: _corrupt(x, (1, 1), [1.5, -0.5, 0.0]),
            "pi_t must lie",
        ),
        ("acer_policy_loss", "mu_t", lambda x: x * 0.5, "mu_t must sum to 1"),
        ("beta_loo_policy_loss", "mu_a_t", lambda x: _corrupt(x, (0, 0), np.inf), "mu_a_t must"),
        ("trace_coefficients", "mu_a_t", lambda x: _corrupt(x, (2, 1), -0.1), "mu_a_t must lie"),
        ("distributional_retrace_targets", "q_probs_t", lambda x: x * 0.5, "q_probs_t must sum"),
        ("distributional_retrace_targets", "bootstrap_probs", lambda x: -x, "bootstrap_probs"),
        ("categorical_projection", "probs", lambda x: _corrupt(x, (0, 0, 1), np.nan), "probs must"),
        ("categorical_cross_entropy", "target_probs_t", lambda x: x / 0.0, "target_probs_t must"),
        ("vtrace", "rho_t", lambda x: -x, "rho_t must be finite and >= 0"),
    ],
)
def test_checked_raises_on_bad_probabilities(name, arg, corrupt, match):
    kwargs = valid_inputs()[name]
    with pytest.raises(ValueError, match=match):
        losses.checked(getattr(losses, name))(**{**kwargs, arg: corrupt(kwargs[arg])})


def test_checked_wraps_a_function_of_several_losses_and_composes_with_checkify():
    kwargs = valid_inputs()["retrace_targets"]

    def critic_loss(q_t, a_t):
        q_ret = losses.retrace_targets(**{**kwargs, "q_t": q_t, "a_t": a_t})
        return jnp.mean(losses.acer_value_loss(q_t, a_t, q_ret))

    q, a = kwargs["q_t"], kwargs["a_t"]
    safe = losses.checked(jax.value_and_grad(critic_loss))
    value, grad = safe(q, a)
    np.testing.assert_allclose(value, critic_loss(q, a), rtol=1e-6)
    assert grad.shape == q.shape
    with pytest.raises(ValueError, match="a_t must lie"):
        safe(q, a.at[0, 0].set(A))
    # Inside a function that the caller checkifies (here, jitted), the error is passed on.
    err, _ = checkify.checkify(jax.jit(lambda a: losses.checked(critic_loss)(q, a)))(a - 1)
    assert "a_t must lie" in str(err.get())
