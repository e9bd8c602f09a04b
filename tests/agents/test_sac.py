"""SAC / TD3 on the off-policy seam: ensemble subsets, n-step and V-trace targets through the
agent's replay batch (episode ends, truncations), PER IS weights, action scaling, the scanned
updates, and a subprocess train → resume → evaluate per agent.

References are NumPy, written from the equations over the written stream, not from the JAX
code."""

import copy
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.learning import draw_members, ensemble_min
from agents.core.offpolicy import ActingParams, step_position
from agents.sac.config import SACConfig
from agents.td3.config import TD3Config
from envs import make_env
from networks.sac import QEnsemble
from tests.agent_classes import SACAgent, TD3Agent

TINY = dict(num_envs=2, trace_len=4, batch_size=8, buffer_size=2 * 4 * 6, hidden=(8,))
GAMMA = 0.9


@pytest.fixture(scope="module")
def pendulum():
    return make_env("Pendulum-v1", 2, 0)


# --------------------------------------------------------------------------- ensembles


def test_ensemble_is_stacked_members_and_min_over_a_random_subset():
    net = QEnsemble(num_critics=5, hidden=(4,))
    obs, act = jnp.ones((3, 2)), jnp.zeros((3, 1))
    params = net.init(jax.random.PRNGKey(0), obs, act)
    leaves = jax.tree.leaves(params)
    assert all(x.shape[0] == 5 for x in leaves)  # one stacked set, not 5 modules
    q = np.asarray(net.apply(params, obs, act))
    assert q.shape == (5, 3) and len(np.unique(q[:, 0])) == 5  # members differ
    seen = set()
    for i in range(40):
        m = np.asarray(draw_members(jax.random.PRNGKey(i), 5, 2))
        assert len(set(m)) == 2 and set(m) <= set(range(5))
        seen |= set(m.tolist())
        np.testing.assert_allclose(np.asarray(ensemble_min(jnp.asarray(q), m)), q[m].min(0))
    assert seen == set(range(5))
    np.testing.assert_array_equal(np.asarray(draw_members(jax.random.PRNGKey(0), 4, 4)), range(4))


# --------------------------------------------------------------------------- targets


def _stream(num_envs, length, rng):
    """Per env: obs x_t = [t + 1000 e, noise, noise], rewards, discounts and masks of a
    stream with terminations (discount 0) and truncations (discount γ), each followed by the
    fake auto-reset transition (mask 0); behaviour log-probs."""
    obs = np.zeros((num_envs, length + 1, 3), np.float32)
    reward = rng.normal(size=(num_envs, length)).astype(np.float32)
    discount = np.full((num_envs, length), GAMMA, np.float32)
    mask = np.ones((num_envs, length), np.float32)
    for e in range(num_envs):
        obs[e, :, 0] = np.arange(length + 1) + 1000 * e
        obs[e, :, 1:] = rng.normal(size=(length + 1, 2))
        t = 2
        while t < length - 1:
            if rng.random() < 0.5:
                discount[e, t] = 0.0  # terminated at t+1
            mask[e, t + 1] = 0.0  # the fake reset transition (a truncation keeps γ)
            t += rng.integers(3, 7)
    logmu = rng.normal(size=(num_envs, length)).astype(np.float32) - 1.0
    return obs, reward, discount, mask, logmu


def _sampler(agent):
    """The agent's batch sampling, jitted: (learner, replay state, key) -> (TraceBatch,
    info, offsets)."""
    sample, replay, b = agent.modules.sample, agent.replay, agent.config.batch_size
    return jax.jit(lambda learner, state, key: sample(replay, state, learner, key, b))


def _known_learner(agent):
    """A copy of the agent's learner (its parts are shared by equal agents: not patched
    in place) whose soft values and log-probs are `_KnownValues`'."""
    learner = copy.copy(agent.modules.learner)
    known = _KnownValues(learner)
    learner.soft_value_parts, learner.log_prob = known.soft_value_parts, known.log_prob
    return learner


def _fill(agent, state, stream, iterations):
    """Write the stream into the agent's replay, one slot per iteration."""
    obs, reward, discount, mask, logmu = stream
    T, replay = agent.config.trace_len, state.replay
    add = jax.jit(agent.replay.add)
    inner = getattr(agent.replay, "base", agent.replay)
    mu_spec = inner.step_spec["mu"]
    D = agent.modules.learner.action_dim
    for k in range(iterations):
        sl = slice(k * T, (k + 1) * T)

        def tm(x, sl=sl):  # [T, E, ...]
            return jnp.asarray(np.swapaxes(x[:, sl], 0, 1))

        steps = {
            "first": tm(np.zeros_like(mask, bool)),
            "frame_reset": tm(np.zeros_like(mask, bool)),
            "action": jnp.zeros((T, obs.shape[0], D), jnp.float32),
            "mu": jax.tree.map(
                lambda spec: jnp.zeros((T, obs.shape[0], *spec.shape), spec.dtype), mu_spec
            ),
            "reward": tm(reward),
            "discount": tm(discount),
            "mask": tm(mask),
        }
        if "logp" in mu_spec:
            steps["mu"]["logp"] = tm(logmu)
        replay = add(replay, tm(obs), steps, None)
    return state._replace(replay=replay)


class _KnownValues:
    """min Q'(x, a') = x[0] / 100 and log π(a'|x) = x[2] / 10 at the fresh action a' ~ π (so
    V_soft(x) = x[0] / 100 − α x[2] / 10); log π(a|x) = x[1] / 10 at the stored action."""

    def __init__(self, learner):
        self.learner = learner

    def soft_value_parts(self, actor, critic, obs, key, members, alpha):
        return obs[..., 0] / 100.0, obs[..., 2] / 10.0

    def log_prob(self, actor, obs, action, mu):
        return obs[..., 1] / 10.0


def _vtrace_np(V, soft_r, rho, discount, mask, n, lam=1.0, rho_bar=1.0, c_bar=1.0):
    """V-trace (IMPALA eq. 1: δ_s weighted by min(ρ̄, ρ_s), traces λ·min(c̄, ρ_s)) of x_1 in a
    window of n steps: over the traced steps s = n−1 .. 1, bootstrapped at V[n]; a masked
    step (x_s begins a new episode) cuts the trace there. Every argument is indexed by the
    window's step s = 0 .. n (V) or 0 .. n−1; `rho` the importance ratios π/μ."""
    vs = V[n]
    for s in range(n - 1, 0, -1):
        if mask[s] == 0:
            vs = V[s]
            continue
        delta = min(rho_bar, rho[s]) * (soft_r[s] + discount[s] * V[s + 1] - V[s])
        vs = V[s] + delta + discount[s] * lam * min(c_bar, rho[s]) * (vs - V[s + 1])
    return vs


def _reference(stream, env, pos, n, vtrace, alpha):
    """The target of the step at `pos`: n-step, or V-trace on soft values, where V_soft(x) =
    E_π[r − α log π(a|x) + γ V_soft(x')] (Haarnoja et al. 2018, arXiv:1801.01290 eq. 3, in
    IMPALA's eq. 1) gives each traced step the entropy bonus α H(π(·|x)), H estimated as in
    V_soft, by −log π(a'|x) of the fresh action (_KnownValues)."""
    obs, reward, discount, mask, logmu = stream
    logp_fresh = lambda s: obs[env, s, 2] / 10.0  # noqa: E731
    V = lambda s: obs[env, s, 0] / 100.0 - alpha * logp_fresh(s)  # noqa: E731
    t = pos
    if not vtrace:
        g, disc = 0.0, 1.0
        for k in range(n):
            if k >= 1 and mask[env, t + k] == 0:
                return g + disc * V(t + k)
            bonus = -alpha * logp_fresh(t + k) if k >= 1 else 0.0  # x_{t+k}'s entropy bonus
            g += disc * (reward[env, t + k] + bonus)
            disc *= discount[env, t + k]
        return g + disc * V(t + n)
    w = np.arange(t, t + n + 1)  # the window's steps
    with np.errstate(over="ignore"):  # exp(10⁶) = inf, truncated to 1
        rho = np.minimum(1.0, np.exp(obs[env, w[:n], 1] / 10.0 - logmu[env, w[:n]]))
    soft_r = reward[env, w[:n]] - alpha * np.array([logp_fresh(s) for s in w[:n]])
    values = np.array([V(s) for s in w])
    vs = _vtrace_np(values, soft_r, rho, discount[env, w[:n]], mask[env, w[:n]], n)
    return reward[env, t] + discount[env, t] * vs


def test_sampled_windows_match_the_stream(pendulum):
    """The agent's sampling: each sample's window is the stream at its (env, slot·T + offset)."""
    target, n = "vtrace", 3
    cfg = SACConfig(**{**TINY, "batch_size": 64}, n_step=n, target=target, discount=GAMMA)
    agent = SACAgent(cfg, pendulum)
    state = agent.init(jax.random.PRNGKey(0))
    stream = _stream(2, 5 * cfg.trace_len, np.random.default_rng(n))
    state = _fill(agent, state, stream, 5)
    learner = _known_learner(agent)
    batch, info, offset = _sampler(agent)(state.learner, state.replay, jax.random.PRNGKey(3))
    y, _ = learner.targets(state.learner, batch, jax.random.PRNGKey(0), jnp.arange(2))
    pos = np.asarray(step_position(agent.config, info, offset))
    env = np.asarray(info.env_index)
    np.testing.assert_array_equal(np.asarray(batch.obs[0, :, 0]), stream[0][env, pos, 0])
    mask = stream[3]
    learnt = mask[env, pos] > 0
    alpha = float(np.exp(state.learner.log_alpha))
    want = np.array(
        [_reference(stream, e, p, n, target == "vtrace", alpha)
         for e, p in zip(env, pos, strict=True)]
    )  # fmt: skip
    np.testing.assert_allclose(np.asarray(y)[learnt], want[learnt], rtol=1e-5, atol=1e-5)
    for k in range(n):
        np.testing.assert_array_equal(np.asarray(batch.reward[k]), stream[1][env, pos + k])
        np.testing.assert_array_equal(np.asarray(batch.mask[k]), mask[env, pos + k])
    assert len(set(zip(env.tolist(), pos.tolist(), strict=True))) > 20  # slots, offsets vary


@pytest.mark.parametrize(
    "target, n, far", [("n-step", 1, False), ("n-step", 3, False), ("vtrace", 3, False),
                       ("vtrace", 3, True)],
)  # fmt: skip
def test_window_targets_see_terminations_and_truncations(pendulum, target, n, far):
    """Every transition of the stream, through window_at at each offset: n-step and V-trace
    targets equal the reference (terminal: no bootstrap; truncated: bootstrap from the final
    observation; nothing crosses the fake reset transition). `far`: a third of the stored
    behaviour log-probs are −10⁶ (an action deep in an old policy's tail, as --overwrite-mu
    can store), so π/μ overflows float32: the targets stay finite, with ρ truncated at 1."""
    from agents.core.learning import TraceBatch
    from agents.core.offpolicy import window_at

    cfg = SACConfig(**TINY, n_step=n, target=target, discount=GAMMA)
    agent = SACAgent(cfg, pendulum)
    state = agent.init(jax.random.PRNGKey(0), jit=True)  # programs, not op by op
    stream = _stream(2, 5 * cfg.trace_len, np.random.default_rng(7))
    if far:
        logmu = stream[4].copy()
        logmu[:, ::3] = -1e6
        stream = (*stream[:4], logmu)
    state = _fill(agent, state, stream, 5)
    learner = _known_learner(agent)
    env = np.repeat([0, 1], 3 * 4)
    slot = np.tile(np.repeat([0, 1, 2], 4), 2)
    offset = np.tile(np.arange(4), 6)
    from replay import ReplaySample, SampleInfo

    @jax.jit
    def targets(replay, learner_state):
        sample = agent.replay.gather(replay, jnp.asarray(env), jnp.asarray(slot))
        ones = jnp.ones(len(env))
        info = SampleInfo(jnp.asarray(env), jnp.asarray(slot), ones, ones)
        full = TraceBatch.from_sample(ReplaySample(sample, info), agent.replay.window_len)
        batch = window_at(full, jnp.asarray(offset), n)
        return learner.targets(learner_state, batch, jax.random.PRNGKey(0), jnp.arange(2))

    y, rho_mean = targets(state.replay, state.learner)
    assert np.isfinite(np.asarray(rho_mean))  # logged, and checked to be finite, per update
    pos = slot * 4 + offset
    mask, discount = stream[3], stream[2]
    alpha = float(np.exp(state.learner.log_alpha))
    want = np.array(
        [_reference(stream, e, p, n, target == "vtrace", alpha)
         for e, p in zip(env, pos, strict=True)]
    )  # fmt: skip
    learnt = mask[env, pos] > 0
    np.testing.assert_allclose(np.asarray(y)[learnt], want[learnt], rtol=1e-5, atol=1e-5)
    assert (discount[env, pos][learnt] == 0).any()  # terminations among them
    truncated = (discount[env, pos] > 0) & (mask[env, np.minimum(pos + 1, 39)] == 0)
    assert truncated[learnt].any()


@pytest.mark.parametrize("lam, rho_bar, c_bar", [(1.0, 1.0, 1.0), (0.7, 2.0, 0.5)])
def test_discrete_vtrace_targets_match_the_soft_bellman_reference(lam, rho_bar, c_bar):
    """Discrete SAC, real actor and target critics: V-trace on soft values, V_soft(x) =
    Σ_a π(a|x) (min Q'(x, a) − α log π(a|x)), each traced step's reward carrying the exact
    entropy bonus α H(π(·|x)), ρ = π(a|x)/μ(a|x) from the stored μ, truncated at ρ̄
    (--vtrace-rho) in the TD errors and at c̄ (--vtrace-c) times λ (--vtrace-lambda) in the
    traces; terminations, masked (reset) steps and far-off μ among the windows. The
    reference is NumPy from the networks' raw outputs."""
    from agents.core.learning import TraceBatch

    env = make_env("CartPole-v1", 2, 0)
    n, B, A = 4, 64, 2
    alpha = 0.7
    cfg = SACConfig(**TINY, n_step=n, target="vtrace", discount=GAMMA, vtrace_lambda=lam,
                    vtrace_rho=rho_bar, vtrace_c=c_bar)  # fmt: skip
    agent = SACAgent(cfg, env)
    state = agent.init(jax.random.PRNGKey(0), jit=True)  # programs, not op by op
    log_alpha = jnp.log(jnp.float32(alpha))
    state = state._replace(learner=state.learner._replace(log_alpha=log_alpha))
    rng = np.random.default_rng(5)
    obs = rng.normal(size=(n + 1, B, 4)).astype(np.float32) * 2.0
    action = rng.integers(0, A, (n, B)).astype(np.int32)
    mu = rng.dirichlet([0.3, 0.3], (n, B)).astype(np.float32)  # some μ(a|x) near 0 and 1
    reward = rng.normal(size=(n, B)).astype(np.float32)
    discount = np.where(rng.random((n, B)) < 0.2, 0.0, GAMMA).astype(np.float32)
    mask = (rng.random((n, B)) > 0.15).astype(np.float32)
    mask[0] = 1.0  # step 0 is the learnt one
    batch = TraceBatch(
        obs=jnp.asarray(obs), first=jnp.zeros((n + 1, B), bool), action=jnp.asarray(action),
        mu=jnp.asarray(mu), reward=jnp.asarray(reward), discount=jnp.asarray(discount),
        mask=jnp.asarray(mask), core_state=(), is_weight=jnp.ones(B),
    )  # fmt: skip
    members = jnp.arange(2)
    learner = agent.modules.learner
    y, _ = jax.jit(learner.targets)(state.learner, batch, jax.random.PRNGKey(1), members)

    @jax.jit
    def raw_outputs(s):  # the networks' outputs the reference starts from
        actor, critic = learner.actor, learner.critic
        return actor.apply(s.params["actor"], obs), critic.apply(s.target_critic, obs)

    logits, q = (np.asarray(x, np.float64) for x in raw_outputs(state.learner))
    q_min = q[:2].min(0)  # [n+1, B, A]
    z = logits - logits.max(-1, keepdims=True)
    log_pi = z - np.log(np.exp(z).sum(-1, keepdims=True))
    pi = np.exp(log_pi)
    V = (pi * (q_min - alpha * log_pi)).sum(-1)  # [n+1, B]
    H = -(pi * log_pi).sum(-1)
    ratio = pi[:n] / mu.astype(np.float64)
    rho = np.take_along_axis(ratio, action[..., None], -1)[..., 0]  # of a_s
    vs = [_vtrace_np(V[:, b], (reward + alpha * H[:n])[:, b], rho[:, b], discount[:, b],
                     mask[:, b], n, lam, rho_bar, c_bar) for b in range(B)]  # fmt: skip
    want = reward[0] + discount[0] * np.array(vs)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-4, atol=1e-4)
    assert (discount[1:] == 0).any() and (mask[1:] == 0).any()


# --------------------------------------------------------------------------- PER


def test_per_is_weights_are_annealed_powers_of_the_sampling_probabilities(pendulum):
    cfg = SACConfig(
        **TINY, prioritized=True, importance_exponent=0.4, importance_exponent_steps=1000
    )
    agent = SACAgent(cfg, pendulum)
    state = agent.init(jax.random.PRNGKey(0))
    state = _fill(agent, state, _stream(2, 20, np.random.default_rng(0)), 5)
    n, c = 2, agent.replay.traces_per_env
    valid = np.asarray(agent.replay.valid_mask(state.replay))
    prio = np.random.default_rng(1).uniform(0.1, 3.0, (n, c)).astype(np.float32)
    envs, slots = np.nonzero(np.broadcast_to(valid, (n, c)))
    replay = agent.replay.set_priorities(
        state.replay, jnp.asarray(envs), jnp.asarray(slots), jnp.asarray(prio[envs, slots])
    )
    sample = _sampler(agent)
    for env_steps, beta in ((0, 0.4), (500, 0.7), (5000, 1.0)):
        learner = state.learner._replace(env_steps=jnp.asarray(env_steps, jnp.int32))
        batch, info, _ = sample(learner, replay, jax.random.PRNGKey(env_steps))
        p = prio[envs, slots]
        prob = prio[np.asarray(info.env_index), np.asarray(info.slot)] / p.sum()
        w = (1.0 / (len(p) * prob)) ** beta
        np.testing.assert_allclose(np.asarray(batch.is_weight), w / w.max(), rtol=1e-4)
    # A slot becoming valid enters at the maximum priority so far (Schaul et al. 2016).
    newer = _fill(agent, state._replace(replay=replay), _stream(2, 4, np.random.default_rng(2)), 1)
    s = int(replay.base.write_slot) - 1  # the newest slot, valid after the next add
    assert not valid[s] and np.asarray(agent.replay.valid_mask(newer.replay))[s]
    np.testing.assert_allclose(np.asarray(newer.replay.priorities[:, s]), prio[envs, slots].max())


# --------------------------------------------------------------------------- actions


def test_actions_are_scaled_to_the_env_bounds(pendulum):
    from agents import losses

    agent = SACAgent(SACConfig(**TINY), pendulum)
    state = agent.init(jax.random.PRNGKey(0))
    low, high = pendulum.spec.action_low, pendulum.spec.action_high
    assert np.all(low == -2.0) and np.all(high == 2.0)
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(64, 3)), jnp.float32)
    actor = state.learner.params["actor"]
    for explore in (False, True):
        out = agent.select_action(
            ActingParams(actor, jnp.asarray(explore), ()), obs, None, (), jax.random.PRNGKey(1)
        )
        a, env_a = np.asarray(out.action), np.asarray(out.env_action)
        assert np.all(np.abs(a) <= 1.0)
        np.testing.assert_allclose(
            env_a, low + (a + 1.0) * (high - low) / 2.0, rtol=1e-6, atol=1e-6
        )
        if not explore:
            np.testing.assert_allclose(np.tanh(np.asarray(out.mu["pre_tanh"])), a, rtol=1e-5)
            mean, log_std = agent.modules.learner.actor.apply(actor, obs)
            logp = losses.tanh_gaussian_log_prob(
                out.mu["pre_tanh"], mean, log_std, low=low, high=high
            )
            np.testing.assert_allclose(np.asarray(out.mu["logp"]), np.asarray(logp), rtol=1e-5)
        else:  # uniform on the box
            np.testing.assert_allclose(np.asarray(out.mu["logp"]), -np.log(4.0), rtol=1e-6)
    params = ActingParams(actor, jnp.asarray(False), ())
    greedy = agent.act(True)(params, obs, None, (), jax.random.PRNGKey(2))[0]
    assert np.all(np.abs(np.asarray(greedy)) <= 2.0)
    td3 = TD3Agent(TD3Config(**TINY), pendulum)
    ts = td3.init(jax.random.PRNGKey(0))
    out = td3.select_action(
        ActingParams(ts.learner.params["actor"], jnp.asarray(False), ()), obs, None, (),
        jax.random.PRNGKey(1),
    )  # fmt: skip
    a = np.asarray(out.action)
    np.testing.assert_allclose(np.asarray(out.env_action), 2.0 * a, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------- scanned updates


@pytest.mark.slow
@pytest.mark.parametrize("agent_cls, cfg_cls", [(SACAgent, SACConfig), (TD3Agent, TD3Config)])
def test_scanned_updates_equal_single_updates(pendulum, agent_cls, cfg_cls):
    agent = agent_cls(cfg_cls(**TINY, update_to_data=0.5), pendulum)
    assert agent.updates_per_program == 4
    state = agent.init(jax.random.PRNGKey(0))
    state = _fill(agent, state, _stream(2, 20, np.random.default_rng(0)), 5)
    scan = jax.jit(agent.scanned_updates)
    one = jax.jit(agent.replay_update)
    copy = lambda t: jax.tree.map(jnp.copy, t)  # noqa: E731
    ls, _, ms = scan(copy(state.learner), copy(state.replay))
    l1, r1 = copy(state.learner), copy(state.replay)
    singles = []
    for _ in range(4):
        l1, r1, m = one(l1, r1)
        singles.append(m)
    for a, b in zip(jax.tree.leaves(ls.params), jax.tree.leaves(l1.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
    assert ms["value_loss"].shape == (4,)
    np.testing.assert_allclose(
        np.asarray(ms["value_loss"]), [float(m["value_loss"]) for m in singles], rtol=1e-4
    )


@pytest.mark.slow
def test_discrete_sac_learns_finite_updates():
    env = make_env("CartPole-v1", 2, 0)
    agent = SACAgent(SACConfig(**TINY), env)
    assert agent.modules.learner.discrete
    state = agent.init(jax.random.PRNGKey(0))
    for it in range(4):
        state, out = agent.train_iteration(state, it, it * 8)
    state, out = agent.train_iteration(state, 300, 2000)
    assert out.metrics and all(np.isfinite(np.asarray(v)).all() for v in out.metrics[0].values())


def test_config_errors_name_the_flag():
    with pytest.raises(ValueError, match="--critic-subset must be in"):
        SACConfig(**TINY, num_critics=2, critic_subset=3)
    with pytest.raises(ValueError, match="--update-to-data must be > 0"):
        SACConfig(**TINY, update_to_data=0.0)
    with pytest.raises(ValueError, match="--overwrite-mu needs --target vtrace"):
        SACConfig(**TINY, overwrite_mu=True)
    with pytest.raises(ValueError, match="td3 needs continuous actions"):
        TD3Agent(TD3Config(**TINY), make_env("CartPole-v1", 2, 0))


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["sac", "td3"])
def test_train_resume_evaluate(tmp_path, agent):
    """The CLI end to end with --normalize-obs (and RND for SAC): the running statistics are
    learner state, so after the resume they count the observations of both parts."""
    from engine.common import build_agent, load_run, restore_learner
    from tests.experiments.test_train_smoke import run

    run_dir = tmp_path / agent
    common = [
        "--agent", agent, "--env", "Pendulum-v1", "--num-envs", "2", "--trace-len", "4",
        "--batch-size", "8", "--buffer-size", "400", "--hidden", "8", "--start-train-at",
        "16", "--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "2",
        "--normalize-obs",
    ]  # fmt: skip
    if agent == "td3":  # one update per iteration: no scanned program to compile
        common += ["--update-to-data", "0.125"]
    else:
        common += ["--rnd-coef", "0.1"]
    run("experiments.train", *common, "--total-steps", "48", "--checkpoint-every", "24")
    run("experiments.train", "--resume", str(run_dir), "--total-steps", "64", "--no-progress")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 64
    agent = build_agent(load_run(run_dir), pendulum_env())
    learner, _, step = restore_learner(agent.init_learner, run_dir)
    assert step == 64
    assert float(learner.obs_stats.count) == pytest.approx(64, abs=1e-3)
    if agent == "sac":
        assert float(learner.rnd.obs_stats.count) == pytest.approx(64, abs=1e-3)
        assert float(learner.rnd.error_stats.count) == pytest.approx(64, abs=1e-3)
    run("experiments.evaluate", str(run_dir), "--episodes", "1", "--out", str(tmp_path / "e.json"))
    assert json.loads((tmp_path / "e.json").read_text())["episodes"] == 1


def pendulum_env():
    return make_env("Pendulum-v1", 2, 0)


def test_overwrite_mu_rewrites_only_the_sampled_windows(pendulum):
    cfg = SACConfig(**TINY, n_step=2, target="vtrace", overwrite_mu=True)
    agent = SACAgent(cfg, pendulum)
    state = agent.init(jax.random.PRNGKey(0))
    state = _fill(agent, state, _stream(2, 20, np.random.default_rng(0)), 5)
    before = np.asarray(state.replay.steps["mu"]["logp"])
    batch, info, offset = _sampler(agent)(state.learner, state.replay, jax.random.PRNGKey(1))
    replay = agent.modules.after_update(agent.replay, state.replay, state.learner, batch, info,
                                        offset)  # fmt: skip
    after = np.asarray(replay.steps["mu"]["logp"])
    actor = state.learner.params["actor"]
    want = np.asarray(agent.modules.learner.log_prob(actor, batch.obs[:2], batch.action, batch.mu))
    env, pos = np.asarray(info.env_index), np.asarray(step_position(agent.config, info, offset))
    touched = np.zeros_like(before, bool)
    for k in range(2):
        np.testing.assert_allclose(
            after[env, (pos + k) % before.shape[1]], want[k], rtol=1e-5, atol=1e-6
        )
        touched[env, (pos + k) % before.shape[1]] = True
    np.testing.assert_array_equal(after[~touched], before[~touched])


# The slow tier (issue 67): the fast tier's sharded training run with identical replicas is
# tests/agents/test_parallel.py::test_sharded_agent_trains_and_keeps_replicas_identical (ACER).
@pytest.mark.slow
@pytest.mark.parametrize(
    "options", [{}, {"normalize_obs": True, "rnd_coef": 0.1}], ids=["options0", "options1"]
)
def test_sharded_sac_trains_with_scanned_updates_and_identical_replicas(options):
    """Two devices; with --normalize-obs and RND the statistics (psum'd over devices in
    absorb) and RND's predictor (pmean'd gradients) stay identical on both."""
    from jax.sharding import PartitionSpec as P

    from agents.core.parallel import make_mesh

    cfg = SACConfig(**{**TINY, "num_envs": 4, "batch_size": 8}, start_train_at=16, n_step=2,
                    **options)  # fmt: skip
    agent = SACAgent(cfg, make_env("Pendulum-v1", 4, 0), mesh=make_mesh(2))
    state = agent.init(jax.random.PRNGKey(0))
    agent.compile(state)
    for it in range(3):
        state, out = agent.train_iteration(state, it, it * 16)
    assert int(state.learner.step) == 32 and len(out.metrics) == 1  # scans of 16 updates
    assert all(np.isfinite(np.asarray(v)).all() for v in jax.device_get(out.metrics[0]).values())
    assert set(out.metrics[0]) == set(agent.metric_names)
    for leaf in jax.tree.leaves(state.learner):
        shards = [np.asarray(s.data) for s in leaf.addressable_shards]
        for s in shards[1:]:
            np.testing.assert_array_equal(shards[0], s)
    if options:
        assert float(state.learner.obs_stats.count) == pytest.approx(48, abs=1e-3)
        assert float(state.learner.rnd.error_stats.count) == pytest.approx(48, abs=1e-3)
    assert state.replay.frames.sharding.spec == P("data")


def test_redq_preset_updates_the_actor_once_per_env_step():
    """REDQ (Chen et al. 2021, Algorithm 1; their policy_update_delay = 20): G = 20 critic
    updates per env step, one actor and temperature update. The learner steps the actor
    every `policy_delay` updates, so the preset's delay is its update-to-data ratio."""
    from engine.args import parse_train_args

    cfg = parse_train_args(["--agent", "sac", "--preset", "redq-mujoco"]).config
    assert cfg.update_to_data == 20.0 and cfg.policy_delay == 20
    assert cfg.num_critics == 10 and cfg.critic_subset == 2 and cfg.actor_q == "mean"


def test_sharded_td3_update_keeps_each_rows_td(pendulum):
    """Data parallelism splits the batch's rows over devices: each row's |q − y| (the
    priorities written back to the replay) and the metrics must be those of one device
    updating on the whole batch (TD3 without smoothing noise: a deterministic update).
    Averaging per-row arrays over devices would mix rows. The fast tier's test of per-row
    outputs under sharding (Reactor's learner and recurrent SAC's are the slow tier's,
    issue 67)."""
    from jax.sharding import PartitionSpec as P

    from agents.core.learning import TraceBatch
    from agents.core.parallel import DATA, make_mesh

    learner = TD3Agent(TD3Config(**TINY, target_noise=0.0), pendulum).modules.learner
    n, B, D = 1, 8, pendulum.spec.obs_shape[0]
    rng = np.random.default_rng(0)
    batch = TraceBatch(
        obs=jnp.asarray(rng.normal(size=(n + 1, B, D)), jnp.float32),
        first=jnp.zeros((n + 1, B), jnp.float32),
        action=jnp.asarray(rng.uniform(-1, 1, size=(n, B, 1)), jnp.float32),
        mu=(),
        reward=jnp.asarray(rng.normal(size=(n, B)), jnp.float32),
        discount=jnp.full((n, B), GAMMA, jnp.float32),
        mask=jnp.ones((n, B), jnp.float32),
        core_state=(),
        is_weight=jnp.asarray(rng.uniform(0.5, 1.0, size=B), jnp.float32),
    )
    state = learner.init(jax.random.PRNGKey(1), batch.obs[0])
    _, m1, td1 = jax.jit(learner.update)(state, batch)
    rows = TraceBatch(*(P() if isinstance(f, tuple) else P(DATA) if f.ndim == 1 else P(None, DATA)
                        for f in batch))  # fmt: skip
    sharded = jax.shard_map(
        lambda s, b: learner.update(s, b, axis_name=DATA),
        mesh=make_mesh(2),
        in_specs=(P(), rows),
        out_specs=(P(), P(), P(DATA)),
    )
    _, m2, td2 = jax.jit(sharded)(state, batch)
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)  # noqa: E731
    assert np.ptp(np.asarray(td1)) > 1e-3  # rows that differ: mixing them would show
    close(td1, td2)
    for k in ("q_mean", "target_mean", "td_abs", "value_loss"):
        close(m1[k], m2[k])
    # With smoothing noise, each device draws its own (agents.core.learning.device_keys):
    # the same four rows on both devices get different targets.
    noisy = TD3Agent(TD3Config(**TINY), pendulum).modules.learner

    def repeat(x, axis):  # rows 0-3 again as rows 4-7
        return jnp.concatenate([jnp.take(x, jnp.arange(4), axis)] * 2, axis)

    time_major = ("obs", "first", "action", "reward", "discount", "mask")
    twice = batch._replace(
        **{f: repeat(getattr(batch, f), 1) for f in time_major},
        is_weight=repeat(batch.is_weight, 0),
    )
    sharded = jax.shard_map(
        lambda s, b: noisy.update(s, b, axis_name=DATA),
        mesh=make_mesh(2),
        in_specs=(P(), rows),
        out_specs=(P(), P(), P(DATA)),
    )
    td = np.asarray(jax.jit(sharded)(state, twice)[2])
    assert not np.allclose(td[:4], td[4:])


def test_td3_update_targets_loss_and_delayed_policy_step(pendulum):
    """TD3 (Fujimoto et al. 2018, Algorithm 1) without smoothing noise: y = r + γ'·min_i
    Q'_i(x', π'(x')), the critic loss ½ Σ_i mean_b w_b (Q_i(x, a) − y)², and with policy
    delay d the actor and the target networks move only at updates 0, d, 2d, ... (the
    critics at every one). The networks' outputs come from the networks; the rest is NumPy."""
    from agents.core.learning import TraceBatch

    learner = TD3Agent(
        TD3Config(**TINY, target_noise=0.0, policy_delay=2), pendulum
    ).modules.learner
    rng = np.random.default_rng(3)
    B = 8
    batch = TraceBatch(
        obs=jnp.asarray(rng.normal(size=(2, B, 3)), jnp.float32),
        first=jnp.zeros((2, B), jnp.float32),
        action=jnp.asarray(rng.uniform(-1, 1, size=(1, B, 1)), jnp.float32),
        mu=(),
        reward=jnp.asarray(rng.normal(size=(1, B)), jnp.float32),
        discount=jnp.asarray(np.where(rng.random((1, B)) < 0.3, 0.0, GAMMA), jnp.float32),
        mask=jnp.ones((1, B), jnp.float32),
        core_state=(),
        is_weight=jnp.asarray(rng.uniform(0.3, 1.0, size=B), jnp.float32),
    )
    state = learner.init(jax.random.PRNGKey(2), batch.obs[0])
    tgt = state.target_params
    a_next = learner.actor.apply(tgt["actor"], batch.obs[1])
    q_next = np.asarray(learner.critic.apply(tgt["critic"], batch.obs[1], a_next))  # [N, B]
    y = np.asarray(batch.reward[0]) + np.asarray(batch.discount[0]) * q_next.min(0)
    q = np.asarray(learner.critic.apply(state.params["critic"], batch.obs[0], batch.action[0]))
    w = np.asarray(batch.is_weight)
    update = jax.jit(learner.update)
    new, metrics, td = update(state, batch)
    np.testing.assert_allclose(float(metrics["target_mean"]), y.mean(), rtol=1e-5, atol=1e-6)
    want_loss = 0.5 * np.sum(np.mean(w[None] * (q - y[None]) ** 2, axis=-1))
    np.testing.assert_allclose(float(metrics["value_loss"]), want_loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(td), np.abs(q.mean(0) - y), rtol=1e-5, atol=1e-6)

    def moved(a, b):
        pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
        return not all(np.array_equal(x, y) for x, y in pairs)

    before = jax.device_get(state)
    for step in range(4):
        after = jax.device_get(new)
        assert moved(after.params["critic"], before.params["critic"])
        policy_step = step % 2 == 0
        assert moved(after.params["actor"], before.params["actor"]) == policy_step, step
        assert moved(after.target_params, before.target_params) == policy_step, step
        before = after
        new, *_ = update(new, batch)


@pytest.mark.parametrize("agent", ["sac", "td3"])
def test_prioritized_replay_flags_are_dqns_and_the_former_names_still_parse(
    agent, capsys, tmp_path
):
    """One vocabulary for prioritized replay (issue 66): SAC and TD3 take DQN's
    --priority-exponent / --importance-exponent / --importance-exponent-steps; their former
    --per-alpha / --per-beta / --per-beta-steps parse to them with one deprecation line each,
    and a run folder saved under the former names loads under the new ones."""
    from engine.args import parse
    from engine.common import load_run

    argv = ["--agent", agent, "--prioritized", "--per-alpha", "0.5", "--per-beta=0.3",
            "--per-beta-steps", "7"]  # fmt: skip
    cfg = parse(argv).config
    assert (cfg.priority_exponent, cfg.importance_exponent) == (0.5, 0.3)
    assert cfg.importance_exponent_steps == 7
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"warning: --{old} is deprecated: it is --{new} now (the old name goes in 0.4)"
        for old, new in (("per-alpha", "priority-exponent"), ("per-beta", "importance-exponent"),
                         ("per-beta-steps", "importance-exponent-steps"))
    ]  # fmt: skip
    with pytest.raises(ValueError, match="--priority-exponent must be in"):
        parse(["--agent", agent, "--prioritized", "--per-alpha", "1.5"])
    # DQN never had the former names: they stay another agent's flags there
    with pytest.raises(ValueError, match="--per-alpha"):
        parse(["--agent", "dqn", "--per-alpha", "0.5"])
    import dataclasses
    import json

    args = parse(["--agent", agent, "--prioritized", "--priority-exponent", "0.7"])
    saved = dataclasses.asdict(args.config)
    for old, new in type(args.config).RENAMED.items():
        saved[old] = saved.pop(new)
    run = dataclasses.asdict(args.run)
    (tmp_path / "config.json").write_text(json.dumps({"run": run, "agent_config": saved}))
    assert load_run(tmp_path).config == args.config
