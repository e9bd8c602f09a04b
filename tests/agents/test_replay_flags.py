"""The replay learners' flags of issue 63, on what they change: the priority bounds
(--td-error-min/--td-error-max: |δ| is held in them before it becomes a priority, for every
agent with prioritized replay), the hard target copy of SAC and TD3 (--target-update-period)
and importance weights switched off apart from the priorities (β = 0, held)."""

import jax
import numpy as np
import pytest

from agents.core.learning import TraceBatch, sample_key
from agents.dqn.config import DQNConfig
from agents.sac.config import SACConfig
from agents.td3.config import TD3Config
from engine.protocol import TrainState
from envs import make_env
from tests.agent_classes import DQNAgent, SACAgent, TD3Agent

TINY = dict(num_envs=2, trace_len=4, batch_size=8, buffer_size=2 * 4 * 6, hidden=(8,),
            start_train_at=0)  # fmt: skip


def _filled(agent, iterations=4):
    state = agent.init(jax.random.PRNGKey(0), jit=True)  # one program, not op by op
    absorb = jax.jit(agent.absorb)
    learner, replay, actor = state.learner, state.replay, state.actor
    for _ in range(iterations):
        actor, traj, _ = agent.collect(TrainState(learner, replay, actor))
        learner, replay, _ = absorb(learner, replay, traj)
    return learner, replay


def _sampled(agent, learner, replay):
    """The (env, slot) pairs the next update samples, each pair once."""

    @jax.jit
    def draw(learner, replay):
        _, sub = sample_key(learner.key)
        if hasattr(agent.modules, "sample"):  # SAC, TD3: transitions inside traces
            return agent.modules.sample(agent.replay, replay, learner, sub, 8)[1]
        return agent.replay.sample(replay, sub, 8).info

    info = draw(learner, replay)
    return sorted(set(zip(np.asarray(info.env_index).tolist(), np.asarray(info.slot).tolist(),
                          strict=True)))  # fmt: skip


# Recurrent SAC's sequences (issue 63: its prioritized replay): a sequence's mean |δ|.
RECURRENT = dict(recurrent=True, lstm_size=8, seq_len=4, burn_in=4, buffer_size=2 * 4 * 8)
SLOW = pytest.mark.slow  # the compile-heavy cases (docs/tests.md): the slow tier
CASES = [
    (SACAgent, SACConfig, "Pendulum-v1", 1e-6, {}),  # the off-policy seam adds 1e-6 to |δ|
    pytest.param(SACAgent, SACConfig, "Pendulum-v1", 1e-6, RECURRENT, marks=SLOW),
    (TD3Agent, TD3Config, "Pendulum-v1", 1e-6, {}),
    (DQNAgent, DQNConfig, "CartPole-v1", 0.0, {}),
]


@pytest.mark.parametrize("agent_cls, cfg_cls, env_id, eps, extra", CASES)
@pytest.mark.parametrize("low, high", [(100.0, 200.0), pytest.param(0.0, 1e-3, marks=SLOW)])
def test_priorities_are_made_from_the_bounded_td_errors(agent_cls, cfg_cls, env_id, eps, extra,
                                                        low, high):  # fmt: skip
    """|δ| of a fresh learner is far below 100 and far above 1e-3: held at the floor of
    [100, 200], cut at the ceiling of [0, 1e-3], every sampled slot gets that bound to the α."""
    alpha = 0.6
    cfg = cfg_cls(**{**TINY, **extra}, prioritized=True, priority_exponent=alpha,
                  td_error_min=low, td_error_max=high)  # fmt: skip
    agent = agent_cls(cfg, make_env(env_id, 2, 0))
    learner, replay = _filled(agent, iterations=6)
    pairs = _sampled(agent, learner, replay)
    _, replay, _ = jax.jit(agent.replay_update)(learner, replay)
    bound = low if low > 0 else high
    got = np.asarray(replay.priorities)[tuple(np.array(pairs).T)]
    np.testing.assert_allclose(got, (bound + eps) ** alpha, rtol=1e-5)


@pytest.mark.parametrize("agent_cls, cfg_cls, delay", [(SACAgent, SACConfig, 1),
                                                       (TD3Agent, TD3Config, 2)])  # fmt: skip
def test_targets_are_copied_every_period_updates(agent_cls, cfg_cls, delay):
    """--target-update-period 4: the targets equal the online networks right after updates 0
    and 4 (SAC: the critics; TD3: actor and critics, moved on its actor's updates), and stay
    where they were in between while the online networks move."""
    cfg = cfg_cls(**TINY, target_update_period=4, policy_delay=delay)
    agent = agent_cls(cfg, make_env("Pendulum-v1", 2, 0))
    learner, replay = _filled(agent)
    update = jax.jit(agent.replay_update)

    def target_and_online(state):
        if agent_cls is SACAgent:
            return state.target_critic, state.params["critic"]
        return state.target_params, state.params

    def same(a, b):
        return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b),
                                                        strict=True))  # fmt: skip

    before = target_and_online(learner)[0]
    for k in range(6):
        learner, replay, _ = update(learner, replay)
        target, online = target_and_online(learner)
        if k % 4 == 0:
            assert same(target, online), k
        else:
            assert same(target, before) and not same(target, online), k
        before = target


def test_a_period_that_skips_the_actor_updates_and_inverted_bounds_are_refused():
    """(--tau with --target-update-period N is refused on the command line: the ONLY_WITH
    cases of tests/experiments/test_cli_validation.py.)"""
    with pytest.raises(ValueError, match=r"--target-update-period must be a multiple of "
                                         r"--policy-delay 2"):  # fmt: skip
        TD3Config(**TINY, target_update_period=3, policy_delay=2)
    with pytest.raises(ValueError, match=r"--td-error-max must be > --td-error-min 2.0"):
        DQNConfig(**TINY, prioritized=True, td_error_min=2.0, td_error_max=1.0)


# (DQN and R2D1 raise the weights to β inside their loss: the same flags, the same effect.)
WEIGHTS_OFF = [
    (SACAgent, SACConfig, "Pendulum-v1", {}),
    pytest.param(SACAgent, SACConfig, "Pendulum-v1", RECURRENT, marks=SLOW),
    (TD3Agent, TD3Config, "Pendulum-v1", {}),
]


@pytest.mark.parametrize("agent_cls, cfg_cls, env_id, extra", WEIGHTS_OFF)
def test_importance_weights_off_apart_from_the_priorities(agent_cls, cfg_cls, env_id, extra,
                                                          learnt_batches):  # fmt: skip
    """The seed's use_priority off: sampling by priority with every weight 1, as
    --importance-exponent 0 --importance-exponent-steps 0 (β held at 0) gives."""
    cfg = cfg_cls(**{**TINY, **extra}, prioritized=True, importance_exponent=0.0,
                  importance_exponent_steps=0)  # fmt: skip
    agent = agent_cls(cfg, make_env(env_id, 2, 0))
    learner, replay = _filled(agent, iterations=6)
    batches, update = learnt_batches(agent), jax.jit(agent.replay_update)
    for _ in range(2):  # the second from the priorities the first stored
        learner, replay, _ = update(learner, replay)
        w = batches[-1].is_weight
        assert isinstance(w, jax.Array) and np.all(np.asarray(w) == 1.0)
    assert len(set(np.asarray(replay.priorities).ravel().tolist())) > 2  # not uniform


@pytest.mark.slow
def test_recurrent_sac_weights_its_sequences_by_the_annealed_beta(learnt_batches):
    """Recurrent SAC with --prioritized: after an update has stored unequal priorities, the
    next windows' importance weights are the replay's normalised 1/(N·P(i)) to the power β
    annealed over --importance-exponent-steps, as the feed-forward sampling's."""
    cfg = SACConfig(**{**TINY, **RECURRENT}, prioritized=True, importance_exponent=0.5,
                    importance_exponent_steps=100)  # fmt: skip
    agent = SACAgent(cfg, make_env("Pendulum-v1", 2, 0))
    learner, replay = _filled(agent, iterations=6)
    learner, replay, _ = agent.replay_update(learner, replay)  # unequal priorities now
    batches = learnt_batches(agent)
    _, sub = sample_key(learner.key)
    raw = TraceBatch.from_sample(agent.replay.sample(replay, sub, 8), 1).is_weight
    beta = 0.5 + 0.5 * min(1.0, int(learner.env_steps) / 100)
    assert beta < 1.0 and len(set(np.asarray(raw).tolist())) > 1
    agent.replay_update(learner, replay)
    np.testing.assert_allclose(np.asarray(batches[-1].is_weight), np.asarray(raw) ** beta,
                               rtol=1e-5)  # fmt: skip
