"""Reactor: learner wiring, data-parallel equivalence, target updates, acting modes, CLI."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from agents import losses
from agents.core.learning import TraceBatch
from agents.reactor.config import ReactorConfig
from agents.reactor.learner import ReactorLearner
from envs import make_env
from networks import ReactorNetwork
from tests.agent_classes import ReactorAgent

ROOT = Path(__file__).resolve().parents[2]
T, B, A, D = 5, 4, 3, 4


def _learner(**cfg):
    config = ReactorConfig(
        num_envs=4, trace_len=T, batch_size=B, buffer_size=4 * T * 3, num_atoms=11,
        hidden=(16,), torso_out=16, lstm_size=8, adam_eps=1.0, **cfg,
    )  # fmt: skip
    net = ReactorNetwork((D,), A, num_atoms=11, hidden=(16,), torso_out=16, lstm_size=8)
    learner = ReactorLearner(config, net)
    return learner, learner.init(jax.random.PRNGKey(0), jnp.zeros((B, D)))


def _batch(seed=1):
    rng = np.random.default_rng(seed)
    first = rng.random((T + 1, B)) < 0.2
    first[0] = True
    mu = rng.dirichlet(np.ones(A), size=(T, B)).astype(np.float32)
    net = ReactorNetwork((D,), A, num_atoms=11, hidden=(16,), torso_out=16, lstm_size=8)
    return TraceBatch(
        obs=jnp.asarray(rng.normal(size=(T + 1, B, D)), jnp.float32),
        first=jnp.asarray(first),
        action=jnp.asarray(rng.integers(0, A, (T, B)), jnp.int32),
        mu=jnp.asarray(mu),
        reward=jnp.asarray(rng.normal(size=(T, B)), jnp.float32),
        discount=jnp.asarray(np.where(rng.random((T, B)) < 0.2, 0.0, 0.9), jnp.float32),
        mask=jnp.asarray((~first[1:]).astype(np.float32)),
        core_state=net.initial_state(B),
        is_weight=jnp.asarray(rng.uniform(0.2, 1.0, B), jnp.float32),
    )


@pytest.mark.slow
@pytest.mark.parametrize("distributional", [True, False])
def test_loss_is_the_composition_of_agents_losses(distributional):
    learner, state = _learner(distributional=distributional)
    batch = _batch()
    cfg, net = learner.config, learner.network

    def direct(params):
        out, _ = net.apply(params, batch.obs, batch.first, batch.core_state)
        tgt, _ = net.apply(state.target_params, batch.obs, batch.first, batch.core_state)
        pi = jax.lax.stop_gradient(out.policy_probs)
        a, m = batch.action, batch.mask
        if distributional:
            boot = jnp.einsum("ba,bak->bk", pi[T], tgt.q_probs[T])
            target = losses.distributional_retrace_targets(
                tgt.q_probs[:T], pi[:T], batch.mu, a, batch.reward, batch.discount, boot,
                net.atoms, mask_t=m,
            )  # fmt: skip
            logits_a = jnp.take_along_axis(out.q_logits[:T], a[..., None, None], 2)[:, :, 0]
            critic = losses.categorical_cross_entropy(target, logits_a, mask_t=m)
            ret = jnp.einsum("tbk,k->tb", target, net.atoms)
        else:
            boot = (pi[T] * tgt.q_values[T]).sum(-1)
            ret = losses.retrace_targets(
                tgt.q_values[:T], pi[:T], batch.mu, a, batch.reward, batch.discount, boot,
                mask_t=m,
            )  # fmt: skip
            critic = losses.acer_value_loss(out.q_values[:T], a, ret, mask_t=m)
        mu_a = jnp.take_along_axis(batch.mu, a[..., None], -1)[..., 0]
        actor = losses.beta_loo_policy_loss(
            out.policy_logits[:T], out.q_values[:T], a, mu_a, ret, mask_t=m
        )
        ent = m * losses.entropy(out.policy_logits[:T])
        per_step = cfg.value_weight * critic + actor - cfg.entropy_weight * ent
        return jnp.mean(batch.is_weight[None] * per_step)

    g_direct = jax.grad(direct)(state.params)
    g_learner, _ = jax.grad(learner.loss, has_aux=True)(
        state.params, batch, T * B, state.target_params
    )
    jax.tree.map(
        lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6), g_direct, g_learner
    )


@pytest.mark.slow
def test_target_network_refreshes_every_period():
    learner, state = _learner(target_update_period=3)
    update = jax.jit(learner.update)
    batch = _batch()
    first_target = state.target_params
    for step in range(1, 7):
        state, _, prio = update(state, batch)
        same = jax.tree.map(lambda a, b: bool(jnp.all(a == b)), state.target_params, state.params)
        assert all(jax.tree.leaves(same)) == (step % 3 == 0), step
        if step < 3:
            jax.tree.map(np.testing.assert_array_equal, state.target_params, first_target)
    assert prio.shape == (B,) and bool(jnp.all(prio >= 0))


# The slow tier (issue 67). The fast tier's test of sharded gradient averaging (the same
# gradient_step) is tests/agents/test_parallel.py::test_sharded_update_equals_single_device,
# of per-row outputs (priorities) kept per row
# tests/agents/test_sac.py::test_sharded_td3_update_keeps_each_rows_td.
@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
def test_sharded_learner_update_equals_single_device(n):
    learner, state = _learner()
    batch = _batch()
    s1, m1, p1 = jax.jit(learner.update)(state, batch)
    mesh = Mesh(np.array(jax.devices()[:n]), ("data",))
    spec = TraceBatch(
        obs=P(None, "data"), first=P(None, "data"), action=P(None, "data"),
        mu=P(None, "data"), reward=P(None, "data"), discount=P(None, "data"),
        mask=P(None, "data"), core_state=P("data"), is_weight=P("data"),
    )  # fmt: skip
    sharded = jax.jit(
        jax.shard_map(
            lambda s, b: learner.update(s, b, axis_name="data"),
            mesh=mesh,
            in_specs=(P(), spec),
            out_specs=(P(), P(), P("data")),
        )
    )
    sn, mn, pn = sharded(state, batch)
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)  # noqa: E731
    jax.tree.map(close, s1.params, sn.params)
    jax.tree.map(close, m1, mn)
    close(p1, pn)


@pytest.mark.slow
@pytest.mark.parametrize("decoupled", [False, True])
def test_agent_runs_in_both_acting_modes(decoupled):
    cfg = ReactorConfig(
        num_envs=4, trace_len=8, batch_size=4, buffer_size=4 * 8 * 4, start_train_at=0,
        num_atoms=11, hidden=(16,), torso_out=16, lstm_size=8, env_steps_per_update=8.0,
        decoupled=decoupled,
    )  # fmt: skip
    agent = ReactorAgent(cfg, make_env("CartPole-v1", 4, 0))
    state = agent.init(jax.random.PRNGKey(0))
    agent.compile(state)
    counts = []
    try:
        for it in range(4):
            state, out = agent.train_iteration(state, it, it * 32)
            counts.append(len(out.metrics))
    finally:
        agent.close()
    assert counts == [0, 4, 4, 4]  # 32 env steps per iteration / 8 per update
    assert int(state.learner.step) == 12
    assert int(agent.replay.num_valid(state.replay)) > 0


@pytest.mark.slow
def test_microbatched_update_equals_whole_batch():
    whole, state = _learner()
    split, _ = _learner(microbatch_traces=1)
    batch = _batch(3)
    s1, m1, p1 = jax.jit(whole.update)(state, batch)
    s2, m2, p2 = jax.jit(split.update)(state, batch)
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)  # noqa: E731
    jax.tree.map(close, s1.params, s2.params)
    jax.tree.map(close, m1, m2)
    close(p1, p2)


def test_annealed_learning_rate_reaches_zero_at_anneal_steps():
    """--anneal-steps S: the learning rate at update k is lr·(1 − k/U), U = the updates made by
    env step S, (S − start_train_at) / env_steps_per_update, and 0 from U on; constant without
    it. Checked on Adam's step from zero moments at count k (b1 = 0, so m̂ = g, and
    v̂ = (1 − b2)·g² / (1 − b2^(k+1)))."""
    g = np.array([1.0, -2.0, 0.5])

    def adam_step(learner, k):
        state = learner.optimizer.init(jnp.zeros(3))
        state = jax.tree.map(  # both counts (Adam's and the schedule's) at k
            lambda x: jnp.asarray(k, x.dtype) if x.ndim == 0 and x.dtype == jnp.int32 else x,
            state,
        )
        return np.asarray(learner.optimizer.update(jnp.asarray(g, jnp.float32), state)[0])

    def expected(lr, k):
        v_hat = (1.0 - 0.999) * g**2 / (1.0 - 0.999 ** (k + 1))
        return -lr * g / (np.sqrt(v_hat) + 1e-6)

    cfg = ReactorConfig(lr=1e-3, anneal_steps=10_000, start_train_at=2_000,
                        env_steps_per_update=8.0)  # fmt: skip
    annealed, constant = ReactorLearner(cfg, None), ReactorLearner(ReactorConfig(lr=1e-3), None)
    for k in (0, 1, 250, 999, 1_000, 5_000):
        lr_k = 1e-3 * max(0.0, 1.0 - k / 1_000)  # U = (10,000 − 2,000) / 8
        np.testing.assert_allclose(adam_step(annealed, k), expected(lr_k, k), rtol=1e-4, atol=1e-12)
        np.testing.assert_allclose(adam_step(constant, k), expected(1e-3, k), rtol=1e-4)


def test_anneal_steps_must_not_be_negative():
    with pytest.raises(ValueError, match="--anneal-steps must be >= 0"):
        ReactorConfig(anneal_steps=-1)
