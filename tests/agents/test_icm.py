"""ICM curiosity on the off-policy seam (agents/core/icm.py, --icm-coef): the forward and
inverse losses and the normalised bonus against NumPy written from arXiv:1705.05363 eqs. 3,
5–7 with the state's own weights; which networks each loss trains; the statistics count
valid transitions only; every window step gets coef·r^i added before the critic targets
(SAC continuous and discrete, TD3); the flags are refused where they do not apply."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.icm import ICM, ICMState
from agents.core.learning import TraceBatch, sample_key
from agents.sac.config import SACConfig
from agents.td3.config import TD3Config
from engine.driver import agent_class
from engine.protocol import TrainState
from envs import make_env
from tests.agent_classes import SACAgent, TD3Agent

TINY = dict(num_envs=2, trace_len=4, batch_size=8, buffer_size=2 * 4 * 6, hidden=(8,))


def dense(p, x):
    return x @ np.asarray(p["kernel"], np.float64) + np.asarray(p["bias"], np.float64)


def icm_np(params, z, z_next, action, num_actions):
    """φ, the forward prediction and the inverse logits by hand (ReLU MLPs)."""
    p = params["params"]

    def encode(x):
        enc = p["encoder"]
        hidden = sorted(k for k in enc if k != "out")
        for name in hidden:
            x = np.maximum(dense(enc[name], x), 0.0)
        return dense(enc["out"], x)

    phi, phi_next = encode(z), encode(z_next)
    onehot = np.eye(num_actions)[action]
    h = np.maximum(dense(p["forward_hidden"], np.concatenate([phi, onehot], -1)), 0.0)
    predicted = dense(p["forward_out"], h)
    h = np.maximum(dense(p["inverse_hidden"], np.concatenate([phi, phi_next], -1)), 0.0)
    return phi_next, predicted, dense(p["inverse_out"], h)


def _data(seed, T=3, B=5, D=3, A=4):
    rng = np.random.default_rng(seed)
    obs = rng.normal(1.0, 2.0, size=(T + 1, B, D)).astype(np.float32)
    action = rng.integers(0, A, size=(T, B)).astype(np.int32)
    mask = (rng.random((T, B)) > 0.25).astype(np.float32)
    return obs, action, mask


def _batch(obs, action, mask):
    """A TraceBatch of windows: observations `[n + 1, B, ...]`, actions and mask `[n, B]`."""
    n, b = mask.shape
    return TraceBatch(
        obs=jnp.asarray(obs), first=jnp.zeros((n + 1, b), bool), action=jnp.asarray(action),
        mu=(), reward=jnp.zeros((n, b)), discount=jnp.ones((n, b)), mask=jnp.asarray(mask),
        is_weight=jnp.ones((b,)), core_state=(),
    )  # fmt: skip


def _observed(icm, obs, action, mask):
    """An ICM state that has seen the rollout (obs[:-1], action, obs[-1] as x_T)."""
    rollout = type("R", (), {})()
    rollout.obs, rollout.last_obs = jnp.asarray(obs[:-1]), jnp.asarray(obs[-1])
    rollout.steps = {"action": jnp.asarray(action), "mask": jnp.asarray(mask)}
    state = jax.jit(icm.init)(jax.random.PRNGKey(3), jnp.asarray(obs[0]))
    return jax.jit(lambda state: icm.observe_rollout(state, rollout))(state)


def test_losses_bonus_and_statistics_match_numpy():
    A = 4
    icm = ICM((8, 8), 6, 1e-3, 0.2, discrete=True, action_size=A)
    obs, action, mask = _data(0, A=A)
    state = _observed(icm, obs, action, mask)
    m, v = np.asarray(state.obs_stats.mean), np.asarray(state.obs_stats.var)
    # the observation statistics see x_0..x_{T−1}; the error statistics the valid steps only
    np.testing.assert_allclose(m, obs[:-1].reshape(-1, 3).mean(0), rtol=1e-4, atol=1e-5)
    z = np.clip((obs.astype(np.float64) - m) / np.sqrt(v + 1e-8), -5.0, 5.0)
    phi_next, predicted, logits = icm_np(state.params, z[:-1], z[1:], action, A)
    fwd = 0.5 * np.sum((predicted - phi_next) ** 2, -1) * mask
    z_l = logits - logits.max(-1, keepdims=True)
    logp = z_l - np.log(np.exp(z_l).sum(-1, keepdims=True))
    inv = -np.take_along_axis(logp, action[..., None], -1)[..., 0] * mask
    got_f, got_i = jax.jit(icm.transition_losses)(
        state, jnp.asarray(obs[:-1]), jnp.asarray(action), jnp.asarray(obs[1:]), jnp.asarray(mask)
    )
    np.testing.assert_allclose(got_f, fwd, rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(got_i, inv, rtol=2e-4, atol=1e-5)
    valid = fwd[mask > 0]  # the statistics of the valid transitions' errors, as first seen
    n = valid.size
    assert float(state.error_stats.count) == pytest.approx(n + 1e-4, rel=1e-6)
    np.testing.assert_allclose(float(state.error_stats.mean), valid.mean() * n / (n + 1e-4),
                               rtol=1e-4)  # fmt: skip
    # the bonus: every window step's error over the running standard deviation
    batch = _batch(obs, action, mask)
    new, rewards, metrics = jax.jit(icm.bonus)(state, batch)
    var = float(state.error_stats.var)
    np.testing.assert_allclose(rewards, fwd / np.sqrt(var + 1e-8), rtol=2e-4, atol=1e-5)
    w = mask[0]
    np.testing.assert_allclose(metrics["icm_forward_loss"], (fwd[0] * w).sum() / w.sum(), rtol=2e-4)
    np.testing.assert_allclose(metrics["icm_inverse_loss"], (inv[0] * w).sum() / w.sum(), rtol=2e-4)
    moved = jax.tree.map(lambda a, b: bool(np.any(a != b)), new.params, state.params)
    assert all(jax.tree.leaves(moved))  # one step of all three networks


@pytest.mark.parametrize(
    "beta, still", [pytest.param(1.0, "inverse", marks=pytest.mark.slow), (0.0, "forward")]
)
def test_each_loss_trains_its_own_head(beta, still):
    """β = 1 is the forward loss alone: the inverse model gets no gradient (Adam leaves it
    where it was); β = 0 the inverse loss alone: the forward model gets none. The encoder
    moves under either (eq. 7 trains it through both)."""
    icm = ICM((8,), 4, 1e-2, beta, discrete=False, action_size=2)
    rng = np.random.default_rng(1)
    obs = jnp.asarray(rng.normal(size=(2, 6, 3)), jnp.float32)
    action = jnp.asarray(rng.uniform(-1, 1, size=(1, 6, 2)), jnp.float32)
    state = jax.jit(icm.init)(jax.random.PRNGKey(0), obs[0])  # programs, not op by op
    batch = _batch(obs, action, np.ones((1, 6), np.float32))
    new, _, _ = jax.jit(icm.bonus)(state, batch)
    p, q = state.params["params"], new.params["params"]
    for part in ("encoder", f"{still}_hidden", f"{still}_out"):
        changed = jax.tree.map(lambda a, b: bool(np.any(a != b)), p[part], q[part])
        assert all(jax.tree.leaves(changed)) == (part == "encoder"), part


@pytest.mark.slow
def test_familiar_transitions_become_predictable_and_novel_ones_stay_surprising():
    icm = ICM((32, 32), 16, 1e-3, 0.2, discrete=True, action_size=3)
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.normal(size=(2, 64, 4)), jnp.float32)
    next_obs = obs.at[1].set(obs[0] + 0.5)  # a deterministic dynamics: s' = s + 0.5
    action = jnp.asarray(rng.integers(0, 3, size=(1, 64)), jnp.int32)
    state = icm.init(jax.random.PRNGKey(0), obs[0])
    batch = _batch(next_obs, action, np.ones((1, 64), np.float32))

    def error(o):
        return float(jnp.mean(icm.transition_losses(state, o[:1], action, o[1:], None)[0]))

    before = error(next_obs)
    bonus = jax.jit(icm.bonus)
    for _ in range(300):
        state, _, _ = bonus(state, batch)
    after = error(next_obs)
    novel = next_obs.at[1].set(next_obs[0] - 3.0)  # a transition never seen
    assert after < 0.2 * before
    assert error(novel) > 5 * after


CASES = [
    (SACAgent, SACConfig, "Pendulum-v1"),
    (SACAgent, SACConfig, "CartPole-v1"),
    (TD3Agent, TD3Config, "Pendulum-v1"),
]


@pytest.mark.slow
@pytest.mark.parametrize("agent_cls, cfg_cls, env_id", CASES)
def test_windows_get_the_intrinsic_reward_before_the_targets(agent_cls, cfg_cls, env_id,
                                                             learnt_batches):  # fmt: skip
    coef, n = 0.5, 2
    env = make_env(env_id, 2, 0)
    agent = agent_cls(cfg_cls(**TINY, icm_coef=coef, n_step=n, start_train_at=0), env)
    assert agent.metric_names[-3:] == ICM.metric_names
    state = agent.init(jax.random.PRNGKey(0))
    assert isinstance(state.learner.icm, ICMState) and state.learner.rnd == ()
    absorb = jax.jit(agent.absorb)
    learner, replay, actor = state.learner, state.replay, state.actor
    valid = 0.0
    for _ in range(4):
        actor, traj, _ = agent.collect(TrainState(learner, replay, actor))
        learner, replay, _ = absorb(learner, replay, traj)
        valid += float(np.sum(np.asarray(traj.steps["mask"])))
    assert float(learner.icm.obs_stats.count) == pytest.approx(32, abs=1e-3)
    assert float(learner.icm.error_stats.count) == pytest.approx(valid, abs=1e-3)

    batches = learnt_batches(agent)
    new, _, metrics = agent.replay_update(learner, replay)
    _, sub = sample_key(learner.key)
    batch, _, _ = agent.modules.sample(agent.replay, replay, learner, sub, 8)
    icm = agent.modules.curiosity
    fwd, _ = icm.transition_losses(learner.icm, batch.obs[:n], batch.action, batch.obs[1:],
                                   batch.mask)  # fmt: skip
    r_int = np.asarray(fwd) / np.sqrt(float(learner.icm.error_stats.var) + 1e-8)
    assert r_int.shape == (n, 8)
    want = np.asarray(batch.reward) + coef * r_int
    np.testing.assert_allclose(np.asarray(batches[-1].reward), want, rtol=1e-4, atol=1e-5)
    for name in ICM.metric_names:
        assert np.isfinite(float(metrics[name])), name
    moved = jax.tree.map(lambda a, b: bool(np.any(a != b)), new.icm.params, learner.icm.params)
    assert all(jax.tree.leaves(moved))


def test_icm_flags_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match=r"--icm-lr needs --icm-coef > 0"):
        SACConfig(**TINY, icm_lr=1e-2)
    with pytest.raises(ValueError, match=r"--icm-features needs --icm-coef > 0"):
        TD3Config(**TINY, icm_features=32)
    with pytest.raises(ValueError, match=r"--icm-coef must be 0 with --rnd-coef > 0"):
        SACConfig(**TINY, icm_coef=0.1, rnd_coef=0.1)
    with pytest.raises(ValueError, match=r"--icm-beta must be in \[0, 1\]"):
        TD3Config(**TINY, icm_coef=0.1, icm_beta=1.5)
    with pytest.raises(ValueError, match=r"--icm-coef must be >= 0"):
        SACConfig(**TINY, icm_coef=-1.0)


@pytest.mark.parametrize("agent_name", [pytest.param("ppo", marks=pytest.mark.slow), "a2c"])
def test_on_policy_rollouts_get_the_intrinsic_reward_before_the_advantages(agent_name, monkeypatch):
    """PPO and A2C (agents/ppo/learner.py): the rollout's statistics, then coef·r^i of each
    transition added to the env reward that the advantages see, then one ICM step on every
    valid transition; its metrics are logged with every minibatch's."""
    from agents.core.registry import get_agent

    spec_ = get_agent(agent_name)
    coef = 0.37
    cfg = spec_.config_cls(num_envs=2, trace_len=8, hidden=(8,), icm_coef=coef, anneal_steps=0)
    env = make_env("CartPole-v1", 2, 0)
    agent = agent_class(spec_)(cfg, env)
    assert agent.metric_names[-3:] == ICM.metric_names
    state = agent.init(jax.random.PRNGKey(0), jit=True)  # programs below, not op by op
    assert isinstance(state.learner.icm, ICMState)
    _, traj, _ = agent.collect(state)
    learner = agent.modules.learner
    seen = {}
    advantages = learner._advantages

    def spy(reward, *args):  # the reward the advantages see, out of the jitted `prepare`
        jax.debug.callback(lambda r: seen.update(reward=r), reward)
        return advantages(reward, *args)

    monkeypatch.setattr(learner, "_advantages", spy)  # the parts are shared: restored after
    new, buffer = jax.jit(learner.prepare)(state.learner, traj)
    icm = learner.curiosity
    own = jax.jit(icm.observe_rollout)(state.learner.icm, traj)
    obs = jnp.concatenate([traj.obs, traj.last_obs[None]])
    mask = traj.steps["mask"]
    r_int = np.asarray(jax.jit(icm.rewards)(own, obs[:-1], traj.steps["action"], obs[1:], mask))
    want = np.asarray(traj.steps["reward"]) + coef * r_int
    np.testing.assert_allclose(np.asarray(seen["reward"]), want, rtol=1e-5, atol=1e-6)
    assert np.all(r_int[np.asarray(mask) == 0] == 0.0)  # the fake reset steps get nothing
    assert set(buffer.curiosity) == set(ICM.metric_names)
    moved = jax.tree.map(lambda a, b: bool(np.any(a != b)), new.icm.params, own.params)
    assert all(jax.tree.leaves(moved))
    assert float(new.icm.error_stats.count) == pytest.approx(float(np.sum(mask)), abs=1e-3)


@pytest.mark.slow
def test_dqn_traces_get_the_intrinsic_reward_before_the_targets(learnt_batches):
    """DQN: every step of a sampled trace (and its look-ahead) gets coef·r^i before the
    n-step targets; ICM trains on the trace's learnt transitions (`--trace-len` of them)."""
    from agents.dqn.config import DQNConfig
    from tests.agent_classes import DQNAgent

    coef = 0.25
    cfg = DQNConfig(num_envs=2, trace_len=2, n_step=2, batch_size=4, buffer_size=2 * 2 * 8,
                    hidden=(8,), start_train_at=0, icm_coef=coef)  # fmt: skip
    agent = DQNAgent(cfg, make_env("CartPole-v1", 2, 0))
    assert agent.metric_names[-3:] == ICM.metric_names
    state = agent.init(jax.random.PRNGKey(0))
    absorb = jax.jit(agent.absorb)
    learner, replay, actor = state.learner, state.replay, state.actor
    for _ in range(5):
        actor, traj, _ = agent.collect(TrainState(learner, replay, actor))
        learner, replay, _ = absorb(learner, replay, traj)
    assert float(learner.icm.obs_stats.count) == pytest.approx(20, abs=1e-3)
    batches = learnt_batches(agent)
    new, _, metrics = agent.replay_update(learner, replay)
    _, sub = sample_key(learner.key)  # the batch the update drew (agents.core.learning)
    sample = agent.replay.sample(replay, sub, cfg.batch_size)
    batch = TraceBatch.from_sample(sample, agent.replay.window_len)
    n = batch.reward.shape[0]
    assert n == cfg.trace_len + cfg.n_step - 1
    icm = agent.modules.curiosity
    r_int = icm.rewards(learner.icm, batch.obs[:n], batch.action, batch.obs[1 : n + 1], batch.mask)
    assert np.all(np.asarray(r_int)[np.asarray(batch.mask) > 0] > 0)
    want = np.asarray(batch.reward) + coef * np.asarray(r_int)
    np.testing.assert_allclose(np.asarray(batches[-1].reward), want, rtol=1e-5, atol=1e-6)
    for name in ICM.metric_names:
        assert np.isfinite(float(metrics[name])), name
    moved = jax.tree.map(lambda a, b: bool(np.any(a != b)), new.icm.params, learner.icm.params)
    assert all(jax.tree.leaves(moved))
