"""Recurrent SAC with --target vtrace: each learnt step's target is r_t + γ v_{t+1}, with
v_{t+1} IMPALA's V-trace (eq. 1, as a sum: tests/losses/loss_refs.py) over the n − 1 steps
after it on the soft values and the entropy-bonus rewards, as the feed-forward learner's;
checked in NumPy on random windows with a termination inside."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.learning import TraceBatch
from agents.sac.config import SACConfig
from envs import make_env
from tests.agent_classes import SACAgent
from tests.losses.loss_refs import vtrace_sum_form

B, A, L, BURN, N = 3, 2, 4, 2, 3


def test_vtrace_targets_match_impala_step_by_step():
    cfg = SACConfig(
        num_envs=2, trace_len=2, batch_size=B, buffer_size=64, hidden=(8,), recurrent=True,
        seq_len=L, burn_in=BURN, lstm_size=8, n_step=N, target="vtrace", vtrace_lambda=0.9,
        vtrace_rho=1.0, vtrace_c=0.8,
    )  # fmt: skip
    env = make_env("CartPole-v1", 2, 0)
    learner = SACAgent(cfg, env).modules.learner
    env.close()
    W = BURN + L + N - 1
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(L + N - 1, B, A)).astype(np.float32)  # the actor at x_{b+1..W}
    q_next = rng.normal(size=(L + N - 1, B)).astype(np.float32)
    logp_next = -rng.uniform(0.1, 1.0, size=(L + N - 1, B)).astype(np.float32)
    mu = rng.dirichlet(np.ones(A), size=(W, B)).astype(np.float32)
    action = rng.integers(0, A, size=(W, B)).astype(np.int32)
    reward = rng.normal(size=(W, B)).astype(np.float32)
    discount = np.full((W, B), 0.97, np.float32)
    discount[BURN + 3, 1] = 0.0  # a termination inside the traced steps
    batch = TraceBatch(
        obs=jnp.zeros((W + 1, B, 4)), first=jnp.zeros((W + 1, B), bool),
        action=jnp.asarray(action), mu=jnp.asarray(mu), reward=jnp.asarray(reward),
        discount=jnp.asarray(discount), mask=jnp.ones((W, B)), core_state=(),
        is_weight=jnp.ones(B),
    )  # fmt: skip
    alpha = 0.3
    y, rho_mean = learner.vtrace_targets(
        jnp.asarray(logits), jnp.asarray(q_next), jnp.asarray(logp_next), batch, alpha
    )
    pi = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    v = q_next - alpha * logp_next  # index k: x_{BURN+1+k}
    want = np.zeros((L, B))
    for t in range(L):
        steps = range(BURN + t + 1, BURN + t + N)  # the n − 1 steps after learnt step t
        k = [s - BURN - 1 for s in steps]
        rho = np.array([[pi[j, b, action[s, b]] / mu[s, b, action[s, b]] for b in range(B)]
                        for s, j in zip(steps, k, strict=True)])  # fmt: skip
        soft_r = np.array([reward[s] - alpha * logp_next[j] for s, j in zip(steps, k, strict=True)])
        vs, _ = vtrace_sum_form(
            v[k], v[k[-1] + 1], soft_r, discount[list(steps)], rho, lam=0.9, clip_rho=1.0,
            clip_c=0.8,
        )  # fmt: skip
        want[t] = reward[BURN + t] + discount[BURN + t] * vs[0]
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-5, atol=1e-5)

    def ratio(j, b):  # π/μ of the stored action at x_{BURN+1+j}
        s = BURN + 1 + j
        return pi[j, b, action[s, b]] / mu[s, b, action[s, b]]

    all_rho = np.array([[ratio(j, b) for b in range(B)] for j in range(L + N - 2)])
    np.testing.assert_allclose(float(rho_mean), all_rho.mean(), rtol=1e-5)


@pytest.mark.slow
def test_recurrent_vtrace_trains(tmp_path):
    from experiments import train

    run = tmp_path / "run"
    train.main(["--preset", "sac-pendulum-p", "--target", "vtrace", "--n-step", "3",
                "--total-steps", "600", "--start-train-at", "300", "--eval-episodes", "1",
                "--run-dir", str(run), "--no-progress"])  # fmt: skip
    import csv

    rows = list(csv.DictReader(open(run / "metrics.csv")))
    learnt = [r for r in rows if r["rho_mean"] not in ("", "nan")]
    assert learnt and all(np.isfinite(float(r["value_loss"])) for r in learnt)
    assert any(float(r["rho_mean"]) != 1.0 for r in learnt)  # the traced steps' ρ
