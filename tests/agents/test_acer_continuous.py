"""Continuous ACER (agents/acer/continuous.py): the agent's checks, the Gaussian actor's
action scaling, the learner's wiring of `agents.losses`, microbatch equivalence, the
trust region, a few real iterations, and a subprocess train → resume → evaluate.

The loss maths is tested against NumPy references in tests/losses/test_acer_continuous_losses.py;
here the learner is compared with the losses composed by hand."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import losses
from agents.acer.config import ACERConfig
from agents.acer.continuous import ACERGaussianLearner
from agents.core.learning import TraceBatch
from envs import make_env
from networks import GaussianSDNNetwork
from tests.agent_classes import ACERAgent

SMALL = ACERConfig(
    num_envs=2, trace_len=5, batch_size=4, buffer_size=2 * 5 * 4, hidden=(16,), sdn_samples=3
)
OBS, D = 3, 2


@pytest.fixture(scope="module")
def pendulum():
    return make_env("Pendulum-v1", 2, 0)


def _random_batch(key, T=5, B=4):
    ks = jax.random.split(key, 7)
    return TraceBatch(
        obs=jax.random.normal(ks[0], (T + 1, B, OBS)),
        first=jnp.zeros((T + 1, B), bool),
        action=1.5 * jax.random.normal(ks[1], (T, B, D)),  # some outside [−1, 1]
        mu={
            "mean": 0.3 * jax.random.normal(ks[2], (T, B, D)),
            "log_std": -0.5 + 0.2 * jax.random.normal(ks[3], (T, B, D)),
        },
        reward=jax.random.normal(ks[4], (T, B)),
        discount=jnp.where(jax.random.uniform(ks[5], (T, B)) < 0.2, 0.0, 0.99),
        mask=jnp.where(jax.random.uniform(ks[6], (T, B)) < 0.15, 0.0, 1.0),
        core_state=(),
        is_weight=jnp.ones((B,), jnp.float32),
    )


def _learner(**cfg):
    config = SMALL.replace(**cfg)
    net = GaussianSDNNetwork((OBS,), D, config.hidden, config.initial_log_std)
    learner = ACERGaussianLearner(config, net, D)
    return learner, learner.init(jax.random.PRNGKey(0), jnp.zeros((4, OBS)))


def _with_noise(learner, batch, key):
    T, B, _ = batch.action.shape
    noise = jax.random.normal(key, (T, B, learner.num_samples + 1, D))
    return batch._replace(mu={**batch.mu, "noise": noise}), noise


# --------------------------------------------------------------------------- checks


def test_lstm_is_refused_with_continuous_actions(pendulum):
    with pytest.raises(ValueError, match="--lstm-size applies to discrete ACER only"):
        ACERAgent(SMALL.replace(lstm_size=8), pendulum)


def test_config_rejects_zero_sdn_samples():
    with pytest.raises(ValueError, match="--sdn-samples must be an integer >= 1"):
        SMALL.replace(sdn_samples=0)
    assert ACERConfig().sdn_n == 5 and SMALL.sdn_n == 3
    np.testing.assert_allclose(ACERConfig().initial_log_std, np.log(0.5))


def test_actions_are_clipped_and_scaled_to_the_env_bounds(pendulum):
    agent = ACERAgent(SMALL, pendulum)
    state = agent.init(jax.random.PRNGKey(0))
    low, high = pendulum.spec.action_low, pendulum.spec.action_high
    assert np.all(low == -2.0) and np.all(high == 2.0)
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(256, 3)), jnp.float32)
    params = state.learner.params
    params["params"]["log_std"] = jnp.zeros(1)  # σ = 1: many samples outside [−1, 1]
    out = agent.select_action(params, obs, None, (), jax.random.PRNGKey(1))
    a, env_a = np.asarray(out.action), np.asarray(out.env_action)
    assert np.any(np.abs(a) > 1.0)  # the stored action is the unclipped sample
    want = low + (np.clip(a, -1.0, 1.0) + 1.0) * (high - low) / 2.0
    np.testing.assert_allclose(env_a, want, rtol=1e-6, atol=1e-6)
    mean, log_std = agent.modules.learner.policy(params, obs)
    np.testing.assert_allclose(np.asarray(out.mu["mean"]), np.asarray(mean), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out.mu["log_std"]), np.asarray(log_std), rtol=1e-6)
    greedy, _ = agent.act(True)(params, obs, None, (), jax.random.PRNGKey(2))
    np.testing.assert_allclose(
        np.asarray(greedy), 2.0 * np.clip(np.asarray(mean), -1.0, 1.0), rtol=1e-6, atol=1e-6
    )
    sampled, _ = agent.act(False)(params, obs, None, (), jax.random.PRNGKey(3))
    assert np.all(np.abs(np.asarray(sampled)) <= 2.0)


# --------------------------------------------------------------------------- learner


@pytest.mark.slow
def test_loss_gradient_matches_losses_composition():
    """The learner's gradient equals that of the loss composed directly from agents.losses
    (no trust region): the wiring adds nothing and drops nothing."""
    learner, state = _learner(trust_region=False)
    batch, noise = _with_noise(learner, _random_batch(jax.random.PRNGKey(1)), jax.random.PRNGKey(2))
    cfg, net, n = learner.config, learner.network, learner.num_samples
    T, B, _ = batch.action.shape
    mu = batch.mu

    def direct(params):
        mean, log_std = net.apply(params, batch.obs[:T], method=net.policy)
        log_std = jnp.broadcast_to(log_std, mean.shape)
        std = jnp.exp(log_std)
        u = [jax.lax.stop_gradient(mean + std * noise[:, :, i]) for i in range(n + 1)]
        acts = jnp.stack([batch.action, *u])  # a_t, u_1..u_n, a'
        acts = jnp.concatenate([jnp.clip(acts, -1, 1), jnp.zeros((n + 2, 1, B, D))], axis=1)
        v_all, adv = net.apply(params, batch.obs, acts, method=net.critic)
        v = v_all[:T]
        adv_u = jnp.stack([adv[1 + i, :T] for i in range(n)], axis=-1)
        q = losses.sdn_q_values(v, adv[0, :T], adv_u)
        q_p = losses.sdn_q_values(v, adv[n + 1, :T], adv_u)
        sm, ss = jax.lax.stop_gradient(mean), jax.lax.stop_gradient(log_std)
        log_pi = losses.gaussian_log_prob(batch.action, sm, ss)
        log_mu = losses.gaussian_log_prob(batch.action, mu["mean"], mu["log_std"])
        tg = losses.continuous_retrace_targets(
            q, v, log_pi, log_mu, batch.reward, batch.discount, v_all[T], D, mask_t=batch.mask
        )
        pol = losses.acer_continuous_policy_loss(
            mean, log_std, batch.action, mu["mean"], mu["log_std"], tg.q_opc, v, u[n], q_p,
            c=cfg.c, mask_t=batch.mask,
        )  # fmt: skip
        ent = batch.mask * losses.gaussian_entropy(log_std)
        val = losses.sdn_value_loss(q, v, tg.q_ret, log_pi, log_mu, mask_t=batch.mask)
        return jnp.mean(pol - cfg.entropy_weight * ent + cfg.value_weight * val)

    g_direct = jax.grad(direct)(state.params)
    g_learner, _ = jax.grad(learner.loss, has_aux=True)(
        state.params, batch, T * B, state.avg_params
    )
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), g_direct, g_learner
    )
    # Gradient reaches the policy (mean head, log-std) and the critic (V and A streams).
    for name in ("mean_head", "log_std", "value_head", "adv_head"):
        assert np.any(np.asarray(jax.tree.leaves(g_learner["params"][name])[0]) != 0), name


@pytest.mark.slow
def test_microbatched_update_equals_whole_batch_with_an_active_trust_region():
    """The update's noise is drawn before the batch is split, so a split update is the
    same update."""
    batch = _random_batch(jax.random.PRNGKey(3))
    whole, state = _learner(trust_region=True, trust_region_delta=0.01)
    split, _ = _learner(trust_region=True, trust_region_delta=0.01, microbatch_traces=2)
    state = state._replace(
        avg_params=jax.tree.map(lambda p: p + 0.3 * jnp.sign(p), state.avg_params)
    )
    s1, m1, p1 = jax.jit(whole.update)(state, batch)
    s2, m2, p2 = jax.jit(split.update)(state, batch)
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)  # noqa: E731
    # The advantage stream's bias cancels in A(x, a) − mean_u A(x, u): its gradient is 0 in
    # exact arithmetic, so what it gets is rounding noise of the order of 1e-9, which Adam
    # (ε = 1e-5) turns into a step of lr·|g|/(|g| + ε) that depends on the summation order
    # (an AVX-512 CPU gave 2.8e-7 whole against 2.0e-6 split). It must stay that tiny.
    adv_bias = [s.params["params"]["adv_head"].pop("bias") for s in (s1, s2)]
    for moved in adv_bias:
        assert np.all(np.abs(np.asarray(moved)) < 1e-5)
    jax.tree.map(close, s1.params, s2.params)
    for k in m1:
        close(m1[k], m2[k])
    close(p1, p2)
    assert float(m1["tr_active"]) > 0
    assert not np.array_equal(np.asarray(s1.key), np.asarray(state.key))  # the key moved on


@pytest.mark.slow
def test_trust_region_inactive_when_average_equals_policy():
    on, state = _learner(trust_region=True)
    off, _ = _learner(trust_region=False)
    batch, _ = _with_noise(on, _random_batch(jax.random.PRNGKey(4)), jax.random.PRNGKey(5))
    args = (state.params, batch, 20, state.params)
    g_on, (stats, _) = jax.grad(on.loss, has_aux=True)(*args)
    g_off, _ = jax.grad(off.loss, has_aux=True)(*args)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), g_on, g_off)
    assert float(stats["tr_active"]) == 0.0


def test_agent_iterations_learn_from_fresh_and_replayed_traces(pendulum):
    """The agent's loop runs its on-policy update on the fresh traces and Poisson(3) replay
    updates, and both learn: the critic's V falls toward the returns of Pendulum's traces
    after each of them.

    Pendulum's rewards are ≤ 0 (−16.3 at worst), so the retrace targets of every update are
    well below what the initialised critic says (checked through the updates'
    `q_ret_mean`); a critic that learns from them must lower V(x). Measured at a fixed set
    of Pendulum states, with the params after iteration 0 (one on-policy update on the fresh
    traces, no replay yet), after each later iteration (fresh + replayed) and after a
    replay-only `learn` (the same compiled program, no env step): V falls at each. A sign
    slip in the critic's loss, or rewards lost on the way to the learner, would not make V
    fall every time. Cost: the 4 iterations' programs (compiled anyway) and a few forward
    passes of the critic."""
    agent = ACERAgent(SMALL.replace(replay_ratio=3.0), pendulum, seed=0)
    state = agent.init(jax.random.PRNGKey(0))
    agent.compile(state)
    net = agent.modules.network
    theta = np.random.default_rng(0).uniform(-np.pi, np.pi, 64)
    thetadot = np.random.default_rng(1).uniform(-8.0, 8.0, 64)
    states = jnp.asarray(np.stack([np.cos(theta), np.sin(theta), thetadot], -1), jnp.float32)

    def mean_v(params):  # V(x) does not depend on the candidate action given with it
        v, _ = net.apply(params, states, jnp.zeros((1, 64, 1)), method=net.critic)
        return float(jnp.mean(v))

    values, counts, targets = [mean_v(state.learner.params)], [], []
    for it in range(4):
        state, out = agent.train_iteration(state, it, it * 10)
        counts.append(len(out.metrics) - 1)
        for m in jax.device_get(out.metrics):
            assert set(m) == set(agent.metric_names)
            assert all(np.isfinite(v) for v in m.values()), m
            targets.append(float(m["q_ret_mean"]))
        values.append(mean_v(state.learner.params))
    assert counts[0] == 0 and sum(counts[1:]) > 0
    assert int(state.learner.step) == 4 + sum(counts)
    spec = agent.replay.step_spec
    assert spec["action"].shape == (1,) and spec["action"].dtype == jnp.float32
    assert set(spec["mu"]) == {"mean", "log_std"}

    due = agent.updates_due(4, 40)
    learner, _, replayed = agent.run_replay_updates(state.learner, state.replay, due)  # replay only
    assert len(replayed) == due > 0
    values.append(mean_v(learner.params))
    assert max(targets) < values[0] - 5.0, (targets, values)  # the targets lie well below
    assert np.all(np.diff(values) < 0), values  # V falls at each step toward them


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_train_resume_evaluate(tmp_path):
    from tests.experiments.test_train_smoke import run

    run_dir = tmp_path / "cacer"
    common = [
        "--agent", "acer", "--env", "Pendulum-v1", "--num-envs", "2", "--trace-len", "5",
        "--batch-size", "2", "--buffer-size", "60", "--hidden", "8", "--sdn-samples", "2",
        "--replay-ratio", "1", "--run-dir", str(run_dir), "--no-progress",
        "--eval-episodes", "1",
    ]  # fmt: skip
    run("experiments.train", *common, "--total-steps", "200", "--checkpoint-every", "100")
    config = json.loads((run_dir / "config.json").read_text())
    assert config["agent_config"]["sdn_samples"] == 2
    run("experiments.train", "--resume", str(run_dir), "--total-steps", "300", "--no-progress")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 300 and summary["agent"] == "acer"
    out = tmp_path / "e.json"
    run("experiments.evaluate", str(run_dir), "--episodes", "1", "--out", str(out))
    result = json.loads(out.read_text())
    assert result["episodes"] == 1 and -2000.0 < result["return_mean"] <= 0.0


# The slow tier (issue 67): the fast tier's sharded training run with identical replicas is
# tests/agents/test_parallel.py::test_sharded_agent_trains_and_keeps_replicas_identical.
@pytest.mark.slow
def test_sharded_agent_trains_and_keeps_replicas_identical():
    """On 2 fake devices: each device draws its own SDN and a' noise for its traces
    (folded with its index), gradients are averaged, the replicas stay equal."""
    from jax.sharding import PartitionSpec as P

    from agents.core.parallel import make_mesh

    cfg = SMALL.replace(num_envs=4, batch_size=4, buffer_size=4 * 5 * 3, replay_ratio=2.0)
    agent = ACERAgent(cfg, make_env("Pendulum-v1", 4, 0), mesh=make_mesh(2))
    state = agent.init(jax.random.PRNGKey(0))
    agent.compile(state)
    due = [agent.updates_due(it, it * 20) for it in range(3)]
    for it in range(3):
        state, out = agent.train_iteration(state, it, it * 20)
        metrics = jax.device_get(out.metrics)
        assert len(metrics) == 1 + due[it]
        assert all(np.isfinite(v) for m in metrics for v in m.values())
    assert sum(due) > 0
    for leaf in jax.tree.leaves((state.learner.params, state.learner.avg_params)):
        shards = [np.asarray(s.data) for s in leaf.addressable_shards]
        for s in shards[1:]:
            np.testing.assert_array_equal(shards[0], s)
    assert state.replay.frames.sharding.spec == P("data")
