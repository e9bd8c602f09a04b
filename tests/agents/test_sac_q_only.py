"""SAC's Q-only discrete mode (--q-only, the Advanced-SAC seed's discrete_dqn_like): hard
n-step targets from the drawn members' minimum (checked in NumPy), ε-greedy acting on the
critics' mean Q, an update that leaves the actor and the temperature alone, and the flags
refused where they do not apply."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.config import ConfigError
from agents.sac.config import SACConfig
from envs import make_env
from tests.agent_classes import SACAgent

TINY = dict(num_envs=2, trace_len=2, batch_size=4, buffer_size=64, hidden=(8,),
            start_train_at=0, q_only=True)  # fmt: skip


@pytest.fixture(scope="module")
def cartpole():
    env = make_env("CartPole-v1", 2, 0)
    yield env
    env.close()


def test_targets_are_the_max_of_the_drawn_members_minimum(cartpole):
    learner = SACAgent(SACConfig(**TINY, num_critics=3, critic_subset=2), cartpole).modules.learner
    q = np.random.default_rng(0).normal(size=(3, 5, 2)).astype(np.float32)  # [N, B, A]
    members = jnp.asarray([0, 2], jnp.int32)  # indices, as draw_members gives them
    value, logp = learner.soft_value(None, lambda a: jnp.asarray(q), None, members)
    want = np.max(np.minimum(q[0], q[2]), axis=-1)  # min over members 0 and 2, max over A
    np.testing.assert_allclose(np.asarray(value), want, rtol=1e-6)
    assert np.all(np.asarray(logp) == 0.0)  # no entropy term


def test_acting_is_epsilon_greedy_on_the_mean_q(cartpole):
    agent = SACAgent(SACConfig(**TINY, q_only_epsilon=0.2), cartpole)
    parts = agent.parts
    acting = parts.acting(agent.init(jax.random.PRNGKey(0)).learner)
    acting = acting._replace(explore=jnp.asarray(False))
    obs = jnp.asarray(np.random.default_rng(1).normal(size=(2, 4)), jnp.float32)
    first, core = jnp.zeros(2, bool), parts.initial_core(2)
    q = jnp.mean(agent.modules.learner.critic.apply(acting.critic, obs), 0)
    greedy = np.argmax(np.asarray(q), -1)
    out = parts.act(acting, obs, first, core, jax.random.PRNGKey(2))
    want = 0.1 + 0.8 * np.eye(2)[greedy]  # ε/A + (1 − ε)·onehot
    np.testing.assert_allclose(np.asarray(out.mu), want, rtol=1e-6)
    action, _ = parts.evaluate(True)(acting, obs, first, core, jax.random.PRNGKey(3))
    np.testing.assert_array_equal(np.asarray(action), greedy)
    uniform = parts.act(acting._replace(explore=jnp.asarray(True)), obs, first, core,
                        jax.random.PRNGKey(2))  # fmt: skip
    np.testing.assert_allclose(np.asarray(uniform.mu), 0.5)


@pytest.mark.slow
def test_an_update_steps_the_critics_alone(cartpole):
    agent = SACAgent(SACConfig(**TINY), cartpole)
    state = agent.init(jax.random.PRNGKey(0))
    for it in range(4):
        state, _ = agent.train_iteration(state, it, 0)
    before = agent.init(jax.random.PRNGKey(0)).learner
    after = state.learner
    assert int(after.step) > 0
    same = jax.tree.map(np.array_equal, before.params["actor"], after.params["actor"])
    assert all(jax.tree.leaves(same)) and float(after.log_alpha) == float(before.log_alpha)
    moved = jax.tree.map(lambda a, b: not np.array_equal(a, b), before.params["critic"],
                         after.params["critic"])  # fmt: skip
    assert all(jax.tree.leaves(moved))


def test_q_only_flags_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match=r"--q-only-epsilon needs --q-only"):
        SACConfig(num_envs=2, q_only_epsilon=0.1)
    with pytest.raises(ValueError, match=r"--actor-lr does nothing with --q-only"):
        SACConfig(num_envs=2, q_only=True, actor_lr=1e-4)
    with pytest.raises(ValueError, match=r'--target must be "n-step" with --q-only'):
        SACConfig(num_envs=2, q_only=True, target="vtrace")
    with pytest.raises(ValueError, match=r"--recurrent must be off with --q-only"):
        SACConfig(num_envs=2, q_only=True, recurrent=True, trace_len=8, seq_len=16, burn_in=8)
    pendulum = make_env("Pendulum-v1", 2, 0)
    with pytest.raises(ConfigError, match=r"--q-only applies to discrete actions only"):
        SACAgent(SACConfig(**TINY), pendulum)
