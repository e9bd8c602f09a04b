"""Recurrent SAC (--recurrent; R2D2's stored state, burn-in and refresh, Kapturowski et al.
2019): no gradient reaches the burn-in steps, the refresh writes the online networks' states
(a step-by-step NumPy-side replay of the window is the reference) and only with the flag,
inapplicable flags are one-line errors, and a subprocess train → resume → evaluate on
Pendulum-P-v1."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.config import ConfigError
from agents.core.learning import TraceBatch
from agents.sac.config import SACConfig
from envs import make_env
from networks.sac import RecurrentSACState
from replay import ReplaySample, SampleInfo
from tests.agent_classes import SACAgent

# Windows of burn-in 4 + 4 learnt + 1 look-ahead step, traces of 2.
TINY = dict(num_envs=2, trace_len=2, batch_size=2, buffer_size=2 * 2 * 16, hidden=(8,),
            recurrent=True, seq_len=4, burn_in=4, lstm_size=8, n_step=2)  # fmt: skip


@pytest.fixture(scope="module")
def pendulum_p():
    return make_env("Pendulum-P-v1", 2, 0)


def _filled(agent, iterations=12):
    """The agent's state after `iterations` rollouts with random actions (no update yet):
    the replay holds the envs' streams with the states stored at acting time."""
    state = agent.init(jax.random.PRNGKey(0))
    for it in range(iterations):
        state, _ = agent.train_iteration(state, it, 0)
    assert int(state.learner.step) == 0
    return state


def _windows(agent, replay, env_index, slot):
    env_index, slot = jnp.asarray(env_index, jnp.int32), jnp.asarray(slot, jnp.int32)
    ones = jnp.ones(env_index.shape, jnp.float32)
    info = SampleInfo(env_index, slot, ones, ones)
    sample = ReplaySample(agent.replay.gather(replay, env_index, slot), info)
    return TraceBatch.from_sample(sample, agent.replay.window_len), info


def _perturbed(params, key, scale=0.3):
    """Parameters other than those the actor acted with (so refreshed states differ)."""
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(key, len(leaves))
    noisy = [x + scale * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    return jax.tree.unflatten(tree, noisy)


@pytest.mark.slow
def test_burn_in_gets_no_gradient(pendulum_p):
    """∂loss/∂x of the critics' and of the actor's loss is exactly 0 at the burn-in steps and
    not at the learnt ones; yet the burn-in observations change the losses (they refresh the
    stored state)."""
    agent = SACAgent(SACConfig(**TINY), pendulum_p)
    state = _filled(agent)
    learner, cfg = agent.modules.learner, agent.config
    batch, _ = _windows(agent, state.replay, [0, 1], [4, 5])
    rng = np.random.default_rng(0)
    batch = batch._replace(
        obs=batch.obs + jnp.asarray(rng.normal(size=batch.obs.shape), jnp.float32),
        core_state=jax.tree.map(
            lambda x: x + jnp.asarray(rng.normal(size=x.shape), x.dtype), batch.core_state
        ),
    )
    params = _perturbed(state.learner.params, jax.random.PRNGKey(1))
    b, L = cfg.burn_in, cfg.seq_len
    y = jnp.asarray(rng.normal(size=(L, 2)), jnp.float32)

    def critic_loss(obs):
        return learner.critic_loss(params["critic"], batch._replace(obs=obs), y)[0]

    def actor_loss(obs):
        bt = batch._replace(obs=obs)
        policy, _ = learner.actor_forward(params["actor"], bt)
        feats = learner.critic_loss(params["critic"], bt, y)[1][2]
        key = jax.random.PRNGKey(2)
        return learner.actor_loss(policy, params["critic"], feats, bt, key, 0.2)[0]

    for loss in (critic_loss, actor_loss):
        g = np.asarray(jax.grad(loss)(batch.obs))
        assert np.all(g[:b] == 0.0), loss.__name__  # the burn-in: exactly no gradient
        assert np.all(np.abs(g[b : b + L]).sum(axis=(0, 2)) > 0), loss.__name__
        shifted = batch.obs.at[:b].add(1.0)
        assert not np.isclose(float(loss(shifted)), float(loss(batch.obs))), loss.__name__


def _stepwise_states(agent, params, batch, at):
    """Reference: the window replayed one step at a time from its stored state, as acting
    does (the action taken and the reward received become the next step's inputs); the
    (actor, critic) states before window positions `at`."""
    actor, critic = agent.modules.learner.actor, agent.modules.learner.critic
    core = batch.core_state
    out = {}
    for i in range(max(at)):
        x, f = batch.obs[i : i + 1], batch.first[i : i + 1]
        _, a_state = actor.apply(params["actor"], x, f, core.actor)
        _, c_state = critic.apply(params["critic"], x, f, core.critic, method="unroll")
        feed = dict(prev_action=batch.action[i], prev_reward=batch.reward[i])
        core = RecurrentSACState(a_state._replace(**feed), c_state._replace(**feed))
        if i + 1 in at:
            out[i + 1] = core
    return out


@pytest.mark.slow
@pytest.mark.parametrize("refresh", [True, False])
def test_refresh_writes_the_online_states_of_later_traces(pendulum_p, refresh):
    """After one update, the stored states of the traces after each window's start, up to
    the end of its learnt steps, are the online networks' (the update's, before its step),
    and differ from the acting ones; every other stored state is unchanged. Off: nothing
    changes."""
    agent = SACAgent(SACConfig(**TINY, refresh_stored_state=refresh), pendulum_p)
    state = _filled(agent)
    cfg, T = agent.config, agent.config.trace_len
    learner = state.learner._replace(params=_perturbed(state.learner.params, jax.random.PRNGKey(3)))
    env_index, slot = np.array([0, 1]), np.array([5, 7])
    batch, info = _windows(agent, state.replay, env_index, slot)
    new, metrics, td, computed = jax.jit(agent.modules.learner.update)(learner, batch)
    assert td.shape == (2,) and all(np.isfinite(float(v)) for v in metrics.values())
    before = jax.tree.map(np.asarray, state.replay.extras)
    offset = jnp.zeros(2, jnp.int32)
    replay = agent.modules.after_update(agent.replay, state.replay, new, batch, info, offset,
                                        computed)  # fmt: skip
    after = jax.tree.map(np.asarray, replay.extras)
    if not refresh:
        assert computed == ()
        jax.tree.map(np.testing.assert_array_equal, after, before)
        return
    positions = list(range(T, cfg.burn_in + cfg.seq_len + 1, T))
    want = _stepwise_states(agent, learner.params, batch, positions)
    touched = np.zeros(jax.tree.leaves(before)[0].shape[:2], bool)  # [envs, slots]
    for p in positions:
        s = slot - cfg.burn_in // T + p // T
        touched[env_index, s] = True
        for got, ref, old in zip(
            jax.tree.leaves(jax.tree.map(lambda x, s=s: x[env_index, s], after)),
            jax.tree.leaves(want[p]),
            jax.tree.leaves(jax.tree.map(lambda x, s=s: x[env_index, s], before)),
            strict=True,
        ):
            np.testing.assert_allclose(got, np.asarray(ref), rtol=1e-5, atol=1e-6)
            if np.issubdtype(old.dtype, np.floating) and old.ndim == 2 and old.shape[1] == 8:
                assert not np.allclose(got, old)  # the LSTM states changed
            else:  # the previous action and reward are the acting ones
                np.testing.assert_array_equal(got, old)
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(before), strict=True):
        np.testing.assert_array_equal(a[~touched], b[~touched])


def test_config_errors_name_the_flag():
    with pytest.raises(ConfigError, match="--burn-in needs --recurrent"):
        SACConfig(burn_in=16)
    with pytest.raises(ConfigError, match="--refresh-stored-state needs --recurrent"):
        SACConfig(refresh_stored_state=False)
    with pytest.raises(ConfigError, match="--seq-len must be a multiple of --trace-len 2"):
        SACConfig(**{**TINY, "seq_len": 3})
    with pytest.raises(ConfigError, match="--overwrite-mu: not with --recurrent"):
        SACConfig(**TINY, target="vtrace", overwrite_mu=True)
    with pytest.raises(ConfigError, match="--buffer-size must be at least 6 slots per env"):
        SACConfig(**{**TINY, "buffer_size": 20})


@pytest.mark.slow
def test_train_resume_evaluate(tmp_path):
    """The CLI end to end in recurrent mode: updates run, the run resumes, and evaluation
    (which carries the core state) finishes its episodes."""
    from tests.experiments.test_train_smoke import run

    run_dir = tmp_path / "rsac"
    common = [
        "--agent", "sac", "--env", "Pendulum-P-v1", "--recurrent", "--num-envs", "2",
        "--trace-len", "2", "--seq-len", "2", "--burn-in", "2", "--lstm-size", "8",
        "--batch-size", "2", "--buffer-size", "400", "--hidden", "8", "--start-train-at",
        "16", "--update-to-data", "0.25", "--run-dir", str(run_dir), "--no-progress",
        "--eval-episodes", "2",
    ]  # fmt: skip
    run("experiments.train", *common, "--total-steps", "40", "--checkpoint-every", "20")
    run("experiments.train", "--resume", str(run_dir), "--total-steps", "60", "--no-progress")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 60 and summary["updates"] > 0
    run("experiments.evaluate", str(run_dir), "--episodes", "1", "--out", str(tmp_path / "e.json"))
    assert json.loads((tmp_path / "e.json").read_text())["episodes"] == 1


@pytest.mark.slow
def test_sharded_update_refreshes_each_rows_own_states(pendulum_p):
    """Data parallelism splits the windows over devices: the states each device refreshes
    are those of one device updating on all the windows, not averages over the devices'
    different rows (its |TD| per window has the right shape; its values depend on each
    device's own sampled target actions)."""
    from jax.sharding import PartitionSpec as P

    from agents.core.parallel import DATA, make_mesh

    agent = SACAgent(SACConfig(**TINY), pendulum_p)
    state = _filled(agent)
    learner = state.learner._replace(params=_perturbed(state.learner.params, jax.random.PRNGKey(3)))
    batch, _ = _windows(agent, state.replay, np.array([0, 1]), np.array([5, 7]))
    _, _, td1, refreshed1 = jax.jit(agent.modules.learner.update)(learner, batch)
    time_major = ("obs", "first", "action", "mu", "reward", "discount", "mask")
    rows = batch._replace(
        **dict.fromkeys(time_major, P(None, DATA)), core_state=P(DATA), is_weight=P(DATA)
    )
    sharded = jax.shard_map(
        lambda s, b: agent.modules.learner.update(s, b, axis_name=DATA),
        mesh=make_mesh(2),
        in_specs=(P(), rows),
        out_specs=(P(), P(), P(DATA), P(None, DATA)),
    )
    _, _, td2, refreshed2 = jax.jit(sharded)(learner, batch)
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)  # noqa: E731
    jax.tree.map(close, refreshed1, refreshed2)
    critic_h = np.asarray(jax.tree.leaves(refreshed1.critic)[0])
    assert not np.allclose(critic_h[:, 0], critic_h[:, 1])  # two rows that differ
    assert td1.shape == td2.shape == (2,)


@pytest.mark.slow
@pytest.mark.parametrize("curiosity", [dict(rnd_coef=0.5), dict(icm_coef=0.5)])
def test_curiosity_reaches_the_targets_and_the_cores_get_the_env_reward(
    pendulum_p, curiosity, monkeypatch, learnt_batches
):
    """Recurrent SAC with RND or ICM (issue 63): the update's windows carry reward + coef·r^i
    for the targets, and `env_reward`, the env's reward, which is what the cores are fed as
    their previous reward (as acting fed them); without curiosity they get `reward`."""
    import agents.sac.recurrent as recurrent

    agent = SACAgent(SACConfig(**TINY, **curiosity), pendulum_p)
    state = _filled(agent)
    fed, previous = [], recurrent.previous_inputs
    batches = learnt_batches(agent)

    def spy_inputs(core, action, reward):
        fed.append(reward)
        return previous(core, action, reward)

    monkeypatch.setattr(recurrent, "previous_inputs", spy_inputs)
    agent.replay_update(state.learner, state.replay)
    batch = batches[-1]
    env_reward, reward = np.asarray(batch.env_reward), np.asarray(batch.reward)
    assert env_reward.shape == reward.shape and np.all(reward > env_reward)  # bonus > 0
    assert fed and all(np.array_equal(np.asarray(r), env_reward) for r in fed)
    assert recurrent.env_reward(batch._replace(env_reward=())) is batch.reward
