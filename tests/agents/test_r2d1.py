"""R2D1: burn-in without gradients, the stored state and previous action/reward inputs of the
unroll, the per-sequence priority mix (tests/agents/test_dqn.py has its NumPy check), and
one subprocess train → resume → evaluate on the partially observed CartPole.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents.core.learning import TraceBatch
from agents.r2d1.config import R2D1Config
from agents.r2d1.learner import r2d1_learner
from networks import RecurrentQNetwork

ROOT = Path(__file__).resolve().parents[2]


def window_batch(cfg, rng, B=3, obs_dim=3, A=2):
    W = cfg.lookback + cfg.learn_len + cfg.n_step - 1
    first = np.zeros((W + 1, B), bool)
    first[cfg.lookback + 1, 1] = True  # an episode start inside sequence 1's learnt part
    mask = 1.0 - first[1:].astype(np.float32)
    net = RecurrentQNetwork((obs_dim,), A, hidden=(8,), lstm_size=8, dueling=True)
    state = net.initial_state(B)
    state = state._replace(
        lstm=tuple(jnp.asarray(rng.normal(size=(B, 8)), jnp.float32) for _ in range(2)),
        prev_action=jnp.asarray(rng.integers(0, A, B), jnp.int32),
        prev_reward=jnp.asarray(rng.normal(size=B), jnp.float32),
    )
    batch = TraceBatch(
        obs=jnp.asarray(rng.normal(size=(W + 1, B, obs_dim)), jnp.float32),
        first=jnp.asarray(first),
        action=jnp.asarray(rng.integers(0, A, (W, B)), jnp.int32),
        mu=(),
        reward=jnp.asarray(rng.normal(size=(W, B)), jnp.float32),
        discount=jnp.full((W, B), cfg.discount, jnp.float32),
        mask=jnp.asarray(mask),
        core_state=state,
        is_weight=jnp.ones((B,), jnp.float32),
    )
    return net, batch


@pytest.mark.slow
def test_burn_in_gives_no_gradient_and_refreshes_the_stored_state():
    cfg = R2D1Config(num_envs=1, trace_len=4, seq_len=4, burn_in=4, n_step=2, buffer_size=64)
    rng = np.random.default_rng(0)
    net, batch = window_batch(cfg, rng)
    learner = r2d1_learner(cfg, net, lambda c: optax.adam(c.lr))
    params = learner.init_params(jax.random.PRNGKey(0), batch.obs[0])
    target = jax.tree.map(lambda x: x + 0.1, params)

    def loss_of(obs, reward, p):
        b = batch._replace(obs=obs, reward=reward)
        return learner.loss(p, b, 1.0, target_params=target)[0]

    g_obs, g_reward, g_params = jax.grad(loss_of, argnums=(0, 1, 2))(
        batch.obs, batch.reward, params
    )
    back, L = cfg.lookback, cfg.learn_len
    assert np.all(np.asarray(g_obs[:back]) == 0.0)  # the burn-in observations: no gradient
    assert np.any(np.asarray(g_obs[back : back + L]) != 0.0)
    # Rewards enter the online network only as the previous-reward input of the next step:
    # those of the burn-in (inputs of steps 1..back) give no gradient either.
    assert np.all(np.asarray(g_reward[: back - 1]) == 0.0)
    assert any(np.any(np.asarray(g) != 0) for g in jax.tree.leaves(g_params))
    # But the burn-in changes the loss: it refreshes the stored state.
    other = batch.obs.at[:back].add(1.0)
    assert not np.isclose(
        loss_of(other, batch.reward, params), loss_of(batch.obs, batch.reward, params)
    )


@pytest.mark.slow
def test_unroll_matches_a_step_by_step_replay_of_the_window():
    cfg = R2D1Config(num_envs=1, trace_len=2, seq_len=4, burn_in=2, n_step=3, buffer_size=64)
    rng = np.random.default_rng(1)
    net, batch = window_batch(cfg, rng)
    learner = r2d1_learner(cfg, net, lambda c: optax.adam(c.lr))
    params = learner.init_params(jax.random.PRNGKey(1), batch.obs[0])
    out = learner.unroll(params, params, batch)
    # Reference: act step by step from the stored state, feeding back action and reward.
    state, qs = batch.core_state, []
    for i in range(batch.obs.shape[0]):
        o, state = net.apply(params, batch.obs[i : i + 1], batch.first[i : i + 1], state)
        qs.append(np.asarray(o.q_values[0]))
        if i < batch.action.shape[0]:
            state = state._replace(prev_action=batch.action[i], prev_reward=batch.reward[i])
    qs = np.stack(qs)
    back, L = cfg.lookback, cfg.learn_len
    np.testing.assert_allclose(out.learn.q_values, qs[back : back + L], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.ahead.q_values, qs[back + L :], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.target.q_values, qs[back + 1 :], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_an_episode_start_inside_the_burn_in_cuts_the_stored_state_off():
    """Sequence 0 starts a new episode at burn-in step 2: from there its LSTM state and its
    previous action and reward are reset, so what it learns from (the learnt and target Q
    values) no longer depends on the state stored with the window; sequence 2, with no
    episode start, still does."""
    cfg = R2D1Config(num_envs=1, trace_len=4, seq_len=4, burn_in=4, n_step=2, buffer_size=64)
    rng = np.random.default_rng(2)
    net, batch = window_batch(cfg, rng)
    first = np.asarray(batch.first).copy()
    first[2, 0] = True
    batch = batch._replace(first=jnp.asarray(first), mask=jnp.asarray(1.0 - first[1:], jnp.float32))
    learner = r2d1_learner(cfg, net, lambda c: optax.adam(c.lr))
    params = learner.init_params(jax.random.PRNGKey(2), batch.obs[0])
    state = batch.core_state
    other = state._replace(
        lstm=tuple(x + 1.0 for x in state.lstm),
        prev_action=1 - state.prev_action,
        prev_reward=state.prev_reward + 3.0,
    )
    a = learner.unroll(params, params, batch)
    b = learner.unroll(params, params, batch._replace(core_state=other))
    for x, y in ((a.learn.q_values, b.learn.q_values), (a.target.q_values, b.target.q_values)):
        np.testing.assert_array_equal(np.asarray(x)[:, 0], np.asarray(y)[:, 0])
        assert not np.allclose(np.asarray(x)[:, 2], np.asarray(y)[:, 2])


@pytest.mark.slow
def test_train_resume_evaluate_subprocess(tmp_path):
    run = tmp_path / "r2d1"
    tiny = ["--num-envs", "4", "--trace-len", "2", "--seq-len", "2", "--burn-in", "2",
            "--n-step", "2", "--batch-size", "4", "--buffer-size", "400", "--start-train-at",
            "16", "--hidden", "8", "--lstm-size", "8", "--eval-episodes", "2",
            "--checkpoint-every", "32", "--env", "CartPole-P-v1", "--apex-epsilon"]  # fmt: skip
    train = [sys.executable, "-m", "experiments.train"]
    subprocess.run([*train, "--agent", "r2d1", "--run-dir", str(run), *tiny, "--total-steps",
                    "64"], cwd=ROOT, check=True, capture_output=True, timeout=300)  # fmt: skip
    subprocess.run([*train, "--resume", str(run), "--total-steps", "128"], cwd=ROOT, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 128 and summary["updates"] > 0
    ev = subprocess.run(
        # 3 envs: not a divisor of the 4 it trained with (the Ape-X rates are per env)
        [sys.executable, "-m", "experiments.evaluate", str(run), "--episodes", "3"],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "CartPole-P-v1" in ev.stdout


@pytest.mark.parametrize("num_envs", [3, 16])
def test_the_acting_part_takes_any_env_count_with_apex_rates(num_envs):
    """`Agent.acting` on an evaluation env of another count than training's: the Ape-X
    rates are those of its own envs (Horgan et al. 2018: ε_i = 0.4^(1 + 7i/(N−1)))."""
    from agents.core.actors import apex_epsilons
    from envs import make_env
    from tests.agent_classes import R2D1Agent

    config = R2D1Config(num_envs=4, hidden=(8,), lstm_size=8, apex_epsilon=True)
    env = make_env("CartPole-P-v1", num_envs, 0, train=False)
    acting = R2D1Agent.acting(config, env)
    _, epsilon = acting.params(acting.init_learner(jax.random.PRNGKey(0)))
    want = 0.4 ** (1 + 7 * np.arange(num_envs) / (num_envs - 1))
    np.testing.assert_allclose(np.asarray(epsilon), want, rtol=1e-6)
    np.testing.assert_allclose(apex_epsilons(num_envs), want, rtol=1e-6)
