"""No jitted training program is traced again after the first iteration: every program is
compiled ahead of time once, and later iterations (Python ints for the counters, new
replay contents, different update counts) reuse it."""

import jax
import pytest

from agents.acer.agent import ACERAgent
from agents.acer.config import ACERConfig
from agents.core.parallel import make_mesh
from agents.reactor.agent import ReactorAgent
from agents.reactor.config import ReactorConfig
from envs import make_env


def _run(agent, iterations=5):
    state = agent.init(jax.random.PRNGKey(0))
    agent.compile(state)
    traced = {name: p.traces for name, p in agent.programs.items()}
    assert traced == dict.fromkeys(agent.programs, 1), traced
    updates = []
    try:
        for it in range(iterations):
            state, out = agent.train_iteration(state, it, it * agent.steps_per_iteration)
            updates.append(len(jax.device_get(out).metrics))
    finally:
        agent.close()
    assert {name: p.traces for name, p in agent.programs.items()} == traced
    return updates


@pytest.mark.parametrize("devices", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_acer_programs_trace_once(devices):
    cfg = ACERConfig(num_envs=4, trace_len=5, batch_size=4, buffer_size=400, replay_ratio=2.0)
    agent = ACERAgent(cfg, make_env("CartPole-v1", 4, 0), mesh=make_mesh(devices))
    updates = _run(agent)
    assert len(set(updates[1:])) > 1 or sum(updates) > 5  # Poisson counts vary: no retrace


@pytest.mark.slow
def test_reactor_programs_trace_once():
    cfg = ReactorConfig(
        num_envs=4, trace_len=8, batch_size=4, buffer_size=4 * 8 * 4, start_train_at=0,
        num_atoms=11, hidden=(16,), torso_out=16, lstm_size=8, env_steps_per_update=8.0,
        decoupled=False,
    )  # fmt: skip
    updates = _run(ReactorAgent(cfg, make_env("CartPole-v1", 4, 0)))
    assert updates == [0, 4, 4, 4, 4]


def test_data_checks_raise_on_a_bad_action_inside_a_program():
    """--debug: losses traced inside a Program check their data (here a_t = A)."""
    import jax.numpy as jnp
    from jax.experimental import checkify

    from agents import losses
    from agents.core.programs import Program, enable_data_checks

    T, B, A = 3, 2, 4

    def targets(a, axis_name=None):
        q = jnp.zeros((T, B, A))
        pi = jnp.full((T, B, A), 1.0 / A)
        r, d = jnp.zeros((T, B)), jnp.full((T, B), 0.9)
        return losses.retrace_targets(q, pi, pi, a, r, d, jnp.zeros(B))

    enable_data_checks()
    try:
        program = Program(targets)
    finally:
        enable_data_checks(False)
    good = jnp.zeros((T, B), jnp.int32)
    assert program(good).shape == (T, B)
    with pytest.raises(checkify.JaxRuntimeError, match="a_t"):
        program(good.at[1, 1].set(A))
    assert Program(targets)(good.at[1, 1].set(A)).shape == (T, B)  # off: no check, no error
