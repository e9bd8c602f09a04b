"""SAC and TD3 on any combination of vectors and images (issue 63; the Advanced-SAC seed's
"multiple sensors, each image of its own resolution"): a dict observation of a vector and
a small image, with continuous actions, through the whole off-policy path (acting, the
trace replay, window sampling, the update); each network encodes every key (one encoder
per key, `networks.sac.obs_torso`) and learns from all of them; the options that take
vectors only are refused with one line."""

import jax
import numpy as np
import pytest

from agents.sac import SACConfig
from agents.td3.config import TD3Config
from engine.protocol import TrainState
from envs.core import ArraySpec, EnvSpec, VecEnv
from tests.agent_classes import SACAgent, TD3Agent

TINY = dict(num_envs=2, trace_len=4, batch_size=8, buffer_size=2 * 4 * 6, hidden=(16,),
            start_train_at=0)  # fmt: skip


class TwoSensors(VecEnv):
    """A vector [3] and an 8x8x1 uint8 image (values 0-9) per env; one action in [−1, 1];
    reward −(a − x₀)², x₀ the vector's first entry; episodes of 5 steps (a time limit)."""

    def __init__(self, num_envs=2, seed=0):
        obs_spec = {"state": ArraySpec((3,), np.float32), "camera": ArraySpec((8, 8, 1), np.uint8)}
        super().__init__(EnvSpec(
            env_id="TwoSensors", num_envs=num_envs, obs_shape=None, obs_dtype=None,
            discrete=False, num_actions=None, action_shape=(1,),
            action_low=np.full((1,), -1.0, np.float32), action_high=np.ones((1,), np.float32),
            frame_stack=1, is_atari=False, backend="gymnasium", max_episode_steps=5,
            obs_spec=obs_spec,
        ))  # fmt: skip
        self.rng, self.t = np.random.default_rng(seed), np.zeros(num_envs, int)

    def _obs(self):
        n = self.spec.num_envs
        self.x = self.rng.uniform(-1, 1, (n, 3)).astype(np.float32)
        # small codes, as MiniGrid's grids (the dict encoder's GridCNN reads them unscaled)
        image = self.rng.integers(0, 10, (n, 8, 8, 1)).astype(np.uint8)
        return {"state": self.x, "camera": image}

    def convert_obs(self, obs):
        return obs

    def _raw_reset(self):
        self.t[:] = 0
        return self._obs()

    def _raw_step(self, actions):
        reward = -np.square(np.asarray(actions)[:, 0] - self.x[:, 0]).astype(np.float32)
        self.t += 1
        truncated = self.t >= 5
        self.t[truncated] = 0
        terminated = np.zeros_like(truncated)
        return self._obs(), reward, terminated, truncated, None


@pytest.mark.parametrize("agent_cls, cfg_cls", [(SACAgent, SACConfig), (TD3Agent, TD3Config)])
def test_a_vector_and_an_image_through_the_whole_off_policy_path(agent_cls, cfg_cls):
    env = TwoSensors()
    agent = agent_cls(cfg_cls(**TINY), env)
    state = agent.init(jax.random.PRNGKey(0))
    absorb = jax.jit(agent.absorb)
    update = jax.jit(agent.replay_update)
    learner, replay, actor = state.learner, state.replay, state.actor
    for _ in range(4):
        actor, traj, _ = agent.collect(TrainState(learner, replay, actor))
        learner, replay, _ = absorb(learner, replay, traj)
    assert replay.frames["camera"].shape[-3:] == (8, 8, 1)
    first = learner
    for _ in range(3):
        learner, replay, metrics = update(learner, replay)
        assert all(np.isfinite(float(v)) for v in metrics.values()), metrics
    for net in ("actor", "critic"):  # the image's CNN (the vector joins its features as is)
        params = learner.params[net]["params"]["torso"]
        assert set(params) == {"camera"}, params.keys()
        moved = jax.tree.map(lambda a, b: bool(np.any(a != b)), params,
                             first.params[net]["params"]["torso"])  # fmt: skip
        assert all(jax.tree.leaves(moved)), (net, moved)  # the encoder learnt
    # The actor reads both sensors: changing either changes its output.
    net, params = agent.modules.learner.actor, learner.params["actor"]
    obs = traj.last_obs
    out = jax.tree.leaves(net.apply(params, obs))[0]
    for key in ("state", "camera"):
        other = {**obs, key: obs[key][::-1]}  # the other env's reading
        assert np.any(np.asarray(jax.tree.leaves(net.apply(params, other))[0]) != out), key
    greedy = agent.act(True)(agent.acting_params(learner), traj.last_obs, None, (),
                             jax.random.PRNGKey(1))[0]  # fmt: skip
    assert greedy.shape == (2, 1) and np.all(np.abs(np.asarray(greedy)) <= 1.0)


@pytest.mark.parametrize(
    "changes, needle",
    [
        (dict(normalize_obs=True), "--normalize-obs takes vector observations; TwoSensors has"),
        (dict(rnd_coef=0.1), "--rnd-coef takes vector observations"),
        (dict(icm_coef=0.1), "--icm-coef takes vector observations"),
        (dict(recurrent=True, seq_len=4, burn_in=0), "--recurrent takes vector observations"),
    ],
)
def test_vector_only_options_are_refused_for_other_observations(changes, needle):
    with pytest.raises(ValueError, match=needle) as info:
        SACAgent(SACConfig(**TINY, **changes), TwoSensors())
    assert "\n" not in str(info.value)
