"""RND curiosity on the off-policy seam (agents/core/rnd.py, --rnd-coef): the intrinsic reward is
the predictor's error on novel observations and shrinks on familiar ones, the target network
is fixed, every window step gets coef·r^i added before the critic targets, and the
statistics count the env steps. NumPy references are written from arXiv:1810.12894 §2.2 and
§2.4."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.learning import sample_key
from agents.core.rnd import RND, RNDState
from agents.sac.config import SACConfig
from agents.td3.config import TD3Config
from engine.protocol import TrainState
from envs import make_env
from tests.agent_classes import SACAgent, TD3Agent

TINY = dict(num_envs=2, trace_len=4, batch_size=8, buffer_size=2 * 4 * 6, hidden=(8,))


@pytest.mark.slow
def test_predictor_learns_familiar_observations_and_novel_ones_stay_surprising():
    rnd = RND(hidden=(32, 32), features=16, lr=1e-3)
    rng = np.random.default_rng(0)
    familiar = jnp.asarray(rng.normal(0.0, 1.0, size=(8, 16, 3)), jnp.float32)
    novel = jnp.asarray(rng.normal(0.0, 1.0, size=(1, 64, 3)) + 3.0, jnp.float32)
    state = rnd.init(jax.random.PRNGKey(0), familiar[0])
    state = rnd.observe(state, familiar)
    target = state.target
    before = float(jnp.mean(rnd.errors(state, familiar)))
    update = jax.jit(rnd.update)
    for i in range(300):
        state, _ = update(state, familiar[i % 8 : i % 8 + 1], jnp.ones((1, 16)))
    after = float(jnp.mean(rnd.errors(state, familiar)))
    assert after < 0.2 * before
    assert float(jnp.mean(rnd.errors(state, novel))) > 5 * after
    jax.tree.map(np.testing.assert_array_equal, state.target, target)  # never trained


def test_errors_and_rewards_match_numpy():
    """e(x) = mean_k (f̂(z)_k − f(z)_k)² with z = clip((x − m)/√(v + 1e-8), ±5), and
    r^i = e / √(σ_e² + 1e-8), from the state's networks and statistics."""
    rnd = RND(hidden=(8,), features=4, lr=1e-3)
    rng = np.random.default_rng(1)
    obs = rng.normal(2.0, 3.0, size=(3, 5, 3)).astype(np.float32)
    state = rnd.observe(rnd.init(jax.random.PRNGKey(1), jnp.asarray(obs[0])), jnp.asarray(obs))
    assert float(state.error_stats.count) == pytest.approx(15, abs=1e-3)
    obs[0, 0] = 1e3  # an outlier: clipped at +5
    m, v = np.asarray(state.obs_stats.mean), np.asarray(state.obs_stats.var)
    z = np.clip((obs - m) / np.sqrt(v + 1e-8), -5.0, 5.0)
    assert z[0, 0].max() == 5.0

    def mlp(params, x):  # the Dense layers by hand: ReLU hidden, linear output
        layers = sorted(params["params"], key=lambda k: (k == "out", k))
        for i, name in enumerate(layers):
            x = x @ np.asarray(params["params"][name]["kernel"])
            x = x + np.asarray(params["params"][name]["bias"])
            x = np.maximum(x, 0.0) if i < len(layers) - 1 else x
        return x

    err = np.mean((mlp(state.predictor, z) - mlp(state.target, z)) ** 2, axis=-1)
    np.testing.assert_allclose(np.asarray(rnd.errors(state, jnp.asarray(obs))), err, rtol=1e-4)
    var = np.asarray(state.error_stats.var)
    reward = np.asarray(rnd.rewards(state, jnp.asarray(obs)))
    np.testing.assert_allclose(reward, err / np.sqrt(var + 1e-8), rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("agent_cls, cfg_cls", [(SACAgent, SACConfig), (TD3Agent, TD3Config)])
def test_windows_get_the_intrinsic_reward_before_the_targets(agent_cls, cfg_cls, learnt_batches):
    coef, n = 0.5, 2
    env = make_env("Pendulum-v1", 2, 0)
    agent = agent_cls(cfg_cls(**TINY, rnd_coef=coef, n_step=n, start_train_at=0), env)
    assert agent.metric_names[-2:] == ("rnd_loss", "intrinsic_reward")
    state = agent.init(jax.random.PRNGKey(0))
    assert isinstance(state.learner.rnd, RNDState) and state.learner.obs_stats == ()
    absorb = jax.jit(agent.absorb)
    learner, replay, actor = state.learner, state.replay, state.actor
    for _ in range(4):
        actor, traj, _ = agent.collect(TrainState(learner, replay, actor))
        learner, replay, _ = absorb(learner, replay, traj)
    assert float(learner.rnd.obs_stats.count) == pytest.approx(32, abs=1e-3)
    assert float(learner.rnd.error_stats.count) == pytest.approx(32, abs=1e-3)

    batches = learnt_batches(agent)
    new, _, metrics = agent.replay_update(learner, replay)
    _, sub = sample_key(learner.key)
    batch, _, _ = agent.modules.sample(agent.replay, replay, learner, sub, 8)
    r_int = np.asarray(agent.modules.rnd.rewards(learner.rnd, batch.obs[1:]))
    assert r_int.shape == (n, 8) and np.all(r_int > 0)
    want = np.asarray(batch.reward) + coef * r_int
    np.testing.assert_allclose(np.asarray(batches[-1].reward), want, rtol=1e-5, atol=1e-6)
    mask0 = np.asarray(batch.mask[0])
    mean = np.sum(mask0 * r_int[0]) / max(mask0.sum(), 1.0)
    np.testing.assert_allclose(float(metrics["intrinsic_reward"]), mean, rtol=1e-5)
    assert np.isfinite(float(metrics["rnd_loss"]))
    # One predictor step; the target network is untouched.
    jax.tree.map(np.testing.assert_array_equal, new.rnd.target, learner.rnd.target)
    moved = jax.tree.map(lambda a, b: np.any(a != b), new.rnd.predictor, learner.rnd.predictor)
    assert all(jax.tree.leaves(moved))


def test_rnd_flags_without_rnd_are_errors():
    with pytest.raises(ValueError, match=r"--rnd-lr needs --rnd-coef > 0"):
        SACConfig(**TINY, rnd_lr=1e-3)
    with pytest.raises(ValueError, match=r"--rnd-features needs --rnd-coef > 0"):
        TD3Config(**TINY, rnd_features=32)
    with pytest.raises(ValueError, match=r"--rnd-coef must be >= 0"):
        SACConfig(**TINY, rnd_coef=-0.1)
