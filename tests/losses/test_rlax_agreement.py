"""Our losses agree with rlax 0.1.9: Retrace (`general_off_policy_returns_from_action_values`),
V-trace, λ-returns and the categorical L2 projection; and PPO's clipped surrogate
(`clipped_surrogate_pg_loss`), the Huber loss, the value rescaling (`signed_hyperbolic`,
`signed_parabolic`), one-step (double) Q-learning, R2D2's rescaled n-step double Q-learning
(`transformed_n_step_q_learning`), one-step (double) categorical Q-learning, the DPG loss and
PQN's Q(λ) targets (`q_lambda`).

For the first four, the inputs, the rlax side and the comparison come from
`benchmarks.bench_losses` (`make_inputs`, `make_rlax_fns`, `rlax_pairs`, `check_agreement`),
so the benchmark times exactly the pairs tested here. The others are compared here directly,
rlax's single-transition functions vmapped over time and batch. Shapes and seeds are random;
traces come with and without episode ends (steps with discount 0) inside them. rlax has no
mask: these comparisons run without one (masks are tested against the NumPy references).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax
from loss_refs import f32

from agents import losses
from benchmarks import bench_losses as bench

RLAX_FNS = bench.make_rlax_fns(rlax)  # jitted once for the whole module
COMPARED = {"retrace_targets", "vtrace", "lambda_returns", "categorical_projection"}


def random_size(seed):
    """(T, B, A, K) drawn from the seed; at least 6 steps in all so that episode ends occur."""
    rng = np.random.default_rng([seed, 7])
    return (
        int(rng.integers(3, 13)),
        int(rng.integers(2, 6)),
        int(rng.integers(2, 8)),
        int(rng.integers(2, 22)),
    )


def check_pairs(T, B, A, K, seed, p_terminal):
    args = bench.Args(batch_sizes=(B,), trace_len=T, num_actions=A, num_atoms=K, seed=seed)
    x = bench.make_inputs(args, B, with_dist=False, p_terminal=p_terminal)
    if p_terminal == 0.0:
        assert np.all(np.asarray(x.d) > 0)
    else:
        assert np.any(np.asarray(x.d) == 0)
    pairs = bench.rlax_pairs(x, RLAX_FNS)
    assert {ours.name for ours, _ in pairs} == COMPARED
    for ours, ref in pairs:
        # Raises unless every output agrees within bench.RTOL / bench.ATOL.
        diff = bench.check_agreement(ours.name, ours.fn(*ours.args), ref.fn(*ref.args))
        assert diff < 1e-4, (ours.name, diff)


def test_compared_quantities_match_the_benchmark():
    assert set(bench.RLAX_COMPARED) == set(RLAX_FNS) == COMPARED


@pytest.mark.parametrize("p_terminal", [0.0, 0.4], ids=["no-episode-ends", "episode-ends"])
@pytest.mark.parametrize("seed", range(6))
def test_ours_agree_with_rlax_on_random_shapes(seed, p_terminal):
    check_pairs(*random_size(seed), seed, p_terminal)


@pytest.mark.parametrize(("T", "B", "A", "K"), [(1, 1, 2, 2), (1, 3, 5, 11), (20, 1, 18, 51)])
def test_ours_agree_with_rlax_on_edge_shapes(T, B, A, K):
    check_pairs(T, B, A, K, seed=T + B, p_terminal=0.0)


# ---------------------------------------------------------------------------------------------
# The PPO, DQN-family and DPG losses: rlax's single-transition functions, vmapped over time
# and batch, against ours on the same random inputs (the benchmark does not time these). Each
# pair is one module-level jitted function, so a shape compiles once for both parametrisations.
# ---------------------------------------------------------------------------------------------

SEEDS = range(2)
P_TERMINAL = pytest.mark.parametrize("p_terminal", [0.0, 0.4], ids=["no-ends", "episode-ends"])


def _vmap_tb(fn):
    """`fn` over the leading [T, B] axes of every argument."""
    return jax.vmap(jax.vmap(fn))


def family_inputs(seed, p_terminal):
    rng = np.random.default_rng([seed, 11])
    T, B, A, K = (int(rng.integers(lo, hi)) for lo, hi in ((3, 10), (2, 5), (2, 6), (3, 15)))
    r = rng.normal(size=(T, B))
    d = 0.9 * (rng.random((T, B)) >= p_terminal)
    d[0, 0] = 0.0 if p_terminal else d[0, 0]  # at least one episode end when asked for
    q = rng.normal(size=(T + 1, B, A)) * 3.0  # the online net at x_0..x_T
    q_target = q + rng.normal(size=(T + 1, B, A))  # the target net
    a = rng.integers(0, A, size=(T, B)).astype(np.int32)
    logits = rng.normal(size=(T + 1, B, A, K))
    return T, K, *f32(r, d, q, q_target), a, f32(logits)


@jax.jit
def _ppo_pair(logp, old_logp, adv, eps):
    ours = jnp.mean(losses.ppo_clip_loss(logp, old_logp, adv, eps).loss)
    ratio = jnp.exp(logp - old_logp).reshape(-1)
    return ours, rlax.clipped_surrogate_pg_loss(ratio, adv.reshape(-1), eps)


@P_TERMINAL
@pytest.mark.parametrize("seed", SEEDS)
def test_ppo_clip_loss_agrees_with_rlax_clipped_surrogate(seed, p_terminal):
    rng = np.random.default_rng([seed, 12])
    T, B = int(rng.integers(1, 9)), int(rng.integers(1, 6))
    old_logp = rng.normal(size=(T, B))
    logp = old_logp + rng.normal(size=(T, B)) * 0.3  # ratios on both sides of 1 ± ε
    adv = rng.normal(size=(T, B))
    for eps in (0.1, 0.2):
        ours, theirs = _ppo_pair(*f32(logp, old_logp, adv), eps)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@functools.partial(jax.jit, static_argnames="eps")
def _scalar_pairs(x, eps):
    """(ours, rlax's) Huber loss with δ = 10ε, value rescaling h and its inverse h⁻¹."""
    return (
        (losses.huber_loss(x, 10 * eps), rlax.huber_loss(x, 10 * eps)),
        (losses.value_rescale(x, eps), rlax.signed_hyperbolic(x, eps)),
        (losses.inverse_value_rescale(x, eps), rlax.signed_parabolic(x, eps)),
    )


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 0.1])
def test_huber_and_value_rescaling_agree_with_rlax(eps):
    x = f32(np.concatenate([np.linspace(-30.0, 30.0, 121), [1e5, -1e5, 1e-6, -1e-6, 0.0]]))
    huber, h, h_inv = _scalar_pairs(x, eps)
    np.testing.assert_allclose(*huber, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(*h, rtol=1e-5, atol=1e-6)
    # rlax's closed form cancels in float32 (√(1 + 4ε(…))/(2ε) − 1/(2ε)): up to ~1e-4
    # relative for |x| ≲ 100. Ours has no cancellation (tests/losses/test_value.py checks it
    # against float64 to 2e-6).
    np.testing.assert_allclose(*h_inv, rtol=2e-4, atol=2e-4)


@functools.partial(jax.jit, static_argnames="n")
def _q_pairs(r, d, q, q_target, a, n):
    """TD errors, ours and rlax's: one-step Q-learning, one-step double Q-learning, and R2D2's
    n-step double Q-learning with the signed hyperbolic rescaling."""
    T = r.shape[0]
    q_a = jnp.take_along_axis(q[:T], a[..., None], axis=-1)[..., 0]
    # rlax's (q_tm1, a_tm1, r_t, discount_t, q_t[, q_t_selector]) are our
    # (Q(x_t), a_t, r_t, γ_t, Q(x_{t+1})).
    plain = losses.q_learning_targets(r, d, q_target[:T], q_target[T], 1) - q_a
    plain_rlax = _vmap_tb(rlax.q_learning)(q[:T], a, r, d, q_target[1:])
    double = losses.double_q_learning_targets(r, d, q_target[:T], q_target[T], q[:T], q[T], 1)
    double_rlax = _vmap_tb(rlax.double_q_learning)(q[:T], a, r, d, q_target[1:], q[1:])
    # rlax's n-step bootstraps from target_q_t at x_1..x_T at the actions a_t given (here the
    # online argmax), cut at the trace end like ours; it has no mask.
    rescaled = losses.double_q_learning_targets(
        r, d, q_target[:T], q_target[T], q[:T], q[T], n, rescale_eps=1e-3
    )
    fn = functools.partial(
        rlax.transformed_n_step_q_learning, n=n, tx_pair=rlax.SIGNED_HYPERBOLIC_PAIR
    )
    a_next = jnp.argmax(q[1:], axis=-1)
    rescaled_rlax = jax.vmap(fn, in_axes=1, out_axes=1)(q[:T], a, q_target[1:], a_next, r, d)
    return (plain, plain_rlax), (double - q_a, double_rlax), (rescaled - q_a, rescaled_rlax)


@P_TERMINAL
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", [1, 4])
def test_q_learning_targets_agree_with_rlax(seed, p_terminal, n):
    _, _, r, d, q, q_target, a, _ = family_inputs(seed, p_terminal)
    plain, double, rescaled = _q_pairs(r, d, q, q_target, a, n=n)
    np.testing.assert_allclose(*plain, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(*double, rtol=1e-5, atol=1e-5)
    # Looser: rlax's h⁻¹ loses ~1e-4 in float32 (see the rescaling test above).
    np.testing.assert_allclose(*rescaled, rtol=1e-4, atol=2e-4)


@jax.jit
def _categorical_pairs(r, d, q, a, logits, atoms):
    """Losses, ours and rlax's, of one-step C51 (the target net's mean selects) and double C51
    (the online Q values select). The online logits at x_t are any logits: here half the
    target ones."""
    T = r.shape[0]
    probs = jax.nn.softmax(logits, axis=-1)
    online = logits[:T] * 0.5
    plain = losses.categorical_q_learning_targets(r, d, probs[:T], probs[T], atoms, 1)
    double = losses.categorical_double_q_learning_targets(
        r, d, probs[:T], probs[T], q[:T], q[T], atoms, 1
    )

    def c51(logits_tm1, a_tm1, r_t, d_t, logits_t):
        return rlax.categorical_q_learning(atoms, logits_tm1, a_tm1, r_t, d_t, atoms, logits_t)

    def double_c51(logits_tm1, a_tm1, r_t, d_t, logits_t, selector):
        return rlax.categorical_double_q_learning(
            atoms, logits_tm1, a_tm1, r_t, d_t, atoms, logits_t, selector
        )

    return (
        (
            losses.categorical_q_learning_loss(online, a, plain),
            _vmap_tb(c51)(online, a, r, d, logits[1:]),
        ),
        (
            losses.categorical_q_learning_loss(online, a, double),
            _vmap_tb(double_c51)(online, a, r, d, logits[1:], q[1:]),
        ),
    )


@P_TERMINAL
@pytest.mark.parametrize("seed", SEEDS)
def test_one_step_categorical_q_learning_agrees_with_rlax(seed, p_terminal):
    _, K, r, d, q, _, a, logits = family_inputs(seed, p_terminal)
    atoms = f32(np.linspace(-5.0, 5.0, K))
    for ours, theirs in _categorical_pairs(r, d, q, a, logits, atoms):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@jax.jit
def _dpg_pair(a, dqda):
    ours = jax.value_and_grad(lambda a: jnp.sum(losses.dpg_loss(a, dqda)))(a)
    theirs = jax.value_and_grad(lambda a: jnp.sum(_vmap_tb(rlax.dpg_loss)(a, dqda)))(a)
    return ours, theirs


@pytest.mark.parametrize("seed", SEEDS)
def test_dpg_loss_agrees_with_rlax(seed):
    rng = np.random.default_rng([seed, 13])
    T, B, D = (int(rng.integers(1, 6)) for _ in range(3))
    (value, grad), (value_rlax, grad_rlax) = _dpg_pair(
        *f32(rng.normal(size=(T, B, D)), rng.normal(size=(T, B, D)))
    )
    np.testing.assert_allclose(value, value_rlax, rtol=1e-5)
    np.testing.assert_allclose(grad, grad_rlax, rtol=1e-6)


@P_TERMINAL
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("lam", [0.0, 0.65, 1.0])
def test_q_lambda_targets_agree_with_rlax(seed, p_terminal, lam):
    """PQN's targets against rlax's Peng's Q(λ) (`rlax.q_lambda`, TD errors of one sequence:
    the targets are the errors plus Q(x_t, a_t))."""
    _, _, r, d, q, _, a, _ = family_inputs(seed, p_terminal)
    T = r.shape[0]
    ours = losses.q_lambda_targets(r, d, q[:T], q[T], lam)
    td = jax.vmap(rlax.q_lambda, in_axes=(1, 1, 1, 1, 1, None), out_axes=1)(
        q[:T], a, r, d, q[1:], lam
    )
    theirs = td + jnp.take_along_axis(q[:T], a[..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
