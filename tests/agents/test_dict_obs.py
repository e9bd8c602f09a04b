"""Dict observations end to end on MiniGrid (host mode: MiniGrid is a gymnasium env):
rollout → replay → sample gives back exactly what the env stepped, the rollout is placed over
a mesh by env, and ACER builds and learns on it with the dict torso."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from agents.acer import ACERAgent, ACERConfig
from agents.base import make_trace_replay
from agents.learning import TraceBatch
from agents.parallel import DATA, make_mesh, place_rollout
from agents.rollout import ActorOutput, initial_actor_state, make_host_rollout, trace_step_spec
from envs import make_env

ENV, N, T, A = "MiniGrid-DoorKey-5x5-v0", 2, 4, 7


class Recording:
    """A VecEnv that keeps every TimeStep it hands out (the ground truth)."""

    def __init__(self, env):
        self.env, self.steps = env, []

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self):
        self.steps = [self.env.reset()]
        return self.steps[-1]

    def step(self, actions):
        self.steps.append(self.env.step(actions))
        return self.steps[-1]


def policy(obs):
    """A deterministic policy of the whole observation (so the recorded actions show which
    observation it saw): (direction + sum of the image + first word id) mod A."""
    image = jnp.sum(obs["image"].astype(jnp.int32), axis=(1, 2, 3))
    return (obs["direction"] + image + obs["mission"][:, 0]) % A


def select_action(params, obs, first, core, key):
    del params, first, key
    b = obs["direction"].shape[0]
    return ActorOutput(policy(obs).astype(jnp.int32), jnp.full((b, A), 1.0 / A), core)


@pytest.fixture(scope="module")
def recorded():
    """Three host rollouts of T steps on 2 MiniGrid envs, and what the env returned."""
    env = Recording(make_env(ENV, N, seed=11, max_episode_steps=6))  # episode ends inside
    rollout = make_host_rollout(env, select_action, T, 0.9)
    actor = initial_actor_state(env, (), jax.random.PRNGKey(0))
    trajs = []
    for _ in range(3):
        actor, traj = rollout((), actor)
        trajs.append(traj)
    stream = jax.tree.map(lambda *xs: np.stack(xs), *[ts.obs for ts in env.steps])
    first = np.stack([ts.first for ts in env.steps])
    env.close()
    return env.env.spec, trajs, stream, first


def test_rollout_replay_sample_round_trip(recorded):
    spec, trajs, stream, first = recorded
    assert first[1:].any(), "the 6-step limit puts an episode boundary inside the rollouts"
    for k, traj in enumerate(trajs):
        batch = TraceBatch.from_rollout(traj)
        for key in ("image", "direction", "mission"):
            np.testing.assert_array_equal(batch.obs[key], stream[key][k * T : k * T + T + 1])
        np.testing.assert_array_equal(batch.first, first[k * T : k * T + T + 1])
        # The policy saw x_t at step t.
        np.testing.assert_array_equal(
            batch.action,
            policy(jax.tree.map(lambda x: x[:T].reshape(-1, *x.shape[2:]), batch.obs)).reshape(
                T, N
            ),
        )
    out = jax.eval_shape(
        select_action, (), jax.tree.map(lambda x: x[0], stream), first[0], (), jax.random.PRNGKey(0)
    )
    replay = make_trace_replay(
        spec, trace_step_spec(out), trace_len=T, buffer_size=N * T * 4, shards=1
    )
    assert replay.pytree_obs and set(replay.obs_spec) == {"image", "direction", "mission"}
    add = jax.jit(replay.add)
    state = replay.init()
    for traj in trajs:
        state = add(state, traj.obs, traj.steps, traj.core_state)
    sample = jax.jit(replay.sample, static_argnums=2)(state, jax.random.PRNGKey(1), 6)
    batch = TraceBatch.from_sample(sample, T)
    for b in range(6):
        e, s = int(sample.info.env_index[b]), int(sample.info.slot[b])
        assert s in (0, 1)  # the third trace needs its successor's first step
        for key in ("image", "direction", "mission"):
            want = stream[key][s * T : s * T + T + 1, e]
            assert batch.obs[key].dtype == want.dtype
            np.testing.assert_array_equal(batch.obs[key][:, b], want)
        np.testing.assert_array_equal(batch.first[:, b], first[s * T : s * T + T + 1, e])
        np.testing.assert_array_equal(batch.action[:, b], trajs[s].steps["action"][:, e])


def test_rollout_is_placed_over_the_mesh_by_env(recorded):
    _, trajs, _, _ = recorded
    placed = place_rollout(trajs[0], make_mesh(2))
    image = placed.obs["image"]
    assert image.sharding.spec == P(None, DATA) and image.shape == (T, N, 7, 7, 3)
    assert placed.last_obs["mission"].sharding.spec == P(DATA)
    for shard in image.addressable_shards:
        env = shard.index[1]
        np.testing.assert_array_equal(shard.data, np.asarray(trajs[0].obs["image"])[:, env])


def test_acer_learns_on_minigrid_dict_observations():
    """ACER is unchanged but for its torso, which `make_torso` picks from the obs spec: one
    training iteration (the on-policy update on the fresh dict-obs traces, then storing them
    in the replay) gives finite metrics and a stored rollout. (The replay side, sampling dict
    traces into a `TraceBatch`, is the round-trip test above.)"""
    cfg = ACERConfig(
        num_envs=N, trace_len=T, batch_size=2, buffer_size=N * T * 3, hidden=(16,),
        replay_ratio=1.0, trust_region=False,
    )  # fmt: skip
    agent = ACERAgent(cfg, make_env(ENV, N, seed=0), seed=0)
    try:
        state = agent.init(jax.random.PRNGKey(0))
        assert set(state.learner.params["params"]["torso"]) == {"image", "direction", "Dense_0"}
        state, out = agent.train_iteration(state, 0, 0)  # iteration 0: no replay update yet
        assert len(out.metrics) == 1 and int(state.learner.step) == 1
        assert all(np.isfinite(float(v)) for v in out.metrics[0].values())
        assert int(state.replay.count) == 1
        assert state.replay.frames["image"].shape == (N, 3 * T, 7, 7, 3)
        assert agent.network_costs() == {}  # the throughput cost model is for arrays
    finally:
        agent.env.close()
