"""Dict observations end to end on MiniGrid (host mode: MiniGrid is a gymnasium env), through
ACER: it builds and learns with the dict torso; rollout → replay → sample gives back exactly
what the env stepped; the rollout is placed over a mesh by env."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from agents.acer import ACERConfig
from agents.core.learning import TraceBatch
from agents.core.parallel import DATA, make_mesh, place_rollout
from benchmarks.costs import COST_MODELS
from engine.protocol import TrainState
from envs import make_env
from tests.agent_classes import ACERAgent

pytestmark = pytest.mark.slow  # the slow tier (docs/tests.md): a learning run

ENV, N, T = "MiniGrid-DoorKey-5x5-v0", 2, 4


class Recording:
    """A VecEnv that keeps every TimeStep it hands out and every action it gets (the ground
    truth)."""

    def __init__(self, env):
        self.env, self.steps, self.actions = env, [], []

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self):
        self.steps, self.actions = [self.env.reset()], []
        return self.steps[-1]

    def step(self, actions):
        self.actions.append(np.asarray(actions))
        self.steps.append(self.env.step(actions))
        return self.steps[-1]


@pytest.fixture(scope="module")
def acer_run():
    """ACER, unchanged but for the torso `make_torso` picks from the obs spec, on 2 MiniGrid
    envs (a 6-step limit puts episode ends inside the traces): three iterations of rollout
    and `absorb` (the on-policy update, then storing the traces in the replay)."""
    cfg = ACERConfig(
        num_envs=N, trace_len=T, batch_size=2, buffer_size=N * T * 4, hidden=(16,),
        replay_ratio=1.0, trust_region=False,
    )  # fmt: skip
    env = Recording(make_env(ENV, N, seed=11, max_episode_steps=6))
    agent = ACERAgent(cfg, env, seed=0)
    state = agent.init(jax.random.PRNGKey(0))
    trajs, metrics = [], []
    for _ in range(3):
        actor, traj, placed = agent.collect(state)
        learner, replay, m = agent.programs["absorb"](state.learner, state.replay, placed)
        state = TrainState(learner, replay, actor)
        trajs.append(traj)
        metrics += m
    stream = jax.tree.map(lambda *xs: np.stack(xs), *[ts.obs for ts in env.steps])
    first = np.stack([ts.first for ts in env.steps])
    env.close()
    yield agent, state, trajs, metrics, stream, first, np.stack(env.actions)


def test_acer_learns_on_minigrid_dict_observations(acer_run):
    agent, state, _, metrics, *_ = acer_run
    assert set(state.learner.params["params"]["torso"]) == {"image", "direction", "Dense_0"}
    assert len(metrics) == 3 and int(state.learner.step) == 3
    for m in metrics:
        assert all(np.isfinite(float(v)) for v in m.values())
    assert state.replay.frames["image"].shape == (N, 4 * T, 7, 7, 3)
    assert COST_MODELS["acer"](agent) == {}  # the cost model is for arrays
    # It learnt from every part of the observation: each leaf of the image and direction
    # encoders moved from its initial value (the same key gives the same initial weights).
    learner_key = jax.random.split(jax.random.PRNGKey(0))[0]  # as `init` splits it
    start = agent.init_learner(learner_key).params["params"]["torso"]
    now = state.learner.params["params"]["torso"]
    for part in ("image", "direction"):
        for a, b in zip(jax.tree.leaves(now[part]), jax.tree.leaves(start[part]), strict=True):
            moved = np.abs(np.asarray(a) - np.asarray(b)).max()
            assert 0 < moved < 0.05, (part, moved)  # three small steps from these weights


def test_rollout_replay_sample_round_trip(acer_run):
    """What the env handed out is what the rollout recorded, what the replay stores and what
    a sample returns, leaf by leaf; the actions are the ones the env received."""
    agent, state, trajs, _, stream, first, actions = acer_run
    assert first[1:].any(), "the 6-step limit puts an episode boundary inside the rollouts"
    for k, traj in enumerate(trajs):
        batch = TraceBatch.from_rollout(traj)
        for key in ("image", "direction", "mission"):
            np.testing.assert_array_equal(batch.obs[key], stream[key][k * T : k * T + T + 1])
        np.testing.assert_array_equal(batch.first, first[k * T : k * T + T + 1])
        np.testing.assert_array_equal(batch.action, actions[k * T : (k + 1) * T])
    replay = agent.replay
    assert replay.pytree_obs and set(replay.obs_spec) == {"image", "direction", "mission"}
    sample = jax.jit(replay.sample, static_argnums=2)(state.replay, jax.random.PRNGKey(1), 6)
    batch = TraceBatch.from_sample(sample, T)
    for b in range(6):
        e, s = int(sample.info.env_index[b]), int(sample.info.slot[b])
        assert s in (0, 1)  # the third trace needs its successor's first step
        for key in ("image", "direction", "mission"):
            want = stream[key][s * T : s * T + T + 1, e]
            assert batch.obs[key].dtype == want.dtype
            np.testing.assert_array_equal(batch.obs[key][:, b], want)
        np.testing.assert_array_equal(batch.first[:, b], first[s * T : s * T + T + 1, e])
        np.testing.assert_array_equal(batch.action[:, b], actions[s * T : (s + 1) * T, e])


def test_rollout_is_placed_over_the_mesh_by_env(acer_run):
    trajs = acer_run[2]
    placed = place_rollout(trajs[0], make_mesh(2))
    image = placed.obs["image"]
    assert image.sharding.spec == P(None, DATA) and image.shape == (T, N, 7, 7, 3)
    assert placed.last_obs["mission"].sharding.spec == P(DATA)
    for shard in image.addressable_shards:
        env = shard.index[1]
        np.testing.assert_array_equal(shard.data, np.asarray(trajs[0].obs["image"])[:, env])
