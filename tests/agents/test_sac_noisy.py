"""NoisyNet in SAC (--noisy; networks.noisy.StoredNoiseDense): a layer under a stored draw
is the factorised-noise linear map of arXiv:1706.10295 eqs. 10-11 (checked in NumPy); the
draws are resampled per update and per acting step, per member of the critic ensemble, and
never moved by the optimisers; evaluation acts on the means; the flags are refused where
they do not apply."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.sac.config import SACConfig
from engine.protocol import TrainState
from envs import make_env
from networks.noisy import NOISE, StoredNoiseDense, clear_noise, resample_noise
from networks.sac import QEnsemble
from tests.agent_classes import SACAgent

TINY = dict(num_envs=2, trace_len=2, batch_size=4, buffer_size=64, hidden=(8,),
            start_train_at=0, noisy=True)  # fmt: skip


def test_a_stored_draw_gives_the_factorised_noisy_map():
    layer = StoredNoiseDense(3, 0.5)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 5)), jnp.float32)
    variables = layer.init(jax.random.PRNGKey(0), x)
    assert set(variables[NOISE]) == {"f_in", "f_out"}
    assert all(np.all(np.asarray(v) == 0) for v in jax.tree.leaves(variables[NOISE]))
    drawn = resample_noise(variables, jax.random.PRNGKey(1))
    p = jax.tree.map(np.asarray, drawn["params"])
    f_in, f_out = (np.asarray(drawn[NOISE][k]) for k in ("f_in", "f_out"))
    # f(ε) = sgn(ε)√|ε|: the magnitudes of a draw are square roots of |N(0, 1)| samples.
    assert np.all(np.abs(f_in) > 0) and np.all(np.abs(f_out) > 0)
    kernel = p["mu_kernel"] + p["sigma_kernel"] * np.outer(f_in, f_out)
    want = np.asarray(x) @ kernel + p["mu_bias"] + p["sigma_bias"] * f_out
    np.testing.assert_allclose(np.asarray(layer.apply(drawn, x)), want, rtol=1e-5, atol=1e-6)
    means = np.asarray(x) @ p["mu_kernel"] + p["mu_bias"]
    np.testing.assert_allclose(np.asarray(layer.apply(clear_noise(drawn), x)), means, rtol=1e-5)
    grads = jax.grad(lambda v: jnp.sum(layer.apply(v, x)))(drawn)
    assert all(np.all(np.asarray(g) == 0) for g in jax.tree.leaves(grads[NOISE]))


def test_the_ensemble_draws_for_each_member():
    net = QEnsemble(3, (4,), 2, noisy_std=0.5)
    obs = jnp.ones((2, 5))
    variables = resample_noise(net.init(jax.random.PRNGKey(0), obs), jax.random.PRNGKey(1))
    f_out = np.asarray(variables[NOISE]["members"]["StoredNoiseDense_0"]["f_out"])
    assert f_out.shape == (3, 4)  # stacked over the members, each its own draw
    assert not np.allclose(f_out[0], f_out[1])


@pytest.fixture(scope="module")
def pendulum():
    env = make_env("Pendulum-v1", 2, 0)
    yield env
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("recurrent", [False, True])
def test_updates_draw_anew_and_the_optimisers_leave_the_draws(pendulum, recurrent):
    extra = (
        dict(recurrent=True, batch_size=2, seq_len=4, burn_in=2, lstm_size=8) if recurrent else {}
    )
    agent = SACAgent(SACConfig(**{**TINY, **extra}), pendulum)
    state = agent.init(jax.random.PRNGKey(0))
    learner, replay, actor = state.learner, state.replay, state.actor
    for _ in range(6):
        actor, traj, _ = agent.collect(TrainState(learner, replay, actor))
        learner, replay, _ = jax.jit(agent.absorb)(learner, replay, traj)
    sac = agent.modules.learner
    drawn = sac.fresh_noise(learner)
    new, metrics, _ = jax.jit(lambda s, b: sac.update(s, b)[:3])(
        learner, agent.modules.sample(agent.replay, replay, learner, jax.random.PRNGKey(3), 2)[0]
    )
    assert np.isfinite(float(metrics["value_loss"]))
    for name in ("actor", "critic"):
        before, fresh, after = (s.params[name][NOISE] for s in (learner, drawn, new))
        for b, f, a in zip(*map(jax.tree.leaves, (before, fresh, after)), strict=True):
            assert not np.array_equal(np.asarray(b), np.asarray(f))  # a new draw
            # the step left it (to rounding: an Adam step would move it by ~1e-3)
            np.testing.assert_allclose(np.asarray(a), np.asarray(f), rtol=1e-6, atol=1e-7)
    moved = jax.tree.map(
        lambda a, b: bool(np.any(a != b)), new.params["critic"]["params"],
        learner.params["critic"]["params"],
    )  # fmt: skip
    assert any(jax.tree.leaves(moved))  # the means and scales learn


def test_acting_draws_per_step_and_evaluation_uses_the_means(pendulum):
    agent = SACAgent(SACConfig(**TINY), pendulum)
    parts = agent.parts
    acting = parts.acting(agent.init(jax.random.PRNGKey(0)).learner)
    acting = acting._replace(explore=jnp.asarray(False))
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(2, 3)), jnp.float32)
    first, core = jnp.zeros(2, bool), parts.initial_core(2)
    greedy = [parts.evaluate(True)(acting, obs, first, core, jax.random.PRNGKey(k))[0]
              for k in range(2)]  # fmt: skip
    np.testing.assert_array_equal(np.asarray(greedy[0]), np.asarray(greedy[1]))
    means = jax.jit(parts.evaluate(True))(
        acting._replace(actor=clear_noise(acting.actor)), obs, first, core, jax.random.PRNGKey(0)
    )[0]
    np.testing.assert_allclose(np.asarray(greedy[0]), np.asarray(means), rtol=1e-6)
    # Acting draws the actor anew per step: discrete SAC's μ (the policy's probabilities,
    # deterministic given the weights) differs between two steps' keys, not within one.
    cartpole = make_env("CartPole-v1", 2, 0)
    discrete = SACAgent(SACConfig(**TINY), cartpole).parts
    acting = discrete.acting(
        SACAgent(SACConfig(**TINY), cartpole).init(jax.random.PRNGKey(0)).learner
    )
    acting = acting._replace(explore=jnp.asarray(False))
    obs4 = jnp.asarray(np.random.default_rng(1).normal(size=(2, 4)), jnp.float32)
    mu = [discrete.act(acting, obs4, first, discrete.initial_core(2), jax.random.PRNGKey(k)).mu
          for k in (5, 5, 6)]  # fmt: skip
    np.testing.assert_array_equal(np.asarray(mu[0]), np.asarray(mu[1]))
    assert not np.allclose(np.asarray(mu[0]), np.asarray(mu[2]))
    cartpole.close()


def test_noisy_flags_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match=r"--noisy-std needs --noisy"):
        SACConfig(num_envs=2, noisy_std=0.1)
    with pytest.raises(ValueError, match=r"--noisy-std must be > 0"):
        SACConfig(num_envs=2, noisy=True, noisy_std=0.0)
