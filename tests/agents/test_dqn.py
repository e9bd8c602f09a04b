"""DQN: the ε schedule, the target copy period, n-step targets through the agent's replay
window at terminations and truncations (against a NumPy reference written from the n-step
double-Q equation), and one subprocess train → resume → evaluate.

The losses themselves are tested in tests/losses/test_value.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents.core.actors import apex_epsilons, epsilon_greedy_actor, linear_epsilon
from agents.core.learning import TraceBatch
from agents.dqn.config import DQNConfig
from agents.dqn.learner import DQNLearner, dqn_optimizer, priority_mix
from networks import QOutput
from replay import ReplaySample, SampleInfo, TraceReplay
from tests.losses.loss_refs import project_np

ROOT = Path(__file__).resolve().parents[2]
SDS = jax.ShapeDtypeStruct


def test_linear_epsilon_schedule():
    steps = np.array([0, 1, 2_500, 9_999, 10_000, 10_001, 10**7])
    want = 1.0 + np.clip(steps / 10_000, 0, 1) * (0.05 - 1.0)
    got = np.asarray(linear_epsilon(jnp.asarray(steps), 1.0, 0.05, 10_000))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # decaying from learning start, as the MinAtar paper's examples/dqn.py: 1 before step
    # 5,000, then (END − 1)/100k per step from there, END from 105,000 on
    steps = np.array([0, 4_999, 5_000, 5_001, 55_000, 104_999, 105_000, 10**7])
    want = np.where(steps < 5_000, 1.0, np.maximum(0.1, 1.0 + (0.1 - 1.0) * (steps - 5_000) / 1e5))
    got = np.asarray(linear_epsilon(jnp.asarray(steps), 1.0, 0.1, 100_000, decay_start=5_000))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # Ape-X / R2D2 per-env rates: 0.4^(1 + 7 i / (N - 1)).
    np.testing.assert_allclose(apex_epsilons(4), 0.4 ** (1 + 7 * np.arange(4) / 3), rtol=1e-6)
    np.testing.assert_allclose(apex_epsilons(1), [0.4])


def test_dqn_minatar_preset_explores_as_the_paper():
    """`dqn-minatar`'s actor: ε = 1 until learning starts at 5,000 steps, then linearly to
    0.1 at 105,000 (kenjyoung/MinAtar examples/dqn.py)."""
    from engine.common import make_agent

    agent = make_agent("dqn", "gymnax/Breakout-MinAtar", preset="dqn-minatar")
    eps = np.asarray(agent.modules.epsilon(jnp.array([0, 4_999, 5_000, 55_000, 105_000, 10**6])))
    np.testing.assert_allclose(eps, [1.0, 1.0, 1.0, 0.55, 0.1, 0.1], rtol=1e-6)


def test_epsilon_greedy_actor_explores_at_its_rate():
    q = jnp.tile(jnp.array([[0.0, 1.0, 0.5, -1.0]]), (20_000, 1))
    select, act = epsilon_greedy_actor(lambda p, o, f, c: (q, c), eval_epsilon=0.001)
    first = jnp.zeros((q.shape[0],), bool)
    out = select((None, jnp.float32(0.2)), None, first, (), jax.random.PRNGKey(0))
    greedy_share = np.mean(np.asarray(out.action) == 1)
    assert abs(greedy_share - (0.8 + 0.2 / 4)) < 0.01  # a uniform action can be the greedy one
    assert out.mu == ()
    greedy, _ = act(True)((None, 0.5), None, first, (), jax.random.PRNGKey(1))
    assert np.all(np.asarray(greedy) == 1)
    sampled, _ = act(False)((None, 0.5), None, first, (), jax.random.PRNGKey(1))
    assert np.mean(np.asarray(sampled) != 1) < 0.005  # ε = 0.001, not the training ε


class LinearQ:
    """A stand-in network: Q(x, ·) = x @ W (params W), so Q values are known exactly."""

    def init(self, key, obs):
        return jax.random.normal(key, (obs.shape[-1], 2))

    def apply(self, params, obs):
        return QOutput(obs @ params, None)


class LinearC51:
    """A distributional stand-in: logits of Z(x, ·) = x @ W reshaped `[A, K]`, Q their means
    over `atoms`."""

    def __init__(self, atoms):
        self.atoms = jnp.asarray(atoms, jnp.float32)

    def apply(self, params, obs):
        logits = (obs @ params).reshape((*obs.shape[:-1], 2, self.atoms.shape[0]))
        return QOutput(jax.nn.softmax(logits, -1) @ self.atoms, logits)


def _softmax_np(x):
    e = np.exp(x - np.max(x, -1, keepdims=True))
    return e / np.sum(e, -1, keepdims=True)


def n_step_walk(reward, discount, mask, t, n):
    """(Σ rewards, Π discounts, the step reached) of the transitions from t: at most n,
    stopping before a fake one (mask 0)."""
    g, scale, j = 0.0, 1.0, t
    while j < t + n and (j == t or mask[j] > 0):
        g += scale * reward[j]
        scale *= discount[j]
        j += 1
    return g, scale, j


def reference_c51_targets(obs, reward, discount, mask, w_online, w_target, n, start, L, atoms,
                          double):  # fmt: skip
    """C51's targets (Bellemare et al. 2017, Algorithm 1) of the same n-step walks as
    `reference_targets`: the target network's distribution of a* at the state reached,
    shifted to G + Γz and projected back onto the atoms; a* the online network's argmax of the
    mean (double, as Rainbow) or the target network's."""
    K = len(atoms)
    out = []
    for t in range(start, start + L):
        g, scale, j = n_step_walk(reward, discount, mask, t, n)
        p_tg = _softmax_np((obs[j] @ w_target).reshape(2, K).astype(np.float64))
        p_on = _softmax_np((obs[j] @ w_online).reshape(2, K).astype(np.float64))
        a_star = int(np.argmax((p_on if double else p_tg) @ atoms))
        out.append(project_np(g + scale * atoms, p_tg[a_star], atoms))
    return np.array(out)


def ends_stream(T_total, rng, ends, gamma):
    """One env's stream with episode ends: at step e (in `ends`, with a kind) x_e is the final
    observation; the transition e is the fake auto-reset one (mask 0) and x_{e+1} is first.
    A termination zeroes the discount of transition e − 1; a truncation keeps γ."""
    obs = rng.normal(size=(T_total + 1, 3)).astype(np.float32)
    reward = rng.normal(size=T_total).astype(np.float32)
    discount = np.full(T_total, gamma, np.float32)
    mask = np.ones(T_total, np.float32)
    first = np.zeros(T_total + 1, bool)
    first[0] = True
    for e, kind in ends:
        mask[e] = 0.0
        first[e + 1] = True
        if kind == "terminated":
            discount[e - 1] = 0.0
    return obs, reward, discount, mask, first


def _h(x, eps=1e-3):  # R2D2's value rescaling (Pohlen et al. 2018, arXiv:1805.11593)
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + eps * x


def _h_inv(y, eps=1e-3):  # its inverse, by bisection (h is strictly increasing)
    lo, hi = -1e6, 1e6
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _h(mid, eps) < y else (lo, mid)
    return 0.5 * (lo + hi)


def reference_targets(
    obs, reward, discount, mask, w_online, w_target, n, start, L, double=True, rescale=False
):
    """G_t for t = start .. start+L−1 from the equation: walk the transitions of the episode,
    at most n, stopping before a fake one (mask 0); bootstrap with the target network's value
    of the online argmax at the state reached (double Q) or its own max, times the product
    of the discounts. With value rescaling, h(G) with the bootstrap's h⁻¹(Q)."""
    out = []
    for t in range(start, start + L):
        g, scale, j = n_step_walk(reward, discount, mask, t, n)
        q_on, q_tg = obs[j] @ w_online, obs[j] @ w_target
        boot = q_tg[np.argmax(q_on)] if double else np.max(q_tg)
        if rescale:
            out.append(_h(g + scale * _h_inv(boot)))
        else:
            out.append(g + scale * boot)
    return np.array(out)


@pytest.mark.parametrize(
    "n, double, rescale, c51, T",
    [(1, True, False, False, 4), (3, True, False, False, 4), (3, False, False, False, 4),
     (3, True, True, False, 4), (3, True, False, True, 4), (2, False, False, True, 4),
     # traces shorter than the return: only the bootstrap states are evaluated (DER: 1, 20)
     (6, True, False, False, 1), (5, True, True, False, 2), (7, True, False, True, 1),
     (4, False, False, True, 2)],
)  # fmt: skip
def test_n_step_targets_through_the_replay_window_cut_at_episode_ends(n, double, rescale, c51, T):
    gamma, L_slots = 0.9, 24 // T
    rng = np.random.default_rng(n)
    total = T * L_slots
    ends = [
        [(5, "terminated"), (13, "truncated"), (18, "truncated")],
        [(3, "truncated"), (11, "terminated")],
    ]
    streams = [ends_stream(total, rng, e, gamma) for e in ends]
    cfg = DQNConfig(num_envs=2, trace_len=T, n_step=n, discount=gamma, batch_size=2,
                    buffer_size=2 * T * L_slots, hidden=(4,), double=double,
                    value_rescale=rescale, distributional=c51,
                    **(dict(num_atoms=5, v_min=-2.0, v_max=2.0) if c51 else {}))  # fmt: skip
    replay = TraceReplay(
        num_envs=2, trace_len=T, capacity=2 * T * L_slots, obs_shape=(3,),
        obs_dtype=np.float32, frame_stack=1, lookahead=cfg.lookahead,
        step_spec={k: SDS((), d) for k, d in [("first", jnp.bool_), ("frame_reset", jnp.bool_),
                   ("action", jnp.int32), ("reward", jnp.float32), ("discount", jnp.float32),
                   ("mask", jnp.float32)]} | {"mu": ()},
    )  # fmt: skip
    state, add = replay.init(), jax.jit(replay.add)  # one program, not op by op
    actions = rng.integers(0, 2, size=(total, 2)).astype(np.int32)
    for k in range(L_slots):
        sl = slice(k * T, (k + 1) * T)
        steps = {
            "first": np.stack([s[4][sl] for s in streams], 1),
            "frame_reset": np.stack([s[4][sl] for s in streams], 1),
            "action": actions[sl],
            "reward": np.stack([s[1][sl] for s in streams], 1),
            "discount": np.stack([s[2][sl] for s in streams], 1),
            "mask": np.stack([s[3][sl] for s in streams], 1),
            "mu": (),
        }
        state = add(state, np.stack([s[0][sl] for s in streams], 1), steps)
    atoms = np.linspace(-2.0, 2.0, 5)
    learner = DQNLearner(cfg, LinearC51(atoms) if c51 else LinearQ(), dqn_optimizer)
    width = 2 * len(atoms) if c51 else 2
    w_online = rng.normal(size=(3, width)).astype(np.float32)
    w_target = rng.normal(size=(3, width)).astype(np.float32)
    valid = np.flatnonzero(np.asarray(replay.valid_mask(state)))
    assert len(valid) == L_slots - 1 - cfg.lookahead // T
    env = jnp.array([0, 1] * len(valid))
    slot = jnp.repeat(jnp.asarray(valid), 2)

    @jax.jit
    def targets(state, w_online, w_target):
        ones = jnp.ones(env.shape, jnp.float32)
        sample = ReplaySample(replay.gather(state, env, slot), SampleInfo(env, slot, ones, ones))
        batch = TraceBatch.from_sample(sample, replay.window_len)
        return learner.targets(learner.unroll(w_online, w_target, batch), batch)

    got = np.asarray(targets(state, w_online, w_target))  # [L, B]
    for b in range(len(env)):
        e, s = int(env[b]), int(slot[b])
        obs, reward, discount, mask, _ = streams[e]
        if c51:
            want = reference_c51_targets(
                obs, reward, discount, mask, w_online, w_target, n, s * T, T, atoms, double
            )
        else:
            want = reference_targets(
                obs, reward, discount, mask, w_online, w_target, n, s * T, T, double, rescale
            )
        keep = mask[s * T : s * T + T] > 0  # masked (fake) steps have no meaningful target
        np.testing.assert_allclose(got[keep, b], want[keep], rtol=1e-5, atol=1e-5)


def test_priority_mix_of_max_and_mean_over_valid_steps():
    rng = np.random.default_rng(0)
    td = np.abs(rng.normal(size=(7, 5))).astype(np.float32)
    valid = (rng.uniform(size=(7, 5)) > 0.3).astype(np.float32)
    valid[:, 0] = 1.0
    got = np.asarray(priority_mix(jnp.asarray(td), jnp.asarray(valid), 0.9))
    for b in range(5):
        v = td[valid[:, b] > 0, b]
        want = 0.9 * v.max() + 0.1 * v.mean() if len(v) else 0.0
        np.testing.assert_allclose(got[b], want, rtol=1e-6)


def test_target_network_is_copied_every_period():
    cfg = DQNConfig(num_envs=1, trace_len=2, n_step=1, batch_size=2, buffer_size=64,
                    target_update_period=3, hidden=(4,), lr=0.1)  # fmt: skip
    learner = DQNLearner(cfg, LinearQ(), dqn_optimizer)
    state = learner.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))
    w0 = jnp.asarray(np.random.default_rng(1).normal(size=(3, 2)), jnp.float32)
    state = state._replace(params=w0, target_params=w0, opt_state=learner.optimizer.init(w0))
    rng = np.random.default_rng(2)
    batch = TraceBatch(
        obs=jnp.asarray(rng.normal(size=(3, 2, 3)), jnp.float32),
        first=jnp.zeros((3, 2), bool),
        action=jnp.zeros((2, 2), jnp.int32),
        mu=(),
        reward=jnp.ones((2, 2)),
        discount=jnp.full((2, 2), 0.9),
        mask=jnp.ones((2, 2)),
        core_state=(),
        is_weight=jnp.ones((2,)),
    )
    update = jax.jit(learner.update)
    targets = []
    for _ in range(7):
        before = state.params
        state, _, _ = update(state, batch)
        assert not np.allclose(state.params, before)
        targets.append((np.asarray(state.target_params), np.asarray(state.params)))
    for i, (target, online) in enumerate(targets, start=1):
        if i % 3 == 0:
            np.testing.assert_array_equal(target, online)  # copied at updates 3 and 6
        else:
            expected = targets[i // 3 * 3 - 1][1] if i > 3 else np.asarray(w0)
            np.testing.assert_array_equal(target, expected)


@pytest.mark.parametrize("env_steps", [0, 300, 1000, 5000])
def test_importance_exponent_is_annealed_to_one_in_env_steps(env_steps):
    """β = β0 + (1 − β0)·min(1, env_steps / steps) (Schaul et al. 2016, §3.4), applied to the
    replay's normalised IS weights: an update at `env_steps` with weights w equals the loss
    written out with weights w^β. The reference is a NumPy Huber-loss gradient."""
    beta0, steps, lr = 0.4, 1000, 0.1
    cfg = DQNConfig(num_envs=1, trace_len=1, n_step=1, batch_size=2, buffer_size=64,
                    hidden=(4,), prioritized=True, importance_exponent=beta0,
                    importance_exponent_steps=steps, double=False, dueling=False,
                    max_grad_norm=1e6, huber_delta=0.0, target_update_period=1000)  # fmt: skip
    learner = DQNLearner(cfg, LinearQ(), dqn_optimizer)
    learner.optimizer = optax.sgd(lr)  # so that the step is the gradient itself
    state = learner.init(jax.random.PRNGKey(0), jnp.zeros((1, 3)))
    rng = np.random.default_rng(3)
    w0 = rng.normal(size=(3, 2)).astype(np.float32)
    state = state._replace(
        params=jnp.asarray(w0), target_params=jnp.asarray(w0),
        opt_state=learner.optimizer.init(jnp.asarray(w0)),
        env_steps=jnp.asarray(env_steps, jnp.int32),
    )  # fmt: skip
    obs = rng.normal(size=(2, 2, 3)).astype(np.float32)  # [T+1, B, 3], one learnt step
    action = rng.integers(0, 2, size=(1, 2)).astype(np.int32)
    reward = rng.normal(size=(1, 2)).astype(np.float32)
    is_weight = np.array([1.0, 0.25], np.float32)
    batch = TraceBatch(
        obs=jnp.asarray(obs), first=jnp.zeros((2, 2), bool), action=jnp.asarray(action),
        mu=(), reward=jnp.asarray(reward), discount=jnp.full((1, 2), 0.9),
        mask=jnp.ones((1, 2)), core_state=(), is_weight=jnp.asarray(is_weight),
    )  # fmt: skip
    state, _, _ = jax.jit(learner.update)(state, batch)
    beta = beta0 + (1 - beta0) * min(1.0, env_steps / steps)
    # Reference: ½·squared TD error (Huber off), weights w^β, mean over the B samples.
    grad = np.zeros_like(w0)
    for b in range(2):
        target = reward[0, b] + 0.9 * np.max(obs[1, b] @ w0)
        q = obs[0, b] @ w0[:, action[0, b]]
        grad[:, action[0, b]] += is_weight[b] ** beta * (q - target) * obs[0, b] / 2
    np.testing.assert_allclose(np.asarray(state.params), w0 - lr * grad, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_train_resume_evaluate_subprocess(tmp_path):
    run = tmp_path / "dqn"
    tiny = ["--num-envs", "4", "--trace-len", "2", "--batch-size", "4", "--buffer-size", "400",
            "--start-train-at", "16", "--hidden", "8", "--eval-episodes", "2",
            "--checkpoint-every", "32", "--prioritized", "--distributional"]  # fmt: skip
    train = [sys.executable, "-m", "experiments.train"]
    subprocess.run([*train, "--agent", "dqn", "--run-dir", str(run), *tiny, "--total-steps",
                    "64"], cwd=ROOT, check=True, capture_output=True, timeout=300)  # fmt: skip
    subprocess.run([*train, "--resume", str(run), "--total-steps", "128"], cwd=ROOT, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 128
    ev = subprocess.run(
        [sys.executable, "-m", "experiments.evaluate", str(run), "--episodes", "2", "--greedy"],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "return" in ev.stdout.lower()


@pytest.mark.slow
def test_noisy_dqn_acts_by_per_env_noise_without_epsilon_and_learns_sigma():
    """--noisy: ε is 0; each env's action is the argmax of Q under its own noise draw
    (resampled every step); greedy evaluation uses the means; updates draw fresh noise and
    move σ."""
    from envs import make_env
    from tests.agent_classes import DQNAgent

    cfg = DQNConfig(num_envs=4, trace_len=2, batch_size=4, buffer_size=400, start_train_at=8,
                    hidden=(16,), noisy=True, eps_start=1.0, n_step=2)  # fmt: skip
    agent = DQNAgent(cfg, make_env("CartPole-v1", 4, 0))
    state = agent.init(jax.random.PRNGKey(0))
    net_params, epsilon = agent.policy_params(state.learner)
    assert float(epsilon) == 0.0
    # The observation nearest the greedy decision boundary, given to 64 envs.
    cands = jnp.asarray(np.random.default_rng(0).normal(size=(512, 4)), jnp.float32)
    gap = jnp.abs(jnp.diff(agent.modules.network.apply(net_params, cands).q_values, axis=-1))[:, 0]
    obs = jnp.tile(cands[jnp.argmin(gap)][None], (64, 1))
    key = jax.random.PRNGKey(5)
    out = jax.jit(agent.select_action)((net_params, epsilon), obs, None, (), key)
    keys = jax.random.split(key, 64)
    net = agent.modules.network
    want = [
        int(jnp.argmax(net.apply(net_params, obs[i : i + 1], noise_key=keys[i])[0][0]))
        for i in range(64)
    ]
    np.testing.assert_array_equal(np.asarray(out.action), want)
    assert len(set(want)) == 2 and out.mu == ()  # the same observation, different draws
    greedy, _ = agent.act(True)((net_params, epsilon), obs[:2], None, (), key)
    means = agent.modules.network.apply(net_params, obs[:2]).q_values
    np.testing.assert_array_equal(np.asarray(greedy), np.asarray(jnp.argmax(means, -1)))

    for it in range(4):
        before = jax.device_get(state.learner)  # the state is donated
        state, out = agent.train_iteration(state, it, it * 8)
    assert out.metrics and float(out.metrics[-1]["epsilon"]) == 0.0
    sigma = lambda p: p["params"]["QHead_0"]["advantage"]["sigma_kernel"]  # noqa: E731
    assert not np.allclose(
        np.asarray(sigma(state.learner.params)), np.asarray(sigma(before.params))
    )
    # An update's noise (arXiv:1706.10295 §3.1): one draw for the online network's passes,
    # the learnt steps and the look-ahead alike, an independent one for the target network's.
    import types

    learner, L = state.learner, cfg.learn_len
    obs = jnp.asarray(np.random.default_rng(1).normal(size=(L + 3, 5, 4)), jnp.float32)
    k_online, k_target = jax.random.split(jax.random.PRNGKey(9))
    out = agent.modules.learner.unroll(
        learner.params, learner.target_params, types.SimpleNamespace(obs=obs), (k_online, k_target)
    )

    def q(params, x, key):
        return np.asarray(agent.modules.network.apply(params, x, noise_key=key).q_values)

    # atol: a batch of another size rounds differently; Q values are O(1), and one near 0
    # (−1.7e-5) missed rtol alone by 3e-8 on one machine (session 69)

    np.testing.assert_allclose(
        out.learn.q_values, q(learner.params, obs[:L], k_online), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        out.ahead.q_values, q(learner.params, obs[L:], k_online), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        out.target.q_values, q(learner.target_params, obs[1:], k_target), rtol=1e-6, atol=1e-6
    )
    assert not np.allclose(q(learner.params, obs, k_online), q(learner.params, obs, k_target))
    # With traces shorter than the return (n = 3 > L = 2) only each step's bootstrap state
    # x_{t+3} is evaluated, under the same two draws.
    sparse = DQNLearner(dataclasses.replace(cfg, n_step=3), agent.modules.network, dqn_optimizer)
    mask = jnp.ones((L + 2, 5), jnp.float32)
    out = sparse.unroll(
        learner.params, learner.target_params, types.SimpleNamespace(obs=obs, mask=mask),
        (k_online, k_target),
    )  # fmt: skip
    np.testing.assert_allclose(
        out.learn.q_values, q(learner.params, obs[:L], k_online), rtol=1e-6, atol=1e-6
    )
    for t in range(L):
        boot = obs[t + 3 : t + 4]
        np.testing.assert_allclose(
            out.ahead.q_values[t + 3 - L],
            q(learner.params, boot, k_online)[0],
            rtol=1e-6,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            out.target.q_values[t + 2],
            q(learner.target_params, boot, k_target)[0],
            rtol=1e-6,
            atol=1e-6,
        )
    # ... and `update` hands `unroll` two different keys, new ones at every update.
    seen = []
    unroll = agent.modules.learner.unroll

    def recording(params, target_params, batch, noise=(None, None)):
        seen.append(tuple(np.asarray(k) for k in noise))
        return unroll(params, target_params, batch, noise)

    sample = agent.replay.sample(state.replay, jax.random.PRNGKey(4), cfg.batch_size)
    batch = TraceBatch.from_sample(sample, agent.replay.window_len)
    agent.modules.learner.unroll = recording
    try:
        after, *_ = agent.modules.learner.update(learner, batch)  # op by op: the keys are concrete
        agent.modules.learner.update(after, batch)
    finally:
        del agent.modules.learner.unroll
    (a_online, a_target), (b_online, b_target) = seen
    assert not np.array_equal(a_online, a_target) and not np.array_equal(a_online, b_online)
    assert not np.array_equal(a_target, b_target)


def test_noisy_flags():
    from engine.args import parse

    # The training ε schedule's flags given with --noisy are errors; a preset's ε schedule
    # combines with it. The evaluation's ε applies to the noise-free means.
    for extra in (["--eps-start", "0.5"], ["--eps-end", "0.01"], ["--eps-decay-steps", "9"]):
        with pytest.raises(ValueError, match=rf"{extra[0]} needs --no-noisy"):
            parse(["--agent", "dqn", "--noisy", *extra])
    assert parse(["--agent", "dqn", "--preset", "dqn-atari", "--noisy"]).config.eps_end == 0.01
    assert DQNConfig(noisy=True, eps_end=0.01).noisy
    assert (
        parse(["--agent", "dqn", "--noisy", "--eval-epsilon", "0.05"]).config.eval_epsilon == 0.05
    )


def test_noisy_sampled_evaluation_is_epsilon_greedy_on_the_means():
    """With --noisy, the sampled evaluation acts as Dopamine's and Kaixhin/Rainbow's
    evaluation of data-efficient Rainbow: ε-greedy (--eval-epsilon) on the noise-free network;
    the greedy one is its argmax."""
    from envs import make_env
    from tests.agent_classes import DQNAgent

    obs = jnp.asarray(np.random.default_rng(2).normal(size=(256, 4)), jnp.float32)
    key = jax.random.PRNGKey(1)
    for eps in (0.0, 1.0):
        cfg = DQNConfig(num_envs=2, trace_len=2, batch_size=2, buffer_size=400, hidden=(8,),
                        noisy=True, eval_epsilon=eps)  # fmt: skip
        agent = DQNAgent(cfg, make_env("CartPole-v1", 2, 0))
        params = agent.policy_params(agent.init(jax.random.PRNGKey(0)).learner)
        means = np.asarray(jnp.argmax(agent.modules.network.apply(params[0], obs).q_values, -1))
        greedy, _ = agent.act(True)(params, obs, None, (), key)
        sampled, _ = agent.act(False)(params, obs, None, (), key)
        np.testing.assert_array_equal(np.asarray(greedy), means)
        agree = np.mean(np.asarray(sampled) == means)
        # ε = 0: the means' argmax (no noise draw); ε = 1: uniform over 2 actions
        assert agree == 1.0 if eps == 0.0 else 0.35 < agree < 0.65, agree


def test_annealed_learning_rate_reaches_zero_at_anneal_steps():
    """--anneal-steps S: lr·(1 − k/U) at update k, U = the updates made by env step S
    ((S − start_train_at) · replay_ratio / (batch_size · learn_len)), 0 after; constant lr
    without it. The optimizer takes those steps (Adam's first step is lr per parameter)."""
    from agents.dqn.learner import learning_rate

    cfg = DQNConfig(lr=1e-3, anneal_steps=10_000, start_train_at=2_000, replay_ratio=32.0,
                    batch_size=16, trace_len=4)  # fmt: skip
    updates = (10_000 - 2_000) * 32.0 / (16 * 4)  # 4,000
    schedule = learning_rate(cfg)
    for k in (0, 1, 1_000, 2_000, 3_999, 4_000, 9_000):
        want = 1e-3 * max(0.0, 1.0 - k / updates)
        np.testing.assert_allclose(float(schedule(jnp.asarray(k))), want, rtol=1e-6, atol=1e-9)
    assert learning_rate(DQNConfig(lr=1e-3)) == 1e-3
    # DQN's own optimizer takes those steps (Adam's first step is lr per parameter with a
    # tiny ε and no clipping at this gradient norm), and so does R2D1's.
    from agents.r2d1.config import R2D1Config
    from envs import make_env
    from tests.agent_classes import R2D1Agent

    r2d1_cfg = R2D1Config(lr=1e-3, anneal_steps=10_000, start_train_at=2_000, replay_ratio=32.0,
                          batch_size=16, trace_len=4, seq_len=4, burn_in=0, n_step=1,
                          adam_eps=1e-12, num_envs=1)  # fmt: skip
    r2d1 = R2D1Agent(r2d1_cfg, make_env("CartPole-P-v1", 1, 0)).modules.learner.optimizer
    r2d1_updates = (10_000 - 2_000) * 32.0 / (16 * r2d1_cfg.learn_len)
    for opt, total in (
        (dqn_optimizer(cfg.replace(adam_eps=1e-12, max_grad_norm=100.0)), updates),
        (r2d1, r2d1_updates),
    ):
        state = opt.init(jnp.zeros(3))
        for k in range(3):
            step, state = opt.update(jnp.array([1.0, -2.0, 0.5]), state)
            np.testing.assert_allclose(np.abs(step), 1e-3 * (1 - k / total), rtol=1e-4)


def _centered_rmsprop_reference(grads, lr, rho, eps, mu):
    """PyTorch's RMSprop(centered=True, momentum=mu) written from its documented update (the
    MinAtar paper's DQN optimizer): v <- rho v + (1 - rho) g^2, m <- rho m + (1 - rho) g,
    b <- mu b + g / (sqrt(v - m^2) + eps), p <- p - lr b; all moments start at 0."""
    p = np.zeros_like(grads[0])
    v, m, b = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    out = []
    for g in grads:
        v = rho * v + (1 - rho) * g**2
        m = rho * m + (1 - rho) * g
        b = mu * b + g / (np.sqrt(v - m**2) + eps)
        p = p - lr * b
        out.append(p.copy())
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rmsprop_option_is_centered_rmsprop_with_momentum(seed):
    rng = np.random.default_rng(seed)
    rho, eps, mu, lr = rng.uniform(0.8, 0.99), rng.uniform(1e-3, 0.1), rng.uniform(0, 0.95), 1e-2
    cfg = DQNConfig(
        optimizer="rmsprop", lr=lr, rmsprop_decay=rho, rmsprop_eps=eps, rmsprop_momentum=mu,
        max_grad_norm=1e9,
    )  # fmt: skip
    grads = [rng.normal(size=(3, 4)).astype(np.float32) for _ in range(6)]
    opt = dqn_optimizer(cfg)
    params = jnp.zeros((3, 4))
    state = opt.init(params)
    expected = _centered_rmsprop_reference([g.astype(np.float64) for g in grads], lr, rho, eps, mu)
    for g, want in zip(grads, expected, strict=True):
        updates, state = opt.update(jnp.asarray(g), state, params)
        params = params + updates
        np.testing.assert_allclose(np.asarray(params), want, rtol=2e-4, atol=1e-6)


def test_dqn_minatar_preset_optimizer_is_the_papers_rmsprop_without_momentum():
    """The MinAtar paper's script: torch RMSprop(lr=2.5e-4, alpha=0.95, centered=True,
    eps=0.01) with torch's default momentum 0 (its GRAD_MOMENTUM = 0.95 is DQN's name for
    the decay of the centred mean; kenjyoung/MinAtar PR #37). Six updates of the preset's
    optimizer against the NumPy reference with μ = 0."""
    from engine.common import make_agent

    agent = make_agent("dqn", "gymnax/Breakout-MinAtar", preset="dqn-minatar")
    rng = np.random.default_rng(3)
    grads = [rng.normal(size=(3, 4)).astype(np.float32) for _ in range(6)]
    opt = dqn_optimizer(agent.config)
    params = jnp.zeros((3, 4))
    state = opt.init(params)
    expected = _centered_rmsprop_reference(
        [g.astype(np.float64) for g in grads], 2.5e-4, 0.95, 0.01, 0.0
    )
    for g, want in zip(grads, expected, strict=True):
        updates, state = opt.update(jnp.asarray(g), state, params)
        params = params + updates
        np.testing.assert_allclose(np.asarray(params), want, rtol=2e-4, atol=1e-9)


def test_optimizer_flags_need_their_optimizer():
    from agents.core.config import ConfigError

    with pytest.raises(ConfigError, match="--rmsprop-eps needs --optimizer rmsprop"):
        DQNConfig(rmsprop_eps=0.1)
    with pytest.raises(ValueError, match=re.escape("--optimizer must be adam|rmsprop")):
        DQNConfig(optimizer="sgd")
    # On the command line: a flag given for the other optimizer is an error, before anything
    # is built; a preset's Adam ε stays harmless when the user picks RMSProp.
    from engine.args import parse_train_args

    with pytest.raises(SystemExit, match="--adam-eps needs --optimizer adam"):
        parse_train_args(["--agent", "dqn", "--optimizer", "rmsprop", "--adam-eps", "1e-3"])
    args = parse_train_args(["--agent", "dqn", "--preset", "dqn-atari", "--optimizer", "rmsprop"])
    assert args.config.optimizer == "rmsprop"


def test_prioritized_new_traces_start_at_the_largest_priority_but_r2d1s_at_their_neighbours():
    """--prioritized: DQN gives a new trace the largest priority so far (Schaul et al. 2016,
    Algorithm 1: every transition replayed at least once; the replay's rule is tested in
    tests/replay/test_prioritized.py); R2D1 the lazy initial priority of its env's recent
    traces, standing in for R2D2's actor-computed priorities."""
    from agents.r2d1.config import R2D1Config
    from envs import make_env
    from tests.agent_classes import DQNAgent, R2D1Agent

    env = make_env("CartPole-v1", 2, 0)
    dqn = DQNAgent(DQNConfig(num_envs=2, trace_len=4, buffer_size=64, prioritized=True), env)
    assert dqn.replay.new_at_max is True
    r2d1 = R2D1Agent(
        R2D1Config(num_envs=2, trace_len=4, seq_len=4, burn_in=4, n_step=2, buffer_size=64), env
    )
    assert r2d1.config.prioritized and r2d1.replay.new_at_max is False


def test_layer_norm_flag_reaches_the_torso_and_the_cartpole_default_copies_every_500():
    """`--layer-norm` builds the torso with LayerNorm layers (their own parameters; none
    without the flag), and the CartPole default copies its target every 500 updates (issue
    65: with 200, Q diverged on 3 seeds of 30)."""
    from agents.core.registry import get_agent
    from agents.dqn.agent import make

    spec = type("Spec", (), {"obs_spec": (4,), "num_actions": 2})()
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(5, 4)) * 10, jnp.float32)
    for on in (False, True):
        net = make(DQNConfig(hidden=(16,), layer_norm=on), spec).modules.network
        params = net.init(jax.random.PRNGKey(0), obs)
        names = {k for path in jax.tree_util.tree_flatten_with_path(params)[0] for k in path[0]}
        assert any("LayerNorm" in str(k) for k in names) == on
    assert get_agent("dqn").make_config().target_update_period == 500


@pytest.mark.parametrize("L, n, c51", [(2, 5, False), (3, 4, True), (1, 6, False)])
def test_bootstrap_unroll_gives_the_dense_unrolls_targets(L, n, c51):
    """With L < n the learner evaluates only each learnt step's bootstrap state: its targets
    equal those of the dense unroll (every window state evaluated), for episodes cut anywhere
    in the window, right after a learnt step included (a bootstrap inside the learnt part)."""
    from agents.dqn.learner import Unrolled

    rng = np.random.default_rng(L * 10 + n)
    atoms = np.linspace(-2.0, 2.0, 5)
    net = LinearC51(atoms) if c51 else LinearQ()
    cfg = DQNConfig(trace_len=L, n_step=n, batch_size=64, hidden=(4,), distributional=c51,
                    **(dict(num_atoms=5, v_min=-2.0, v_max=2.0) if c51 else {}))  # fmt: skip
    learner = DQNLearner(cfg, net, dqn_optimizer)
    W, B = L + n - 1, 64
    obs = jnp.asarray(rng.normal(size=(W + 1, B, 3)), jnp.float32)
    mask = (rng.random((W, B)) > 0.25).astype(np.float32)  # cuts at every position
    if L == 3 and n == 4:  # x_1 ends step 0's return inside the learnt part, x_5 step 2's
        mask[:, :8] = np.array([1, 0, 1, 1, 1, 0], np.float32)[:, None]
    batch = TraceBatch(
        obs=obs, first=jnp.zeros((W + 1, B), bool), action=jnp.zeros((W, B), jnp.int32),
        mu=(), reward=jnp.asarray(rng.normal(size=(W, B)), jnp.float32),
        discount=jnp.asarray(rng.choice([0.0, 0.9], (W, B), p=[0.2, 0.8]), jnp.float32),
        mask=jnp.asarray(mask), core_state=(), is_weight=jnp.ones(B, jnp.float32),
    )  # fmt: skip
    width = 2 * len(atoms) if c51 else 2
    w_on, w_tg = (jnp.asarray(rng.normal(size=(3, width)), jnp.float32) for _ in "ab")

    @jax.jit  # one program, not op by op
    def both(w_on, w_tg, batch):
        dense = Unrolled(
            net.apply(w_on, obs[:L]), net.apply(w_on, obs[L:]), net.apply(w_tg, obs[1:])
        )
        sparse = learner.unroll(w_on, w_tg, batch)
        targets = [learner.targets(u, batch) for u in (sparse, dense)]
        return sparse, targets, learner.bootstrap_steps(batch.mask)

    sparse, (got, want), steps = jax.device_get(both(w_on, w_tg, batch))  # steps: [L, B]
    keep = mask[:L] > 0
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-5, atol=1e-6)
    if L > 1:  # the case is covered: a bootstrap inside the learnt part
        assert (steps < L).any()
    # The look-ahead rows no learnt step bootstraps from hold zeros (a bootstrap inside the
    # learnt part writes none of them).
    read = np.zeros((n, B), bool)
    for t, b in zip(*np.nonzero(steps >= L), strict=True):
        read[steps[t, b] - L, b] = True
    ahead = np.asarray(sparse.ahead.q_values)
    assert (ahead[~read] == 0).all() and (ahead[read] != 0).all()
