"""A population member's hyper-parameters reach its learner as an argument.

`update(state, batch, axis_name, hparams)` with traced `hparams` must equal the update of a
learner built from a config holding those values: the learner reads every tunable field
through `agents.core.learning.Hyper`, the learning rate included (its optimizer is built from
them). Each case fails if the learner ignores one of the values (checked by also comparing
against the base config's update, which must differ)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.acer.config import ACERConfig
from agents.acer.learner import ACERLearner
from agents.core.learning import Hyper, TraceBatch
from agents.dqn.config import DQNConfig
from agents.dqn.learner import DQNLearner, dqn_optimizer
from networks import ACERNetwork
from tests.agents.test_dqn import LinearQ


def test_hyper_reads_given_values_first_then_the_config():
    cfg = ACERConfig(lr=1e-3, entropy_weight=0.01)
    hp = Hyper(cfg, {"lr": jnp.float32(5e-4)})
    assert float(hp.lr) == pytest.approx(5e-4)
    assert hp.entropy_weight == 0.01 and hp.trace_len == cfg.trace_len
    assert Hyper(cfg).lr == 1e-3 and Hyper(cfg, None).values == {}
    with pytest.raises(AttributeError):
        _ = hp.no_such_field


def _acer_batch(key, T=5, B=4, A=3, D=4):
    ks = jax.random.split(key, 6)
    return TraceBatch(
        obs=jax.random.normal(ks[1], (T + 1, B, D)),
        first=jnp.zeros((T + 1, B), bool),
        action=jax.random.randint(ks[2], (T, B), 0, A),
        mu=jax.nn.softmax(jax.random.normal(ks[0], (T, B, A))),
        reward=jax.random.normal(ks[3], (T, B)),
        discount=jnp.where(jax.random.uniform(ks[4], (T, B)) < 0.2, 0.0, 0.99),
        mask=jnp.ones((T, B)),
        core_state=(),
        is_weight=jnp.ones((B,), jnp.float32),
    )


def _acer(**values):
    config = ACERConfig(
        num_envs=4, trace_len=5, batch_size=4, buffer_size=80, hidden=(16,), **values
    )
    learner = ACERLearner(config, ACERNetwork((4,), 3, config.hidden))
    return learner, learner.init(jax.random.PRNGKey(0), jnp.zeros((4, 4)))


def _dqn(**values):
    config = DQNConfig(
        num_envs=1, trace_len=2, n_step=1, batch_size=2, buffer_size=64, hidden=(4,), **values
    )
    learner = DQNLearner(config, LinearQ(), dqn_optimizer)
    return learner, learner.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))


def _dqn_batch(key):
    rng = np.random.default_rng(int(jax.random.randint(key, (), 0, 1000)))
    return TraceBatch(
        obs=jnp.asarray(rng.normal(size=(3, 2, 3)), jnp.float32),
        first=jnp.zeros((3, 2), bool),
        action=jnp.asarray(rng.integers(0, 2, size=(2, 2)), jnp.int32),
        mu=(),
        reward=jnp.asarray(rng.normal(size=(2, 2)), jnp.float32),
        discount=jnp.full((2, 2), 0.9),
        mask=jnp.ones((2, 2)),
        core_state=(),
        is_weight=jnp.ones((2,)),
    )


def _continuous(agent_cls, config_cls):
    def make(**values):
        from envs import make_env

        config = config_cls(
            num_envs=2, trace_len=4, batch_size=8, buffer_size=48, hidden=(8,), **values
        )
        learner = agent_cls(config, make_env("Pendulum-v1", 2, 0)).modules.learner
        return learner, learner.init(jax.random.PRNGKey(0), jnp.zeros((2, 3)))

    return make


def _continuous_batch(key, B=8):
    rng = np.random.default_rng(int(jax.random.randint(key, (), 0, 1000)))
    return TraceBatch(
        obs=jnp.asarray(rng.normal(size=(2, B, 3)), jnp.float32),
        first=jnp.zeros((2, B), bool),
        action=jnp.asarray(rng.uniform(-1, 1, size=(1, B, 1)), jnp.float32),
        mu=(),
        reward=jnp.asarray(rng.normal(size=(1, B)), jnp.float32),
        discount=jnp.full((1, B), 0.9),
        mask=jnp.ones((1, B)),
        core_state=(),
        is_weight=jnp.ones((B,)),
    )


def _sac(**values):
    from agents.sac.config import SACConfig
    from tests.agent_classes import SACAgent

    return _continuous(SACAgent, SACConfig)(**values)


def _td3(**values):
    from agents.td3.config import TD3Config
    from tests.agent_classes import TD3Agent

    return _continuous(TD3Agent, TD3Config)(**values)


# Every learner-side field of each agent's `tunable` (discount reaches the learner through
# the traces the population's rollout writes, tested in tests/agents/test_population.py).
CASES = {
    "acer": (_acer, _acer_batch, {"lr": 3e-3, "entropy_weight": 0.05, "tau": 0.1}),
    "dqn": (_dqn, _dqn_batch, {"lr": 0.05}),
    "sac": (_sac, _continuous_batch,
            {"actor_lr": 3e-2, "critic_lr": 3e-2, "tau": 0.5, "alpha_lr": 3e-1}),
    "td3": (_td3, _continuous_batch,
            {"actor_lr": 3e-2, "critic_lr": 3e-2, "tau": 0.5, "target_noise": 1.0}),
}  # fmt: skip


@pytest.mark.parametrize(
    "name, field",
    [
        pytest.param(name, field, marks=[pytest.mark.slow] if slow else [])
        for name in sorted(CASES)
        for field, slow in (("all", False), ("each", name != "dqn"))  # dqn: one field
    ],
)
def test_update_with_hparams_equals_a_config_with_those_values(name, field):
    make, make_batch, values = CASES[name]
    varied = [values] if field == "all" else [{k: v} for k, v in values.items()]
    for hp in varied:
        base, state = make()
        want_learner, want_state = make(**hp)
        batches = [make_batch(jax.random.PRNGKey(k)) for k in range(3)]
        traced = {k: jnp.float32(v) for k, v in hp.items()}
        update = jax.jit(base.update, static_argnums=2)
        # the two references as programs of their own (op by op they compiled ~300 small
        # programs per case)
        want_update, plain_update = jax.jit(want_learner.update), jax.jit(base.update)
        got, plain = state, state
        for batch in batches:
            got, got_metrics, got_prio = update(got, batch, None, traced)
            want_state, want_metrics, want_prio = want_update(want_state, batch)
            plain, *_ = plain_update(plain, batch)
        leaves = zip(jax.tree.leaves(got), jax.tree.leaves(want_state), strict=True)
        for g, w in leaves:
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6)
        for k in want_metrics:
            np.testing.assert_allclose(got_metrics[k], want_metrics[k], rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(got_prio, want_prio, rtol=2e-5, atol=1e-6)
        differs = [
            not np.allclose(np.asarray(g), np.asarray(p))
            for g, p in zip(jax.tree.leaves(got), jax.tree.leaves(plain), strict=True)
        ]
        assert any(differs), f"{name}: {sorted(hp)} had no effect on the update"


def test_reset_params_then_update_use_the_members_rate():
    """CEM's restart of a member (`reset_params` with its hyper-parameters), then its next
    step: the same as a learner whose config holds the member's rate."""
    base, state = _dqn()
    other, _ = _dqn(lr=0.05)
    hp = {"lr": jnp.float32(0.05)}
    batch = _dqn_batch(jax.random.PRNGKey(0))
    reset = base.reset_params(state, state.params, hp)
    got, *_ = base.update(reset, batch, None, hp)
    want, *_ = other.update(other.reset_params(state, state.params), batch)
    plain, *_ = base.update(base.reset_params(state, state.params), batch)
    np.testing.assert_allclose(np.asarray(got.params), np.asarray(want.params), rtol=1e-6)
    assert not np.allclose(np.asarray(got.params), np.asarray(plain.params))
