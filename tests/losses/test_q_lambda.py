"""`agents.losses.q_lambda_targets` (PQN's Q(λ), Gallici et al. 2024, arXiv:2407.04811,
Algorithm 1) against a NumPy reference written from the forward view of the λ-return (Sutton
& Barto §12.1): a λ-weighted mixture of n-step returns that bootstrap from max_a Q, cut at the
episode's end. The library computes the backward recursion; the two agree only if both are
right."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from loss_refs import q_lambda_np, rand_discounts

from agents import losses

TOL = {"rtol": 1e-5, "atol": 1e-4}


def inputs(seed, T, B, A, p_term=0.2, p_mask=0.15):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(T, B))
    d = rand_discounts(rng, (T, B), p_term)
    mask = (rng.random((T, B)) >= p_mask).astype(np.float64)
    q = rng.normal(size=(T, B, A)) * 2.0
    boot = rng.normal(size=(B, A)) * 2.0
    return r, d, mask, q, boot


targets = jax.jit(losses.q_lambda_targets)


def run(r, d, mask, q, boot, lam):
    f = lambda x: np.asarray(x, np.float32)  # noqa: E731
    out = targets(f(r), f(d), f(q), f(boot), f(lam), mask_t=f(mask))
    return np.asarray(out)


@pytest.mark.parametrize(
    "seed,shape,lam",
    [(0, (7, 3, 4), 0.0), (1, (5, 6, 2), 0.65), (2, (9, 2, 5), 1.0), (3, (1, 4, 3), 0.95),
     (4, (12, 5, 3), "per-step")],
)  # fmt: skip
def test_targets_match_the_forward_view(seed, shape, lam):
    r, d, mask, q, boot = inputs(seed, *shape)
    if lam == "per-step":
        lam = np.random.default_rng(seed + 100).random(shape[:2])
    np.testing.assert_allclose(
        run(r, d, mask, q, boot, lam), q_lambda_np(r, d, mask, q, boot, lam), **TOL
    )


def test_hand_checked():
    # One env, T = 3, γ = 0.5, λ = 0.5; V(x_1) = 2, V(x_2) = 4, V(x_3) = 8 (the bootstrap).
    r = np.array([[1.0], [1.0], [1.0]])
    d = np.full((3, 1), 0.5)
    q = np.array([[[0.0, 1.0]], [[2.0, -1.0]], [[4.0, 3.0]]])
    boot = np.array([[8.0, 0.0]])
    # G_2 = 1 + 0.5·8 = 5; G_1 = 1 + 0.5(0.5·4 + 0.5·5) = 3.25; G_0 = 1 + 0.5(0.5·2 + 0.5·3.25)
    expected = np.array([[2.3125], [3.25], [5.0]])
    np.testing.assert_allclose(run(r, d, np.ones((3, 1)), q, boot, 0.5), expected, rtol=1e-6)


@pytest.mark.parametrize("kind", ["termination", "truncation"])
def test_an_episode_end_splits_the_trace(kind):
    """A trace crossing an episode end gives the two pieces' targets computed apart: the
    piece before the fake reset step bootstraps from the final observation's values (zero
    after a termination), the piece after it from the trace's own bootstrap."""
    r, d, _, q, boot = inputs(5, 8, 3, 4, p_term=0.0, p_mask=0.0)
    mask = np.ones_like(r)
    mask[4] = 0.0  # step 4 is the fake auto-reset transition: x_4 is the final observation
    d[3] = 0.0 if kind == "termination" else d[3]
    whole = run(r, d, mask, q, boot, 0.8)
    first = run(r[:4], d[:4], mask[:4], q[:4], q[4], 0.8)  # bootstrap: the final observation
    second = run(r[5:], d[5:], mask[5:], q[5:], boot, 0.8)
    np.testing.assert_allclose(whole[:4], first, **TOL)
    np.testing.assert_allclose(whole[5:], second, **TOL)
    np.testing.assert_allclose(whole[4], q[4].max(-1), **TOL)
    if kind == "termination":
        np.testing.assert_allclose(whole[3], r[3], **TOL)


def test_lambda_zero_is_one_step_q_learning():
    r, d, mask, q, boot = inputs(6, 6, 4, 3)
    f = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    one_step = losses.q_learning_targets(f(r), f(d), f(q), f(boot), 1, mask_t=f(mask))
    live = mask > 0  # (q_learning_targets leaves a meaningless value at masked steps)
    np.testing.assert_allclose(
        run(r, d, mask, q, boot, 0.0)[live], np.asarray(one_step)[live], **TOL
    )


def test_no_gradient_reaches_the_values():
    r, d, mask, q, boot = (jnp.asarray(x, jnp.float32) for x in inputs(7, 5, 2, 3))
    grads = jax.grad(
        lambda q, boot: losses.q_lambda_targets(r, d, q, boot, 0.7, mask_t=mask).sum(),
        argnums=(0, 1),
    )(q, boot)
    assert all(not np.any(np.asarray(g)) for g in grads)


def test_vmap_over_a_population_matches_each_member():
    r, d, mask, q, boot = (np.stack([x, x * 0.5]) for x in inputs(8, 4, 3, 2))
    f = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    out = jax.vmap(lambda *a: losses.q_lambda_targets(*a[:4], 0.9, mask_t=a[4]))(
        f(r), f(d), f(q), f(boot), f(mask)
    )
    for i in range(2):
        np.testing.assert_allclose(
            out[i], q_lambda_np(r[i], d[i], mask[i], q[i], boot[i], 0.9), **TOL
        )


@pytest.mark.parametrize(
    "kwargs,name",
    [({"q_t": np.zeros((4, 2))}, "q_t"), ({"bootstrap_q": np.zeros((2,))}, "bootstrap_q"),
     ({"r_t": np.zeros((4, 3))}, "r_t"), ({"lambda_": 1.5}, "lambda_"),
     ({"lambda_": np.zeros((4, 1))}, "lambda_")],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_argument(kwargs, name):
    args = dict(
        r_t=np.zeros((4, 2), np.float32), discount_t=np.full((4, 2), 0.9, np.float32),
        q_t=np.zeros((4, 2, 3), np.float32), bootstrap_q=np.zeros((2, 3), np.float32),
        lambda_=0.5,
    )  # fmt: skip
    args.update({k: np.asarray(v, np.float32) if k != "lambda_" else v for k, v in kwargs.items()})
    with pytest.raises(ValueError, match=name) as err:
        losses.q_lambda_targets(**args)
    assert "\n" not in str(err.value)
