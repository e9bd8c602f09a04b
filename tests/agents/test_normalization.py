"""Running observation statistics (agents/core/normalization.py) against NumPy, merged over fake
devices, and as the off-policy agents use them (--normalize-obs): the replay keeps raw
observations, the statistics count every env step, the learner and the actor see the same
normalised inputs. The resume test is the CLI run in tests/agents/test_sac.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.learning import sample_key
from agents.core.normalization import RunningStats, normalize
from agents.core.offpolicy import ActingParams
from agents.sac.config import SACConfig
from agents.td3.config import TD3Config
from engine.protocol import TrainState
from envs import make_env
from tests.agent_classes import SACAgent, TD3Agent

TINY = dict(num_envs=2, trace_len=4, batch_size=8, buffer_size=2 * 4 * 6, hidden=(8,))
PRIOR = 1e-4  # RunningStats starts as 1e-4 pseudo-samples of mean 0 and variance 1


def pooled_np(x):
    """Mean and population variance of the rows of `x` pooled with the prior pseudo-samples
    (float64); with PRIOR = 0 these are np.mean and np.var."""
    n = PRIOR + len(x)
    mean = x.sum(0) / n
    m2 = PRIOR * (1.0 + mean**2) + np.square(x - mean).sum(0)
    return mean, m2 / n


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_running_stats_match_numpy_mean_and_variance(seed):
    """Batch after batch of random sizes, offsets and scales: the running mean and
    population variance equal NumPy's over everything seen so far."""
    rng = np.random.default_rng(seed)
    stats, seen = RunningStats.zeros((3,)), []
    update = jax.jit(lambda s, x: s.update(x, 2))
    for _ in range(6):
        t, b = rng.integers(1, 9, size=2)
        x = rng.normal(rng.normal(size=3) * 5, rng.uniform(0.1, 4, size=3), size=(t, b, 3))
        stats = update(stats, jnp.asarray(x, jnp.float32))
        seen.append(x.reshape(-1, 3))
        everything = np.concatenate(seen)
        mean, var = pooled_np(everything)
        np.testing.assert_allclose(np.asarray(stats.mean), mean, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(stats.var), var, rtol=1e-5, atol=1e-5)
        # ... and within the prior's weight of NumPy's plain mean and variance.
        np.testing.assert_allclose(np.asarray(stats.var), everything.var(0), rtol=1e-2)
        assert float(stats.count) == pytest.approx(len(everything), abs=1e-3)
    z = np.asarray(normalize(jnp.asarray(everything, jnp.float32), stats, 5.0))
    want = np.clip((everything - everything.mean(0)) / np.sqrt(everything.var(0) + 1e-8), -5, 5)
    np.testing.assert_allclose(z, want, rtol=1e-3, atol=1e-3)


def test_running_stats_merged_over_devices_equal_one_device():
    """Under shard_map each device takes its shard of the batch (psum over the axis): every
    device ends with the statistics of the whole batch."""
    from jax.sharding import PartitionSpec as P

    from agents.core.parallel import make_mesh

    mesh = make_mesh(2)
    x = jnp.asarray(np.random.default_rng(0).normal(3.0, 2.0, size=(5, 8, 4)), jnp.float32)
    stats = RunningStats.zeros((4,)).update(x[:, :3], 2)  # some history first

    def step(s, xs):
        return s.update(xs, 2, "data")

    sharded = jax.jit(
        jax.shard_map(step, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P())
    )(stats, x)
    one = stats.update(x, 2)
    for a, b in zip(sharded, one, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("agent_cls, cfg_cls", [(SACAgent, SACConfig), (TD3Agent, TD3Config)])
def test_off_policy_agents_store_raw_and_learn_and_act_normalised(
    agent_cls, cfg_cls, learnt_batches
):
    env = make_env("Pendulum-v1", 2, 0)
    agent = agent_cls(cfg_cls(**TINY, normalize_obs=True, start_train_at=0), env)
    state = agent.init(jax.random.PRNGKey(0))
    assert isinstance(state.learner.obs_stats, RunningStats)
    absorb = jax.jit(agent.absorb)
    learner, replay, actor, raw = state.learner, state.replay, state.actor, []
    for _ in range(4):
        actor, traj, _ = agent.collect(TrainState(learner, replay, actor))
        learner, replay, _ = absorb(learner, replay, traj)
        raw.append(np.asarray(traj.obs))  # [T, B, 3]
    raw = np.concatenate(raw)  # [16, 2, 3]
    # The replay holds the raw observations; the statistics count every one of them.
    np.testing.assert_array_equal(np.asarray(replay.frames[:, :16]), np.swapaxes(raw, 0, 1))
    flat = raw.reshape(-1, 3)
    assert float(learner.obs_stats.count) == pytest.approx(32, abs=1e-3)
    np.testing.assert_allclose(np.asarray(learner.obs_stats.mean), flat.mean(0), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(learner.obs_stats.var), flat.var(0), rtol=1e-3)

    # The learner gets the sampled batch normalised with the learner's statistics.
    batches = learnt_batches(agent)
    agent.replay_update(learner, replay)
    _, sub = sample_key(learner.key)
    batch, _, _ = agent.modules.sample(agent.replay, replay, learner, sub, 8)
    mean, var = np.asarray(learner.obs_stats.mean), np.asarray(learner.obs_stats.var)
    want = np.clip((np.asarray(batch.obs) - mean) / np.sqrt(var + 1e-8), -5.0, 5.0)
    np.testing.assert_allclose(np.asarray(batches[-1].obs), want, rtol=1e-5, atol=1e-5)

    # The actor sees what the learner sees: its greedy action is the network's on the
    # normalised observation.
    obs = jnp.asarray(flat[:6])
    params = agent.policy_params(learner)
    assert isinstance(params, ActingParams) and params.obs_stats is learner.obs_stats
    got = agent.act(True)(params, obs, None, (), jax.random.PRNGKey(0))[0]
    out = agent.modules.learner.actor.apply(params.actor, jnp.asarray(np.clip((flat[:6] - mean) /
                                    np.sqrt(var + 1e-8), -5, 5), jnp.float32))  # fmt: skip
    a = jnp.tanh(out[0]) if isinstance(out, tuple) else out
    np.testing.assert_allclose(np.asarray(got), 2.0 * np.asarray(a), rtol=1e-4, atol=1e-5)


def test_obs_clip_without_normalize_obs_is_an_error():
    with pytest.raises(ValueError, match="--obs-clip needs --normalize-obs"):
        SACConfig(**TINY, obs_clip=3.0)
    assert SACConfig(**TINY, normalize_obs=True, obs_clip=3.0).obs_clip == 3.0
