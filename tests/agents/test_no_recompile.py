"""No jitted training program is traced again after the first iteration: every program is
compiled ahead of time once, and later iterations (Python ints for the counters, new
replay contents, different update counts) reuse it."""

import jax
import pytest

from agents.acer.config import ACERConfig
from agents.core.parallel import make_mesh
from agents.reactor.config import ReactorConfig
from envs import make_env
from tests.agent_classes import ACERAgent, ReactorAgent


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
    from engine.programs import Program, enable_data_checks

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


def _compiles_while(fn):
    """`fn()` and the lowerings and compilations JAX reported while it ran (its own compile
    events, which fire whether or not the persistent compilation cache holds the program:
    lowering happens before the cache is consulted)."""
    from jax import monitoring

    events = []

    def listen(name, secs, **kwargs):
        if "mlir_module" in name or "backend_compile" in name:
            events.append(name)

    monitoring.register_event_duration_secs_listener(listen)
    try:
        return fn(), events
    finally:
        monitoring.unregister_event_duration_listener(listen)


SECOND_AGENT_CASES = {
    "pqn": {"num_envs": 4, "trace_len": 8, "num_minibatches": 2, "epochs": 1, "hidden": (16,)},
    "ppo": {"num_envs": 4, "trace_len": 8, "num_minibatches": 2, "epochs": 1, "hidden": (16,)},
    "dqn": {"num_envs": 2, "batch_size": 8, "start_train_at": 0, "hidden": (16,)},
}


@pytest.mark.parametrize("agent_name", sorted(SECOND_AGENT_CASES))
def test_a_second_agent_with_the_same_config_compiles_nothing(agent_name):
    """A second agent built with the same config, seed and env task in one process (a
    resume, an evaluation, the next test) lowers and compiles nothing: it gets the first
    agent's chunk program, traced once, and trains exactly as the first did. Counted by
    JAX's own compile events, which fire whether or not the persistent compilation cache
    holds the program (lowering happens before the cache is consulted)."""
    import numpy as np

    from engine.common import make_agent

    def train(seed=0):
        agent = make_agent(
            agent_name, "gymnax/CartPole-v1", seed=seed, **SECOND_AGENT_CASES[agent_name]
        )
        state = agent.init(jax.random.PRNGKey(seed))
        agent.compile(state)
        state, out = agent.train_chunk(state, 0, 0, 3)
        return agent, jax.device_get((state, out))

    first, (state, out) = train()
    (second, (state2, out2)), events = _compiles_while(train)
    assert events == [], events
    assert second.programs["chunk"] is first.programs["chunk"]
    assert second.programs["chunk"].traces == 1
    jax.tree.map(np.testing.assert_array_equal, (state2, out2), (state, out))
    assert out.updates.sum() > 0  # it learnt: the shared program is not an idle one

    # An env that calls out to its own pool (envpool) is not shared. Another seed is: nothing
    # the programs of an agent made of parts (engine/driver.py) compute depends on the
    # seed except through the keys in their state.
    case = SECOND_AGENT_CASES[agent_name]
    other = make_agent(agent_name, "gymnax/CartPole-v1", seed=1, **case)
    pool = make_agent(agent_name, "CartPole-v1", **case)
    try:  # the program objects, neither traced again
        assert other._chunk_program() is first.programs["chunk"]
        assert pool._chunk_program() is not first.programs["chunk"]
    finally:
        pool.close()


def test_a_second_host_driven_agent_traces_and_compiles_nothing():
    """The host-driven path shares its programs too (engine/driver.py `shared`): a second
    Reactor (decoupled by default: its rollout and its learning are separate programs) with
    the same config on the same gymnax task gets the first one's rollout and learning
    programs and its learner's init program, traced once (their `traces`) and lowered and
    compiled once (JAX's compile events), and trains exactly as the first did. On envpool
    (each agent's own pool in its rollout) two equal agents still share their learning
    programs, which see no env."""
    import numpy as np

    from engine.common import make_agent

    case = dict(num_envs=2, trace_len=4, batch_size=2, buffer_size=64, lstm_size=8,
                start_train_at=0)  # fmt: skip

    def train(env_id="gymnax/CartPole-v1"):
        agent = make_agent("reactor", env_id, seed=0, **case)
        assert agent.host_driven is not None
        state = agent.init(jax.random.PRNGKey(0), jit=True)  # as the runner builds it
        agent.compile(state)
        try:
            for i in range(3):
                state, _ = agent.train_iteration(state, i, i * 8)
        finally:
            agent.close()  # the actor thread
        return agent, jax.device_get(state.learner)

    first, learner = train()
    (second, learner2), events = _compiles_while(train)
    assert events == [], events
    assert second.programs == first.programs
    assert all(p.traces == 1 for p in first.programs.values()), first.programs
    jax.tree.map(np.testing.assert_array_equal, learner2, learner)
    assert int(learner.step) > 0  # it learnt: the shared programs are not idle ones

    pools = [make_agent("reactor", "CartPole-v1", seed=0, **case) for _ in range(2)]
    try:
        (a, b) = (pool.programs for pool in pools)
        assert a["rollout"] is not b["rollout"]
        assert {k: v for k, v in a.items() if k != "rollout"} == {
            k: v for k, v in b.items() if k != "rollout"
        }
    finally:
        for pool in pools:
            pool.close()
