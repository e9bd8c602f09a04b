"""ACER agent: config validation, rollout bookkeeping, learner maths and equivalences."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import losses
from agents.acer.config import ACERConfig
from agents.acer.learner import ACERLearner
from agents.core.actors import categorical_actor
from agents.core.learning import TraceBatch
from engine.rollout import initial_actor_state, make_host_rollout, make_xla_rollout
from envs import make_env
from networks import ACERNetwork
from tests.agent_classes import ACERAgent

SMALL = ACERConfig(num_envs=4, trace_len=5, batch_size=4, buffer_size=4 * 5 * 4, hidden=(16,))


@pytest.mark.parametrize(
    "change, match",
    [
        ({"discount": 0.0}, "--discount must be in"),
        ({"num_envs": 0}, "--num-envs must be an integer >= 1"),
        ({"buffer_size": 10}, "--buffer-size must be at least 3 traces per env"),
        ({"tau": 1.0}, "--tau must be in"),
        ({"replay_ratio": -1.0}, "--replay-ratio must be"),
        ({"microbatch_traces": 3}, "divisible by --microbatch-traces 3"),
        ({"replay_ratio": float("inf")}, "--replay-ratio must be finite"),
        ({"retrace_lambda": 2.0}, "--retrace-lambda must be in"),
    ],
)
def test_config_rejects_bad_values(change, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(SMALL, **change)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"sdn_samples": 5}, "--sdn-samples applies to continuous actions only; CartPole-v1"),
        ({"log_std_init": 0.0}, "--log-std-init applies to continuous actions only"),
    ],
)
def test_continuous_only_flags_are_refused_with_discrete_actions(change, match):
    env = make_env("CartPole-v1", 2, 0)
    with pytest.raises(ValueError, match=match):
        ACERAgent(SMALL.replace(num_envs=2, **change), env)


def _random_batch(key, T=5, B=4, A=3, D=4):
    ks = jax.random.split(key, 6)
    mu = jax.nn.softmax(jax.random.normal(ks[0], (T, B, A)))
    return TraceBatch(
        obs=jax.random.normal(ks[1], (T + 1, B, D)),
        first=jnp.zeros((T + 1, B), bool),
        action=jax.random.randint(ks[2], (T, B), 0, A),
        mu=mu,
        reward=jax.random.normal(ks[3], (T, B)),
        discount=jnp.where(jax.random.uniform(ks[4], (T, B)) < 0.2, 0.0, 0.99),
        mask=jnp.where(jax.random.uniform(ks[5], (T, B)) < 0.1, 0.0, 1.0),
        core_state=(),
        is_weight=jnp.ones((B,), jnp.float32),
    )


def _learner(**cfg):
    config = SMALL.replace(**cfg)
    net = ACERNetwork((4,), 3, config.hidden)
    learner = ACERLearner(config, net)
    state = learner.init(jax.random.PRNGKey(0), jnp.zeros((4, 4)))
    return learner, state


@pytest.mark.slow
def test_microbatched_update_equals_whole_batch():
    batch = _random_batch(jax.random.PRNGKey(1))
    whole, state = _learner(trust_region=True)
    split, _ = _learner(trust_region=True, microbatch_traces=2)
    # Move the average away from the params so the trust region is active.
    state = state._replace(
        avg_params=jax.tree.map(lambda p: p + 0.3 * jnp.sign(p), state.avg_params)
    )
    s1, m1, p1 = jax.jit(whole.update)(state, batch)
    s2, m2, p2 = jax.jit(split.update)(state, batch)
    chex_close = lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)  # noqa: E731
    jax.tree.map(chex_close, s1.params, s2.params)
    for k in m1:
        chex_close(m1[k], m2[k])
    chex_close(p1, p2)
    assert float(m1["tr_active"]) > 0


@pytest.mark.slow
def test_loss_gradient_matches_losses_composition():
    """The learner's gradient equals the gradient of the loss built directly from
    agents.losses (no trust region), so the wiring adds nothing and drops nothing."""
    learner, state = _learner(trust_region=False)
    batch = _random_batch(jax.random.PRNGKey(2))
    cfg = learner.config
    T, B = batch.action.shape

    def direct(params):
        logits, q = learner.network.apply(params, batch.obs)
        pi = jax.nn.softmax(logits)
        boot = jnp.sum(pi[T] * q[T], -1)
        q_ret = losses.retrace_targets(
            q[:T], pi[:T], batch.mu, batch.action, batch.reward, batch.discount, boot,
            mask_t=batch.mask,
        )  # fmt: skip
        pol = losses.acer_policy_loss(
            logits[:T], q[:T], batch.mu, batch.action, q_ret, c=cfg.c, mask_t=batch.mask
        )
        ent = batch.mask * losses.entropy(logits[:T])
        val = losses.acer_value_loss(q[:T], batch.action, q_ret, mask_t=batch.mask)
        return jnp.mean(pol - cfg.entropy_weight * ent + cfg.value_weight * val)

    g_direct = jax.grad(direct)(state.params)
    g_learner, _ = jax.grad(learner.loss, has_aux=True)(
        state.params, batch, T * B, state.avg_params
    )
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), g_direct, g_learner
    )


@pytest.mark.slow
def test_trust_region_inactive_when_average_equals_policy():
    """k = π − π_avg = 0, so the projected gradient is the plain one (ACER eq. 13)."""
    on, state = _learner(trust_region=True)
    off, _ = _learner(trust_region=False)
    batch = _random_batch(jax.random.PRNGKey(3))
    args = (state.params, batch, 20, state.params)
    g_on, m_on = jax.grad(on.loss, has_aux=True)(*args)
    g_off, _ = jax.grad(off.loss, has_aux=True)(*args)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), g_on, g_off)
    assert float(m_on[0]["tr_active"]) == 0.0


def test_polyak_average_update():
    learner, state = _learner(tau=0.9)
    new, _, _ = jax.jit(learner.update)(state, _random_batch(jax.random.PRNGKey(4)))
    expected = jax.tree.map(lambda a, p: 0.9 * a + 0.1 * p, state.avg_params, new.params)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8),
        new.avg_params,
        expected,
    )
    assert int(new.step) == 1


def test_rollout_fields_follow_the_trace_convention():
    """discount = γ(1 − terminated_{t+1}), mask = 1 − first_{t+1}; truncation keeps γ."""
    env = make_env("CartPole-v1", 3, 0, max_episode_steps=7)
    net = ACERNetwork((4,), 2, (8,))
    from agents.acer.agent import policy_logits

    select, _ = categorical_actor(lambda *a: policy_logits(net, False, *a))
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((3, 4)))
    rollout = jax.jit(make_xla_rollout(env, select, 30, 0.9))
    actor = initial_actor_state(env, (), jax.random.PRNGKey(1))
    _, traj = rollout(params, actor)
    s = jax.device_get(traj.steps)
    first_next = np.concatenate([s["first"][1:], np.asarray(traj.last_first)[None]])
    np.testing.assert_array_equal(s["mask"], 1.0 - first_next)
    assert s["first"][0].all()
    # A random CartPole policy cannot fail within 7 steps, so every episode end here is the
    # 7-step time limit: a truncation, which keeps discount = γ (no bootstrap cut) at the
    # step that ends the episode; the step after it is the masked auto-reset step.
    ends = np.argwhere(s["mask"][1:] == 0)  # step t ends an episode iff step t+1 is masked
    assert len(ends) >= 3
    for t, b in ends:
        assert s["discount"][t, b] == np.float32(0.9), (t, b)
    np.testing.assert_array_equal(np.diff(np.argwhere(s["first"][:, 0])[:, 0]), 8)
    assert set(np.unique(s["discount"])) <= {0.0, np.float32(0.9)}
    # rewards of the fake auto-reset transitions are 0
    assert (s["reward"][s["mask"] == 0] == 0).all()


def test_xla_and_host_rollouts_agree():
    net = ACERNetwork((4,), 2, (8,))
    from agents.acer.agent import policy_logits

    select, _ = categorical_actor(lambda *a: policy_logits(net, False, *a))
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((2, 4)))
    outs = []
    for maker in (make_xla_rollout, make_host_rollout):
        env = make_env("CartPole-v1", 2, 5, max_episode_steps=9)
        fn = maker(env, select, 25, 0.99)
        fn = jax.jit(fn) if maker is make_xla_rollout else fn
        use_xla = maker is make_xla_rollout
        actor = initial_actor_state(env, (), jax.random.PRNGKey(7), use_xla=use_xla)
        outs.append(jax.device_get(fn(params, actor)[1]))
    jax.tree.map(np.testing.assert_array_equal, outs[0].steps, outs[1].steps)
    np.testing.assert_array_equal(outs[0].obs, outs[1].obs)
    np.testing.assert_array_equal(outs[0].finished_return, outs[1].finished_return)


def test_agent_iterations_fill_replay_and_run_replay_updates():
    env = make_env("CartPole-v1", 4, 0)
    agent = ACERAgent(SMALL.replace(replay_ratio=3.0), env, seed=0)
    state = agent.init(jax.random.PRNGKey(0))
    agent.compile(state)
    counts = []
    for it in range(4):
        state, out = agent.train_iteration(state, it, it * 20)
        counts.append(len(out.metrics) - 1)
    assert counts[0] == 0  # nothing sampleable before the second add
    assert sum(counts[1:]) > 0
    assert int(state.learner.step) == 4 + sum(counts)
    assert int(state.replay.count) == 4
    # Poisson draws are a pure function of (seed, iteration): resume-safe.
    assert [agent.updates_due(i, i * 20) for i in range(4)] == counts


def test_replay_draw_shared_is_one_poisson_schedule_for_every_seed():
    """--replay-draw seed: each seed its own Poisson(replay_ratio) counts; shared: the same
    counts for every seed, still Poisson (mean and variance = the ratio)."""
    env = make_env("CartPole-v1", 4, 0)
    ratio, n = 3.0, 2000

    def schedule(seed, draw):
        agent = ACERAgent(SMALL.replace(replay_ratio=ratio, replay_draw=draw), env, seed=seed)
        return np.array([agent.updates_due(i, i * 20) for i in range(1, n + 1)])

    own = [schedule(s, "seed") for s in (0, 1)]
    shared = [schedule(s, "shared") for s in (0, 1)]
    assert (own[0] != own[1]).any()
    np.testing.assert_array_equal(shared[0], shared[1])
    assert (shared[0] != own[0]).any()
    for x in (own[0], shared[0]):  # standard errors: 0.04 (mean), about 0.1 (variance)
        assert abs(x.mean() - ratio) < 0.2 and abs(x.var() - ratio) < 0.6
    env.close()
