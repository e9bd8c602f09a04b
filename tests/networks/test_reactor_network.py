"""Reactor network: shapes, the dueling distributional head, gradient blocking, LSTM resets."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from networks import ReactorNetwork, ReactorOutput, ReactorState

A, K, LSTM = 3, 11, 8
T, B = 8, 3


@functools.cache
def _net(**kwargs) -> ReactorNetwork:
    defaults = dict(num_atoms=K, hidden=(16,), torso_out=16, lstm_size=LSTM)
    return ReactorNetwork((5,), A, **{**defaults, **kwargs})


@functools.cache
def _apply(net):
    """One jitted apply per network, so tests share compilations (the machine is busy)."""
    return jax.jit(net.apply)


@functools.cache
def _setup(net, seed=0):
    """Inputs and initial parameters, built once per network (tests copy before editing)."""
    obs = jnp.asarray(np.random.default_rng(seed).normal(size=(T, B, 5)), jnp.float32)
    first = jnp.zeros((T, B), bool).at[0].set(True)
    state = net.initial_state(B)
    params = jax.jit(net.init)(jax.random.PRNGKey(seed), obs, first, state)
    return params, obs, first, state


def _with(params, module, leaf, fn):
    """A copy of params with params[module][...][leaf] replaced by fn(old)."""
    path = module.split("/")
    new = jax.tree.map(lambda x: x, params)
    node = new["params"]
    for key in path:
        node = node[key]
    node[leaf] = fn(node[leaf])
    return new


def _check_distributions(out, uniform_mix):
    np.testing.assert_allclose(out.q_probs.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out.policy_probs.sum(-1), 1.0, rtol=1e-5)
    assert np.all(out.policy_probs >= uniform_mix / A * (1 - 1e-6))
    assert np.all(out.q_probs >= 0)


def test_shapes_for_atari_frames():
    t, b = 3, 2
    net = ReactorNetwork((4, 84, 84), A, num_atoms=K)
    # numpy draws: eager jax.random compiles a kernel per shape, seconds each on a busy CPU
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.integers(0, 256, (t, b, 4, 84, 84)), jnp.uint8)
    first = jnp.zeros((t, b), bool).at[0].set(True)
    state = net.initial_state(b)
    # orthogonal init of the CNN's 3136x512 layer costs ~10 s of CPU here: take the shapes from
    # eval_shape and the values from a scaled Gaussian instead
    shapes = jax.eval_shape(net.init, jax.random.PRNGKey(1), obs, first, state)
    params = jax.tree.map(
        lambda x: jnp.asarray(
            rng.normal(size=x.shape) / np.sqrt(np.prod(x.shape[:-1]) if x.ndim > 1 else 1e2),
            jnp.float32,
        ),
        shapes,
    )
    out, new_state = jax.jit(net.apply)(params, obs, first, state)
    assert isinstance(out, ReactorOutput)
    assert out.policy_logits.shape == out.policy_probs.shape == (t, b, A)
    assert out.q_logits.shape == out.q_probs.shape == (t, b, A, K)
    assert out.q_values.shape == (t, b, A)
    assert isinstance(new_state, ReactorState)
    leaves = jax.tree.leaves(new_state)
    assert len(leaves) == 4 and all(x.shape == (b, 128) for x in leaves)  # flat, replay-ready
    _check_distributions(out, net.uniform_mix)


def test_shapes_and_distributions_for_vector_obs():
    net = _net()
    params, obs, first, state = _setup(net)
    out, new_state = _apply(net)(params, obs, first, state)
    assert out.policy_logits.shape == out.policy_probs.shape == (T, B, A)
    assert out.q_logits.shape == out.q_probs.shape == (T, B, A, K)
    assert out.q_values.shape == (T, B, A)
    assert all(x.shape == (B, LSTM) for x in jax.tree.leaves(new_state))
    _check_distributions(out, net.uniform_mix)
    atoms = net.atoms
    assert atoms.shape == (K,)
    assert atoms[0] == net.v_min and atoms[-1] == net.v_max
    expected = (np.asarray(out.q_probs) * np.asarray(atoms)).sum(-1)  # NumPy broadcasting
    np.testing.assert_allclose(out.q_values, expected, rtol=1e-5, atol=1e-5)
    wide = ReactorNetwork((5,), A, num_atoms=5, v_min=0.0, v_max=4.0)
    np.testing.assert_allclose(wide.atoms, [0.0, 1.0, 2.0, 3.0, 4.0])


def test_policy_probs_keep_the_uniform_floor_when_softmax_saturates():
    net = _net()
    eps = net.uniform_mix
    params, obs, first, state = _setup(net)
    params = _with(params, "policy_head", "kernel", lambda w: w * 1e4)
    out, _ = _apply(net)(params, obs, first, state)
    _check_distributions(out, eps)
    # saturated: probabilities reach the floor ε / A and the ceiling 1 - ε + ε / A
    np.testing.assert_allclose(out.policy_probs.min(), eps / A, rtol=1e-4)
    np.testing.assert_allclose(out.policy_probs.max(), 1 - eps + eps / A, rtol=1e-4)


def test_rejects_wrong_observation_shapes():
    net = _net()
    params, obs, first, state = _setup(net)
    with pytest.raises(ValueError, match="obs_shape"):
        net.apply(params, jnp.zeros((T, B, 4)), first, state)
    with pytest.raises(ValueError, match="obs_shape"):
        net.apply(params, obs[0], first[0], state)  # missing the time axis
    with pytest.raises(ValueError, match="first"):
        net.apply(params, obs, first[:, :1], state)


def test_dueling_head_removes_the_mean_advantage():
    net = _net()
    params, obs, first, state = _setup(net)
    capture = jax.jit(functools.partial(net.apply, mutable=["intermediates"]))
    (out, _), captured = capture(params, obs, first, state)
    head = captured["intermediates"]["q_head"]
    (value,), (adv,) = head["value_logits"], head["advantage_logits"]
    assert value.shape == (T, B, K) and adv.shape == (T, B, A, K)
    logits = out.q_logits
    np.testing.assert_allclose(logits.mean(-2), value, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        logits - logits.mean(-2, keepdims=True),
        adv - adv.mean(-2, keepdims=True),
        rtol=1e-5,
        atol=1e-5,
    )


def test_shifting_every_advantage_equally_leaves_the_distributions_unchanged():
    net = _net()
    apply = _apply(net)
    params, obs, first, state = _setup(net)
    out, _ = apply(params, obs, first, state)
    # the same per-atom shift c_k for every action, A(x, a, k) + c_k, is removed by the mean
    shift = jnp.tile(jnp.linspace(-3.0, 5.0, K), A)
    out2, _ = apply(
        _with(params, "q_head/advantage", "bias", lambda b: b + shift), obs, first, state
    )
    np.testing.assert_allclose(out2.q_logits, out.q_logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out2.q_probs, out.q_probs, rtol=1e-5, atol=1e-6)
    # a per-action shift c_a is invisible too: it moves all of a's atom logits together
    per_action = jnp.repeat(jnp.arange(A, dtype=jnp.float32), K)
    out3, _ = apply(
        _with(params, "q_head/advantage", "bias", lambda b: b + per_action), obs, first, state
    )
    np.testing.assert_allclose(out3.q_probs, out.q_probs, rtol=1e-5, atol=1e-6)
    # a shift that tilts the atoms differently per action does change Z (the check is sensitive)
    tilt = jnp.outer(jnp.arange(A, dtype=jnp.float32), jnp.linspace(-1.0, 1.0, K)).ravel()
    out4, _ = apply(
        _with(params, "q_head/advantage", "bias", lambda b: b + tilt), obs, first, state
    )
    assert not np.allclose(out4.q_values, out.q_values, atol=1e-3)


@pytest.fixture(scope="module")
def grad_maxima():
    """Max |∂loss/∂θ| per top-level submodule, for a random linear loss on one output field."""
    net = _net()
    params, obs, first, state = _setup(net)
    fields = ("policy_logits", "q_logits")

    @jax.jit
    def all_grads(params):
        out, vjp = jax.vjp(lambda p: net.apply(p, obs, first, state)[0], params)
        grads = {}
        for i, field in enumerate(fields):
            key = jax.random.PRNGKey(i)
            cotangent = {f: jnp.zeros_like(x) for f, x in out._asdict().items()}
            cotangent[field] = jax.random.normal(key, cotangent[field].shape)
            (grads[field],) = vjp(type(out)(**cotangent))
        return jax.tree.map(lambda g: jnp.max(jnp.abs(g)), grads)

    maxima = jax.device_get(all_grads(params))
    return {
        f: {name: max(jax.tree.leaves(sub)) for name, sub in per_module["params"].items()}
        for f, per_module in maxima.items()
    }


def test_policy_gradients_do_not_reach_the_torso(grad_maxima):
    g = grad_maxima["policy_logits"]
    assert g["torso"] == 0.0 and g["linear"] == 0.0
    assert g["q_lstm"] == 0.0 and g["q_head"] == 0.0
    assert g["policy_lstm"] > 0.0 and g["policy_head"] > 0.0


def test_q_gradients_train_the_torso(grad_maxima):
    g = grad_maxima["q_logits"]
    assert g["torso"] > 0.0 and g["linear"] > 0.0
    assert g["q_lstm"] > 0.0 and g["q_head"] > 0.0
    assert g["policy_lstm"] == 0.0 and g["policy_head"] == 0.0


def test_lstm_states_reset_at_episode_start():
    t0 = 4
    net = _net()
    apply = _apply(net)
    params, obs, _, zero = _setup(net)
    # amplify the small-initialised policy head so differences stand far above float noise
    params = _with(params, "policy_head", "kernel", lambda w: w * 100.0)
    first = np.zeros((T, B), bool)
    first[0] = True
    first[t0, 1] = True  # env 1 starts a new episode at t0
    first = jnp.asarray(first)

    # a non-zero incoming state is ignored because first[0] is True everywhere
    ones = jnp.ones((B, LSTM))
    nonzero = ReactorState(policy=(ones, -ones), q=(0.5 * ones, ones))
    out, final = apply(params, obs, first, nonzero)
    fresh, fresh_final = apply(params, obs, first, zero)
    for a, b in zip(out, fresh, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    for a, b in zip(jax.tree.leaves(final), jax.tree.leaves(fresh_final), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)

    # env 1 after its reset matches a fresh unroll from t0 with a zero state, for both LSTMs
    tail_first = jnp.zeros((T - t0, B), bool).at[0].set(True)
    tail, tail_final = apply(params, obs[t0:], tail_first, zero)
    for field in ("policy_logits", "policy_probs", "q_logits", "q_probs"):
        a, b = getattr(out, field)[t0:], getattr(tail, field)
        np.testing.assert_allclose(a[:, 1], b[:, 1], rtol=1e-5, atol=1e-6, err_msg=field)
        # envs 0 and 2 carried their memory across t0: they differ from a fresh start
        assert not np.allclose(a[:, 0], b[:, 0], rtol=1e-4, atol=1e-5), field
        assert not np.allclose(a[:, 2], b[:, 2], rtol=1e-4, atol=1e-5), field
    for a, b in zip(jax.tree.leaves(final), jax.tree.leaves(tail_final), strict=True):
        np.testing.assert_allclose(a[1], b[1], rtol=1e-5, atol=1e-6)

    # without the flag at t0, env 1 keeps its memory and differs too
    kept, _ = apply(params, obs, first.at[t0, 1].set(False), zero)
    for field in ("policy_logits", "q_logits"):
        a, b = getattr(kept, field)[t0:, 1], getattr(out, field)[t0:, 1]
        assert not np.allclose(a, b, rtol=1e-4, atol=1e-5), field


def test_unrolling_in_two_halves_matches_one_unroll():
    net = _net()
    apply = _apply(net)
    params, obs, _, state = _setup(net)
    first = np.zeros((T, B), bool)
    first[0] = True
    first[2, 0] = True
    first[5, 1] = True
    first = jnp.asarray(first)
    whole, whole_state = apply(params, obs, first, state)
    h1, mid = apply(params, obs[:4], first[:4], state)
    h2, end = apply(params, obs[4:], first[4:], mid)
    for a, b1, b2 in zip(whole, h1, h2, strict=True):
        np.testing.assert_allclose(jnp.concatenate([b1, b2]), a, rtol=1e-5, atol=1e-6)
    for a, b in zip(jax.tree.leaves(whole_state), jax.tree.leaves(end), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
