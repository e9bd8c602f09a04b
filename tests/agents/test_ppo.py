"""PPO and A2C: advantages at episode ends against a NumPy reference, recurrent minibatches,
hooks, data parallelism, and the CLI's train -> resume -> evaluate with checkpointed running
statistics."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from agents.core.config import ConfigError
from agents.core.hooks import HookError
from agents.core.parallel import make_mesh, place_rollout, to_global
from agents.ppo.config import PPOConfig
from engine.common import make_agent
from engine.rollout import make_xla_rollout
from envs import make_env
from tests.agent_classes import PPOAgent
from tests.agents import ppo_hooks
from tests.xla import subprocess_xla_flags

ROOT = Path(__file__).resolve().parents[2]
# CartPole cannot fail within 5 steps (the pole needs ~10 to pass 12°), so with a time limit
# of 5 every episode is 5 real steps, truncated, then the fake auto-reset step: a period of 6.
LIMIT = 5
CFG = PPOConfig(num_envs=4, trace_len=12, hidden=(8,), discount=0.97, gae_lambda=0.9)


def _agent(cfg=CFG, mesh=None, limit=LIMIT):
    env = make_env("CartPole-v1", cfg.num_envs, 3, max_episode_steps=limit)
    return PPOAgent(cfg, env, mesh=mesh)


def _rollout(agent, state):
    rollout = make_xla_rollout(
        agent.env, agent.select_action, agent.config.trace_len, agent.config.discount,
        feedback=agent.core_feedback,
    )  # fmt: skip
    return jax.jit(rollout)(agent.policy_params(state.learner), state.actor)


def test_truncation_bootstraps_from_the_final_observation():
    """GAE (arXiv:1506.02438 eq. 16) per episode, written from the known episode layout:
    δ_t = r_t + γ V(x_{t+1}) − V(x_t) with V(x_{t+1}) the value of the final observation at
    the truncation, A_t = δ_t + γλ A_{t+1} inside an episode, 0 on the fake step."""
    agent = _agent()
    state = agent.init(jax.random.PRNGKey(0))
    _, traj = _rollout(agent, state)
    _, buffer = jax.jit(agent.modules.learner.prepare)(state.learner, traj)
    v = np.asarray(traj.steps["mu"]["value"], np.float64)
    r = np.asarray(traj.steps["reward"], np.float64)
    (_, v_last), _ = (agent.modules.network.apply(state.learner.params, traj.last_obs), None)
    v_last = np.asarray(v_last, np.float64)
    g, lam = CFG.discount, CFG.gae_lambda
    T, B = r.shape
    ref = np.zeros((T, B))
    for b in range(B):
        nxt = 0.0
        for t in reversed(range(T)):
            k = t % (LIMIT + 1)  # position in the episode; k = LIMIT is the fake step
            if k == LIMIT:
                ref[t, b], nxt = 0.0, 0.0
                continue
            v_next = v[t + 1, b] if t + 1 < T else v_last[b]  # k = LIMIT - 1: V(final obs)
            delta = r[t, b] + g * v_next - v[t, b]
            ref[t, b] = delta + (g * lam * nxt if k < LIMIT - 1 else 0.0)
            nxt = ref[t, b]
    np.testing.assert_allclose(np.asarray(buffer.data.adv), ref, rtol=1e-5, atol=1e-5)
    last_real = ref[LIMIT - 1]  # the truncated step: r + γ V(final) − V, not r − V
    assert np.all(np.abs(last_real - (r[LIMIT - 1] - v[LIMIT - 1])) > 1e-4)


@pytest.mark.parametrize("prev_action_reward", [False, True])
def test_recurrent_minibatches_start_from_stored_states(prev_action_reward):
    """Chunks of `recurrence` steps over whole env streams: each chunk's initial state is the
    state stored when acting, a forward pass from it reproduces the recorded values (resets
    at episode starts included; with the previous action and reward as inputs, those the
    learner builds from the rollout are the ones the actor saw), the two minibatches split
    the envs, and the states recomputed with the acting params equal the stored ones."""
    cfg = CFG.replace(
        lstm_size=8, recurrence=3, num_minibatches=2, prev_action_reward=prev_action_reward
    )
    agent = _agent(cfg)
    state = agent.init(jax.random.PRNGKey(1), jit=True)  # programs below, not op by op
    _, traj = _rollout(agent, state)
    assert bool(jnp.any(traj.steps["first"][1:]))  # episode starts inside the chunks
    learner, buffer = jax.jit(agent.modules.learner.prepare)(state.learner, traj)
    L, T = 3, cfg.trace_len
    stored = jax.tree.map(np.asarray, traj.steps["mu"]["core"])
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a, b[::L]), buffer.starts, stored)
    seen, learner_fns = [], agent.modules.learner
    minibatch = jax.jit(learner_fns.minibatch, static_argnums=(1, 2))
    forward = jax.jit(learner_fns.forward)
    obs = np.asarray(buffer.data.obs)  # sliced in NumPy: no program per slice
    for i in range(2):
        mb = jax.device_get(minibatch(buffer, 0, i))
        assert mb.obs.shape[:2] == (L, (T // L) * 2)
        for j in range(mb.obs.shape[1]):
            k = j // 2  # chunk index (chunk-major, then env)
            env = [
                e
                for e in range(cfg.num_envs)
                if np.array_equal(obs[k * L : (k + 1) * L, e], mb.obs[:, j])
            ]
            assert len(env) == 1
            seen.append(env[0])
            for s, ref in zip(jax.tree.leaves(mb.core_state), jax.tree.leaves(stored), strict=True):
                np.testing.assert_array_equal(s[j], ref[k * L, env[0]])
        _, value = forward(learner.params, mb.obs, mb.first, mb.core_state, mb.prev)
        np.testing.assert_allclose(value, mb.value, rtol=1e-5, atol=1e-5)
    assert sorted(set(seen)) == list(range(cfg.num_envs))
    refreshed = jax.jit(learner_fns.refresh)(learner, buffer)
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # noqa: E731
    jax.tree.map(close, refreshed.starts, buffer.starts)


def test_refresh_of_one_chunk_is_the_identity_it_would_compute():
    """With --recurrence 0 the whole rollout is one chunk: its start is the rollout's initial
    state whatever the params, so `refresh` skips the forward pass that would recompute it
    (one unroll of the rollout per epoch) and returns what that pass returns."""
    cfg = CFG.replace(lstm_size=8, recurrence=0, prev_action_reward=True)
    agent = _agent(cfg)
    state = agent.init(jax.random.PRNGKey(2))
    _, traj = _rollout(agent, state)
    learner, buffer = jax.jit(agent.modules.learner.prepare)(state.learner, traj)
    moved = jax.tree.map(lambda p: p + 0.5, learner.params)
    d = buffer.data
    computed = agent.modules.learner._chunk_states(moved, d.obs, d.first, buffer.core0, d.prev)
    refreshed = agent.modules.learner.refresh(learner._replace(params=moved), buffer)
    assert refreshed is buffer
    jax.tree.map(np.testing.assert_array_equal, refreshed.starts, computed)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_prev_action_reward_at_chunk_starts(env_id):
    """--prev-action-reward: the LSTM's extra inputs at every step of every chunk, read from
    the network itself (its sown `inputs`), equal a NumPy construction from two consecutive
    rollouts: the action (one-hot, or the unclipped Gaussian sample) and the env reward of
    the step before, zero where an episode starts, and at the rollout's first step those of
    the previous rollout's last step. Episodes of 4 steps + the fake auto-reset step (a period
    of 5) put episode starts at some chunk starts (t = 3 of the second rollout) and not at
    others (t = 0: the previous action comes from the stored state)."""
    discrete = env_id == "CartPole-v1"
    cfg = CFG.replace(lstm_size=8, recurrence=3, num_minibatches=2, prev_action_reward=True)
    env = make_env(env_id, cfg.num_envs, 3, max_episode_steps=4)
    agent = PPOAgent(cfg, env)
    state = agent.init(jax.random.PRNGKey(4))
    rollout = jax.jit(make_xla_rollout(
        env, agent.select_action, cfg.trace_len, cfg.discount, feedback=agent.core_feedback
    ))  # fmt: skip
    params = agent.policy_params(state.learner)
    actor, traj1 = rollout(params, state.actor)
    _, traj2 = rollout(params, actor)
    learner, buffer = jax.jit(agent.modules.learner.prepare)(state.learner, traj2)

    # The NumPy construction over both rollouts, [2T, B, ...].
    T, B, L = cfg.trace_len, cfg.num_envs, cfg.recurrence
    action = np.concatenate([traj1.steps["action"], traj2.steps["action"]])
    reward = np.concatenate([traj1.steps["reward"], traj2.steps["reward"]])
    first = np.concatenate([traj1.steps["first"], traj2.steps["first"]])
    onehot = np.eye(env.spec.num_actions)[action] if discrete else action
    want = np.zeros((T, B, onehot.shape[-1] + 1), np.float32)  # inputs of traj2's steps
    for t in range(T):
        g, start = T + t, first[T + t]
        want[t, ~start, :-1] = onehot[g - 1][~start]
        want[t, ~start, -1] = reward[g - 1][~start]
        if discrete:  # where an episode starts: the index 0, one-hot (R2D1's encoding)
            want[t, start, 0] = 1.0
    assert first[T + 3].all() and not first[T].any()  # both kinds of chunk start
    assert np.any(reward[T - 1] != 0) and np.any(onehot[T - 1] != 0)

    net = agent.modules.network
    for i in range(cfg.num_minibatches):
        mb = agent.modules.learner.minibatch(buffer, 0, i)
        _, inter = net.apply(
            learner.params, mb.obs, mb.first, mb.core_state, *mb.prev, mutable=["intermediates"]
        )
        inputs = np.asarray(inter["intermediates"]["core"]["inputs"][0])[..., -want.shape[-1] :]
        for j in range(mb.first.shape[1]):
            k = j // (B // cfg.num_minibatches)  # chunk index (chunk-major, then env)
            env_of = [
                e
                for e in range(B)
                if np.array_equal(buffer.data.obs[k * L : (k + 1) * L, e], mb.obs[:, j])
            ]
            assert len(env_of) == 1
            e = env_of[0]
            np.testing.assert_allclose(inputs[:, j], want[k * L : (k + 1) * L, e], atol=1e-6)
            # The chunk's stored state holds the previous action and reward of its first step.
            np.testing.assert_allclose(mb.core_state.prev_action[j], action[T + k * L - 1, e])
            np.testing.assert_allclose(mb.core_state.prev_reward[j], reward[T + k * L - 1, e])


def test_prev_action_reward_needs_a_recurrent_policy():
    with pytest.raises(ConfigError, match="--prev-action-reward needs --lstm-size > 0"):
        PPOConfig(prev_action_reward=True)


def test_hooks_are_applied_and_a_failing_hook_is_named():
    base = _agent()
    state = base.init(jax.random.PRNGKey(2))
    _, traj = _rollout(base, state)
    hooked = _agent(CFG.replace(reshape_reward=ppo_hooks.shaped))
    _, with_hook = jax.jit(hooked.modules.learner.prepare)(state.learner, traj)
    steps = dict(traj.steps)
    steps["reward"] = steps["reward"] + 0.5 - (steps["discount"] == 0).astype(jnp.float32)
    _, by_hand = jax.jit(base.modules.learner.prepare)(state.learner, traj._replace(steps=steps))
    np.testing.assert_allclose(with_hook.data.ret, by_hand.data.ret, rtol=1e-6)

    pre = _agent(CFG.replace(preprocess_obs="tests.agents.ppo_hooks:first_two"))
    spec = pre.modules.network.obs_spec
    assert tuple(getattr(spec, "shape", spec)) == (2,)
    s = pre.init(jax.random.PRNGKey(0))
    pre.compile(s)
    s, out = pre.train_iteration(s, 0, 0)
    assert np.isfinite(jax.device_get(out.metrics[-1]["loss"])).all()

    with pytest.raises(HookError, match=r"--preprocess-obs hook .*broken failed while traced"):
        _agent(CFG.replace(preprocess_obs=ppo_hooks.broken))


def test_reward_scaling_carries_each_envs_discounted_return_across_rollouts():
    """--normalize-reward: G_t = r_t + γ·G_{t-1}·(1 − first_t) per env, carried from one
    rollout to the next in the learner state, and the running mean / variance of every G_t
    so far (a NumPy reference: the exact mixture of the 1e-4 prior sample and all G_t)."""
    cfg = CFG.replace(normalize_reward=True)
    agent = _agent(cfg)
    state = agent.init(jax.random.PRNGKey(4))
    learner, actor, rewards, firsts = state.learner, state.actor, [], []
    prepare = jax.jit(agent.modules.learner.prepare)
    for _ in range(3):
        actor, traj = _rollout(agent, state._replace(learner=learner, actor=actor))
        rewards.append(np.asarray(traj.steps["reward"]))
        firsts.append(np.asarray(traj.steps["first"]))
        learner, _ = prepare(learner, traj)
    r, f = np.concatenate(rewards), np.concatenate(firsts).astype(np.float64)
    assert f[1:].any(), "no episode ended inside the rollouts (LIMIT)"
    g, every = np.zeros(cfg.num_envs), []
    for t in range(len(r)):
        g = r[t] + cfg.discount * g * (1.0 - f[t])
        every.append(g)
    every = np.stack(every)
    np.testing.assert_allclose(learner.returns, g, rtol=1e-5)
    n = every.size + 1e-4
    mean = every.sum() / n
    var = (1e-4 * 1.0 + np.square(every).sum()) / n - mean**2
    stats = learner.return_stats
    np.testing.assert_allclose([stats.mean, stats.var, stats.count], [mean, var, n], rtol=1e-4)


def _sharded_update(num_devices, **changes):
    # adam_eps = 1: see tests/agents/test_parallel.py (an update proportional to the gradient)
    cfg = CFG.replace(
        num_envs=8, epochs=2, num_minibatches=1, adam_eps=1.0, normalize_obs=True,
        normalize_reward=True, **changes,
    )  # fmt: skip
    ref = _agent(cfg)
    state = ref.init(jax.random.PRNGKey(0))
    _, traj = _rollout(ref, state)
    # returns carried from earlier rollouts, different per env, and episodes that go on
    # into this rollout (a fresh one starts them all): each device reads its envs' slice
    state = state._replace(learner=state.learner._replace(returns=jnp.arange(8.0) / 4))
    first = traj.steps["first"].at[0].set(False)
    traj = traj._replace(steps={**traj.steps, "first": first})
    if num_devices == 1:
        new, _, metrics = jax.jit(ref.absorb)(state.learner, state.replay, traj)
    else:
        agent = _agent(cfg, mesh=make_mesh(num_devices))
        learner = to_global(state.learner, agent.mesh, P())
        absorb = agent.programs["absorb"]  # the one-iteration path's, over the mesh
        new, _, metrics = absorb(learner, (), place_rollout(traj, agent.mesh))
    return jax.device_get((new.params, new.obs_stats, new.return_stats, new.returns, metrics))


RECURRENT_PREV = dict(lstm_size=8, recurrence=3, prev_action_reward=True)


# The slow tier (issue 67): the fast tier keeps one test per mechanism, sharded gradient
# averaging in tests/agents/test_parallel.py::test_sharded_update_equals_single_device,
# advantages normalised over devices in tests/losses/test_onpolicy.py and running
# statistics merged over devices in tests/agents/test_normalization.py.
@pytest.mark.slow
@pytest.mark.parametrize("changes", [{}, RECURRENT_PREV], ids=["ff", "lstm-prev"])
def test_two_devices_equal_one(changes):
    """A3C's role: synchronous data parallelism; the sharded update (pmean'd gradients,
    advantages normalised and statistics merged over devices) equals the single-device one.
    Recurrent: the chunks' states (refreshed in the second epoch) and the previous actions
    and rewards are sharded over envs with the rest."""
    one, two = _sharded_update(1, **changes), _sharded_update(2, **changes)
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)  # noqa: E731
    jax.tree.map(close, one[:4], two[:4])  # each device carried its envs' returns
    for m1, m2 in zip(one[4], two[4], strict=True):
        for k in m1:
            close(m1[k], m2[k])


ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
ENV["XLA_FLAGS"] = subprocess_xla_flags()  # one device, fast compilation


def _cli(module, *args):
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=ENV, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, f"{module} {args}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["ppo", "a2c"])
def test_train_resume_evaluate(tmp_path, agent):
    """The CLI end to end; the running statistics (learner state) survive the resume: after
    it they count every observation of both parts, not just the second."""
    run_dir = tmp_path / agent
    common = [
        "--agent", agent, "--run-dir", str(run_dir), "--no-progress", "--num-envs", "4",
        "--trace-len", "16", "--normalize-obs", "--normalize-reward", "--eval-episodes", "0",
        "--reshape-reward", "tests.agents.ppo_hooks:shaped", "--checkpoint-every", "64",
    ]  # fmt: skip
    _cli("experiments.train", *common, "--total-steps", "128")
    # A run folder's hooks are never imported: the resume names its hook again.
    _cli(
        "experiments.train", "--resume", str(run_dir), "--total-steps", "256",
        "--reshape-reward", "tests.agents.ppo_hooks:shaped",
    )  # fmt: skip
    from engine.common import build_agent, load_run, restore_learner

    args = load_run(run_dir)
    env = make_env(args.run.env, 4, 0)
    learner, _, step = restore_learner(build_agent(args, env).init_learner, run_dir)
    assert step == 256
    assert float(learner.obs_stats.count) == pytest.approx(256, abs=1e-3)
    assert float(learner.return_stats.count) == pytest.approx(256, abs=1e-3)
    assert int(learner.step) == 4
    out_file = tmp_path / "eval.json"
    out = _cli(
        "experiments.evaluate", str(run_dir), "--episodes", "3", "--argmax", "--worst", "2",
        "--out", str(out_file),
    )  # fmt: skip
    result = json.loads(out_file.read_text())
    assert result["policy"] == "greedy" and len(result["worst"]) == 2
    worst = [w["return"] for w in result["worst"]]
    assert worst == sorted(worst) and worst[0] <= result["return_mean"]
    assert out.count("worst: episode") == 2


@pytest.mark.slow
def test_dict_observations_end_to_end():
    """MiniGrid's dict observations through the actor, the rollout, the learner's buffer and
    a recurrent minibatch (whole env streams: the chunks hold exactly the stepped leaves)."""
    cfg = PPOConfig(
        num_envs=2, trace_len=4, hidden=(16,), lstm_size=8, recurrence=2, num_minibatches=2,
        epochs=1,
    )  # fmt: skip
    env = make_env("MiniGrid-DoorKey-5x5-v0", 2, 0)
    agent = PPOAgent(cfg, env)
    state = agent.init(jax.random.PRNGKey(0))
    agent.compile(state)
    rollout = agent.programs["rollout"]  # MiniGrid's conv on CPU: the host drives it
    actor, traj, placed = rollout(agent.acting_params(state.learner), state.actor)
    assert set(traj.obs) == {"image", "direction", "mission"}
    _, buffer = jax.jit(agent.modules.learner.prepare)(state.learner, placed)
    image = np.asarray(traj.obs["image"])
    assert image.shape[:2] == (4, 2)
    mb = agent.modules.learner.minibatch(buffer, 0, 0)
    assert mb.obs["image"].shape == (2, 2, *image.shape[2:])  # [L, chunks x envs, ...]
    env_of = [e for e in range(2) if np.array_equal(image[0:2, e], mb.obs["image"][:, 0])]
    assert len(env_of) == 1
    np.testing.assert_array_equal(image[2:4, env_of[0]], mb.obs["image"][:, 1])
    state, out = agent.train_iteration(state._replace(actor=actor), 1, 8)
    assert np.isfinite(jax.device_get(out.metrics[-1]["loss"])).all()


@pytest.mark.parametrize(("env_id", "expected"), [("Pong-v5", "dispatch"), ("CartPole-v1", "scan")])
def test_auto_update_loop_dispatches_convolutions_on_cpu(env_id, expected):
    """`--update-loop auto` must not put a conv weight gradient inside a rolled loop on
    XLA:CPU (13-100x slower, PERF-NOTES): image observations get one program per minibatch.
    (The check once looked at the batched sample's rank and scanned Pong, 45 env steps/s.)"""
    agent = make_agent("ppo", env_id, num_envs=2, trace_len=8, num_minibatches=2)
    assert agent.config.update_loop == "auto" and agent.modules.update_loop == expected
