"""Tests for envs/: auto-reset semantics, host vs XLA, Atari preprocessing, gymnasium fallback."""

from __future__ import annotations

import functools

import envpool
import gymnasium
import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs import EnvSpec, TimeStep, VecEnv, XlaEnvState, make_env, make_eval_env
from envs.core import finalize_step

BACKENDS = ["envpool", "gymnasium"]


def _stack(steps: list[TimeStep]) -> TimeStep:
    columns = zip(*steps, strict=True)
    return TimeStep(*(np.stack([np.asarray(f) for f in fields]) for fields in columns))


def _check_invariants(ts: TimeStep) -> None:
    """Semantics every backend must honour, on a [T, B] TimeStep that starts at a reset."""
    done = ts.terminated | ts.truncated
    assert not np.any(ts.terminated & ts.truncated)
    assert np.all(ts.first[0])
    np.testing.assert_array_equal(ts.first[1:], done[:-1])
    # The fake auto-reset step: reward 0, no flags.
    assert np.all(ts.reward[ts.first] == 0)
    assert np.all(ts.raw_reward[ts.first] == 0)
    assert not np.any(done[ts.first])
    assert not np.any(ts.game_over & ~done)
    np.testing.assert_array_equal(ts.frame_reset[1:], ts.game_over[:-1])
    assert not np.any(ts.frame_reset & ~ts.first)


def _run_host(env: VecEnv, actions: np.ndarray) -> TimeStep:
    steps = [env.reset()]
    steps += [env.step(a) for a in actions]
    return _stack(steps)


# ----- termination vs truncation ------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_cartpole_truncation(backend):
    with make_env("CartPole-v1", 2, seed=3, max_episode_steps=5, backend=backend) as env:
        assert env.spec.backend == backend
        assert env.spec.max_episode_steps == 5
        # Alternating pushes keep the pole up for far longer than 5 steps.
        actions = np.array([[0, 1], [1, 0]] * 6, dtype=np.int32)[:12]
        ts = _run_host(env, actions)
    _check_invariants(ts)
    assert ts.reward.dtype == np.float32 and ts.obs.dtype == np.float32
    assert not ts.terminated.any()
    # Rows: 0 is the reset, 5 the 5th step (time limit), 6 the fake reset step, 11 the next limit.
    np.testing.assert_array_equal(np.flatnonzero(ts.truncated[:, 0]), [5, 11])
    np.testing.assert_array_equal(ts.truncated[:, 0], ts.truncated[:, 1])
    assert ts.game_over[5].all() and ts.frame_reset[6].all() and ts.first[6].all()
    np.testing.assert_array_equal(ts.reward[6], [0.0, 0.0])
    np.testing.assert_array_equal(ts.reward[1:6], 1.0)
    assert not ts.first[7].any()
    # The reset obs is a fresh CartPole start state (every component in [-0.05, 0.05]).
    assert np.abs(ts.obs[6]).max() <= 0.05
    # The truncated step's obs is the episode's last, which the learner bootstraps from, not
    # a reset one: it follows the previous by CartPole's Euler step x' = x + τ·ẋ (τ = 0.02).
    for t in (5, 11):
        np.testing.assert_allclose(
            ts.obs[t, :, 0], ts.obs[t - 1, :, 0] + 0.02 * ts.obs[t - 1, :, 1], rtol=1e-5
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_cartpole_termination(backend):
    with make_env("CartPole-v1", 2, seed=0, backend=backend) as env:
        # Always pushing right tips the pole over in about 10 steps.
        ts = _run_host(env, np.ones((40, 2), dtype=np.int32))
    _check_invariants(ts)
    assert not ts.truncated.any()
    for b in range(2):
        t = int(np.flatnonzero(ts.terminated[:, b])[0])
        assert 5 <= t <= 30
        assert ts.game_over[t, b] and ts.reward[t, b] == 1.0
        assert ts.first[t + 1, b] and ts.frame_reset[t + 1, b] and ts.reward[t + 1, b] == 0.0
        assert not (ts.terminated[t + 1, b] or ts.truncated[t + 1, b])
        assert np.abs(ts.obs[t + 1, b]).max() <= 0.05  # a reset obs, the action was ignored
        assert np.abs(ts.obs[t, b, 2]) > 0.2  # the final obs: pole angle past the limit


def test_step_before_reset_raises():
    with make_env("CartPole-v1", 1, seed=0) as env, pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(1, np.int32))


# ----- host vs XLA ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env_id", "kwargs", "steps"),
    [("CartPole-v1", {}, 60), ("Pong-v5", {"max_episode_steps": 20}, 50)],
)
def test_xla_scan_matches_host(env_id, kwargs, steps):
    rng = np.random.default_rng(7)
    host_env = make_env(env_id, 2, seed=11, **kwargs)
    xla_env = make_env(env_id, 2, seed=11, **kwargs)
    assert xla_env.has_xla
    n = host_env.spec.num_actions
    actions = rng.integers(0, n, size=(steps, 2)).astype(np.int32)
    host = _run_host(host_env, actions)

    state, reset_ts = xla_env.xla_reset()
    assert isinstance(state, XlaEnvState)

    @jax.jit
    def rollout(state, actions):
        return jax.lax.scan(xla_env.xla_step, state, actions)

    state, xla_steps = rollout(state, jnp.asarray(actions))
    assert all(isinstance(x, jax.Array) for x in xla_steps)
    for name in TimeStep._fields:
        h = getattr(host, name)
        x0 = np.asarray(getattr(reset_ts, name))
        x = np.asarray(getattr(xla_steps, name))
        assert h.dtype == x.dtype, name
        np.testing.assert_array_equal(h[0], x0, err_msg=name)
        np.testing.assert_array_equal(h[1:], x, err_msg=name)
    _check_invariants(host)
    # The window must exercise an auto-reset, or the comparison proves little.
    assert host.first[1:].any()
    last_done = host.terminated[-1] | host.truncated[-1]
    np.testing.assert_array_equal(np.asarray(state.prev_done), last_done)
    host_env.close()
    xla_env.close()


def test_xla_bad_action_shape_raises_at_trace_time():
    env = make_env("CartPole-v1", 2, seed=0)
    state, _ = env.xla_reset()
    with pytest.raises(ValueError, match="shape"):
        jax.jit(env.xla_step)(state, jnp.zeros((3,), jnp.int32))
    env.close()


# ----- Atari ---------------------------------------------------------------------------------


def _atari_run(env: VecEnv, steps: int, seed: int) -> tuple[TimeStep, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    steps_ts = [env.reset()]
    keys = {"lives": "lives", "elapsed": "elapsed_step", "reward": "reward"}
    infos = {k: [env.last_info[v]] for k, v in keys.items()}
    for _ in range(steps):
        a = rng.integers(0, env.spec.num_actions, size=env.spec.num_envs).astype(np.int32)
        steps_ts.append(env.step(a))
        for k, v in keys.items():
            infos[k].append(env.last_info[v])
        np.testing.assert_array_equal(env.last_info["env_id"], np.arange(env.spec.num_envs))
    return _stack(steps_ts), {k: np.stack(v) for k, v in infos.items()}


def _all_frames_equal(obs: np.ndarray) -> np.ndarray:
    """[..., 4, 84, 84] -> [...]: the 4 stacked frames are copies of one frame."""
    return np.all(obs == obs[..., :1, :, :], axis=(-3, -2, -1))


def test_atari_frame_stack_and_episodic_life_train():
    with make_env("Breakout-v5", 2, seed=1, train=True) as env:
        spec = env.spec
        assert spec.is_atari and spec.episodic_life and spec.reward_clip
        assert spec.obs_shape == (4, 84, 84) and spec.obs_dtype == np.uint8
        assert spec.frame_stack == 4 and spec.num_actions == 4 and spec.discrete
        assert spec.max_episode_steps == 27000
        ts, info = _atari_run(env, 300, seed=0)
    _check_invariants(ts)
    assert ts.obs.dtype == np.uint8 and ts.obs.shape == (301, 2, 4, 84, 84)

    # Game resets (after reset() and after game over): the stack is 4 copies of the first frame.
    assert _all_frames_equal(ts.obs[0]).all()
    assert _all_frames_equal(ts.obs[ts.frame_reset]).all()
    # Every other step, life-loss resets included, shifts the stack by exactly one frame.
    shifted = np.all(ts.obs[1:, :, :3] == ts.obs[:-1, :, 1:], axis=(-3, -2, -1))
    assert shifted[~ts.frame_reset[1:]].all()
    # envpool restarts the game (elapsed_step back to 0) exactly where we say frame_reset.
    np.testing.assert_array_equal(ts.frame_reset, info["elapsed"] == 0)

    # Episodic life: a life loss terminates without ending the game.
    life_loss = ts.terminated & ~ts.game_over
    assert life_loss.sum() >= 4
    t, b = np.nonzero(life_loss)
    assert np.all(info["lives"][t, b] > 0)
    # The step after a life loss is `first` (a fake transition), but the stack is not refilled
    # and the game goes on: same lives, elapsed_step not reset.
    assert ts.first[t + 1, b].all() and not ts.frame_reset[t + 1, b].any()
    assert not _all_frames_equal(ts.obs[t + 1, b]).any()
    np.testing.assert_array_equal(info["lives"][t + 1, b], info["lives"][t, b])
    np.testing.assert_array_equal(info["elapsed"][t + 1, b], info["elapsed"][t, b])
    # Real game over: the last life is gone, and the next obs starts a new game.
    t, b = np.nonzero(ts.game_over)
    assert len(t) >= 1 and np.all(info["lives"][t, b] == 0)
    assert ts.frame_reset[t + 1, b].all() and np.all(info["lives"][t + 1, b] == 5)


def test_atari_eval_has_no_life_loss_terminations():
    with make_env("Breakout-v5", 2, seed=1, train=False) as env:
        assert not env.spec.episodic_life and not env.spec.reward_clip
        ts, info = _atari_run(env, 300, seed=0)
    _check_invariants(ts)
    # Lives are lost (the game goes on through them) ...
    assert (np.diff(info["lives"], axis=0) < 0).any()
    # ... but only the real game over terminates, and it always refills the stack.
    np.testing.assert_array_equal(ts.terminated, ts.game_over)
    t, b = np.nonzero(ts.terminated)
    assert len(t) >= 1 and np.all(info["lives"][t, b] == 0)
    np.testing.assert_array_equal(ts.frame_reset, ts.first)


def test_the_evaluation_env_keeps_the_trainings_life_handling():
    """`make_eval_env`: raw rewards, and on Atari the life losses of training (the agent's
    episode ends, and the reset serves), so a policy that never presses FIRE, as one trained
    with envpool's fire reset need not, still plays its whole game: five lives, then
    game over, long before the 27,000-step cap (without it, Breakout idles to the cap)."""
    with make_eval_env("Breakout-v5", 1, seed=0) as env:
        assert env.spec.episodic_life and not env.spec.reward_clip
        env.reset()
        lives, over, steps = 0, False, 0
        while not over and steps < 3_000:
            ts = env.step(np.zeros(1, np.int32))  # NOOP, never FIRE
            lives += int(ts.terminated[0])
            over, steps = bool(ts.game_over[0]), steps + 1
    assert over and lives == 5 and steps < 3_000
    for env_id in ("CartPole-v1", "CartPole-P-v1"):  # a partial variant resolves in make_env
        with make_eval_env(env_id, 2, seed=0) as env:
            assert not env.spec.episodic_life and not env.spec.reward_clip
    with pytest.raises(ValueError, match="unknown environment 'Cartpole-v1'"):
        make_eval_env("Cartpole-v1", 2, seed=0)


def test_atari_reward_clip_train_vs_eval():
    # Space Invaders pays 5-30 points per invader, so raw rewards above 1 come quickly.
    with make_env("SpaceInvaders-v5", 2, seed=0, train=True) as env:
        train, train_info = _atari_run(env, 150, seed=0)
    with make_env("SpaceInvaders-v5", 2, seed=0, train=False) as env:
        evalu, eval_info = _atari_run(env, 150, seed=0)
    with make_env("SpaceInvaders-v5", 2, seed=0, train=True, reward_clip=False) as env:
        assert not env.spec.reward_clip and env.spec.episodic_life
    for ts, info in ((train, train_info), (evalu, eval_info)):
        assert ts.reward.dtype == np.float32 and ts.raw_reward.dtype == np.float32
        assert ts.raw_reward.max() > 1.0
        # raw_reward is envpool's unclipped info["reward"].
        np.testing.assert_array_equal(ts.raw_reward, info["reward"])
    np.testing.assert_array_equal(train.reward, np.clip(train.raw_reward, -1.0, 1.0))
    assert train.reward.max() == 1.0
    np.testing.assert_array_equal(evalu.reward, evalu.raw_reward)


# ----- gymnasium fallback --------------------------------------------------------------------


class _Countdown(gymnasium.Env):
    """Toy env: action 1 terminates (reward 5), action 0 goes on (reward 1); obs = [t]."""

    def __init__(self):
        self.observation_space = gymnasium.spaces.Box(0.0, 100.0, (1,), np.float64)
        self.action_space = gymnasium.spaces.Discrete(2)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0]), {}

    def step(self, action):
        self._t += 1
        done = int(action) == 1
        return np.array([float(self._t)]), 5.0 if done else 1.0, done, False, {}


TOY_ID = "ReactorToyCountdown-v0"


@pytest.fixture
def toy_env_id():
    gymnasium.register(TOY_ID, entry_point=_Countdown, max_episode_steps=3)
    yield TOY_ID
    gymnasium.registry.pop(TOY_ID)


def test_gymnasium_fallback_semantics(toy_env_id):
    assert toy_env_id not in envpool.list_all_envs()
    with make_env(toy_env_id, 2, seed=0, reward_clip=True) as env:
        assert env.spec.backend == "gymnasium" and not env.has_xla
        assert env.spec.obs_dtype == np.float32 and env.spec.max_episode_steps == 3
        assert env.spec.reward_clip and not env.spec.episodic_life
        # env 0 never ends by itself (time limit 3); env 1 terminates at step 2.
        acts = np.array([[0, 0], [0, 1], [0, 1], [0, 0], [1, 0], [0, 0]], dtype=np.int32)
        ts = _run_host(env, acts)
        with pytest.raises(RuntimeError, match="XLA"):
            env.xla_reset()
    _check_invariants(ts)
    assert ts.obs.dtype == np.float32
    np.testing.assert_array_equal(ts.obs[:, 0, 0], [0, 1, 2, 3, 0, 1, 0])
    np.testing.assert_array_equal(ts.truncated[:, 0], [0, 0, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(ts.terminated[:, 0], [0, 0, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(ts.first[:, 0], [1, 0, 0, 0, 1, 0, 1])
    # env 1: the action 1 at row 3 hits the fake reset step and is ignored.
    np.testing.assert_array_equal(ts.obs[:, 1, 0], [0, 1, 2, 0, 1, 2, 3])
    np.testing.assert_array_equal(ts.terminated[:, 1], [0, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(ts.truncated[:, 1], [0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(ts.raw_reward[:, 1], [0, 1, 5, 0, 1, 1, 1])
    np.testing.assert_array_equal(ts.reward[:, 1], [0, 1, 1, 0, 1, 1, 1])
    np.testing.assert_array_equal(ts.game_over, ts.terminated | ts.truncated)


def test_gymnasium_forced_backend_continuous():
    with make_env("Pendulum-v1", 3, seed=0, backend="gymnasium") as env:
        s = env.spec
        assert s.backend == "gymnasium" and not s.discrete and s.num_actions is None
        assert s.action_shape == (1,) and s.max_episode_steps == 200
        np.testing.assert_array_equal(s.action_low, [-2.0]) and s.action_low.dtype == np.float32
        env.reset()
        ts = env.step(np.zeros((3, 1)))
        assert ts.obs.shape == (3, 3) and ts.obs.dtype == np.float32
        with pytest.raises(ValueError, match="shape"):
            env.step(np.zeros((3,)))


# ----- specs and errors ----------------------------------------------------------------------


def test_continuous_envpool_specs():
    with make_env("Pendulum-v1", 2, seed=0) as env:
        assert env.spec.backend == "envpool" and env.has_xla and env.spec.action_shape == (1,)
        np.testing.assert_array_equal(env.spec.action_high, [2.0])
    with make_env("HalfCheetah-v5", 2, seed=0) as env:
        spec = env.spec
        assert isinstance(spec, EnvSpec) and not spec.discrete and spec.action_shape == (6,)
        assert spec.obs_dtype == np.float32 and spec.frame_stack == 1 and not spec.is_atari
        # MuJoCo's float64 arrays are unsafe in the XLA step without jax_enable_x64.
        assert env.has_xla == bool(jax.config.jax_enable_x64)
        env.reset()
        ts = env.step(np.zeros((2, 6), np.float32))
        assert ts.obs.dtype == np.float32 and ts.obs.shape == (2, 17)
        assert ts.reward.dtype == np.float32


def test_unknown_id_suggests_close_matches():
    with pytest.raises(ValueError, match=r"unknown environment 'Pongg-v5'; did you mean: Pong-v5"):
        make_env("Pongg-v5", 2, seed=0)
    with pytest.raises(ValueError, match="CartPole-v1"):
        make_env("CartPole-v2", 2, seed=0, backend="gymnasium")
    with pytest.raises(ValueError, match="backend"):
        make_env("CartPole-v1", 2, seed=0, backend="brax")


@pytest.mark.parametrize("num_envs", [0, -3])
def test_bad_num_envs(num_envs):
    with pytest.raises(ValueError, match="num_envs"):
        make_env("CartPole-v1", num_envs, seed=0)


def test_episodic_life_needs_atari():
    with pytest.raises(ValueError, match="episodic_life"):
        make_env("CartPole-v1", 2, seed=0, episodic_life=True)
    make_env("CartPole-v1", 2, seed=0, episodic_life=False).close()


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (np.zeros((3,), np.int32), "shape"),
        (np.zeros((2, 1), np.int32), "shape"),
        (np.zeros((2,), np.float32), "integers"),
        (np.array([0, 2], np.int32), r"\[0, 2\)"),
    ],
)
def test_bad_actions(actions, match):
    with make_env("CartPole-v1", 2, seed=0) as env:
        env.reset()
        with pytest.raises(ValueError, match=match):
            env.step(actions)


# ----- property: the numpy and jax post-processing agree -------------------------------------


ROWS = 8  # the one batch shape of the property below
_jnp_traces: list[tuple[bool, bool]] = []  # (reward_clip, life) of each trace


@functools.partial(jax.jit, static_argnames="reward_clip")
def _finalize_step_jnp(obs, raw_reward, terminated, truncated, prev_done, prev_go, real, *,
                       reward_clip):  # fmt: skip
    _jnp_traces.append((reward_clip, real is not None))
    return finalize_step(
        jnp, obs=obs, raw_reward=raw_reward, terminated=terminated, truncated=truncated,
        prev_done=prev_done, prev_game_over=prev_go, real_termination=real,
        reward_clip=reward_clip,
    )  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(data=st.data(), clip=st.booleans(), life=st.booleans())
def test_finalize_step_numpy_and_jax_agree(data, clip, life):
    """`finalize_step` on NumPy (host envs) and on jnp inside `jit` (XLA envs) give the same
    TimeStep, bit for bit and dtype for dtype, over hypothesis's rewards (subnormals, ±50,
    which clipping cuts) and flags.

    Every example has ROWS rows, each its own draw of the flags: the function works row by
    row, so one shape covers the combinations, and the jitted function (one for the module,
    `reward_clip` static) is compiled once per (clip, life) pair, at most 4 times, instead of
    once per example as before (a new lambda each time: 40 compiles)."""
    flags = hnp.arrays(bool, (ROWS,))
    reward = data.draw(
        hnp.arrays(np.float32, (ROWS,), elements=st.floats(-50, 50, width=32)), label="reward"
    )
    term, trunc, prev_done, prev_go = (data.draw(flags) for _ in range(4))
    real = data.draw(hnp.arrays(np.int32, (ROWS,), elements=st.integers(0, 1))) if life else None
    obs = np.arange(ROWS, dtype=np.float32)
    kwargs = dict(terminated=term, truncated=trunc, prev_done=prev_done, reward_clip=clip)
    out_np = finalize_step(
        np, obs=obs, raw_reward=reward, real_termination=real, prev_game_over=prev_go, **kwargs
    )
    out_jnp = _finalize_step_jnp(
        obs, reward, term, trunc, prev_done, prev_go, real, reward_clip=clip
    )
    for name, a, j in zip(TimeStep._fields, out_np, out_jnp, strict=True):
        np.testing.assert_array_equal(a, np.asarray(j), err_msg=name)
        assert a.dtype == np.asarray(j).dtype, name
    assert not np.any(out_np.terminated & out_np.truncated)
    assert np.all(out_np.reward[out_np.first] == 0)
    assert np.all(np.abs(out_np.reward) <= 1) or not clip
    assert not np.any(out_np.game_over & ~(out_np.terminated | out_np.truncated))
    assert len(_jnp_traces) == len(set(_jnp_traces)) <= 4  # no example recompiles


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax"])
def test_rows_are_scattered_by_env_id(xp):
    # envpool in sync mode has always returned rows in env order here, but the adapter must
    # not rely on it: feed it a permuted batch and check row i comes back as env i.
    with make_env("Breakout-v5", 4, seed=0, episodic_life=True) as env:
        perm = np.array([2, 0, 3, 1], np.int32)
        obs = np.arange(4, dtype=np.uint8)[perm, None, None, None] * np.ones(
            (1, 4, 84, 84), np.uint8
        )
        rew = perm.astype(np.float32) * 10
        term = perm == 3
        info = {"env_id": perm, "reward": rew, "terminated": (perm == 3).astype(np.int32)}
        args = (obs, rew, term, np.zeros(4, bool), info)
        if xp is jnp:
            out = jax.jit(lambda *a: env._unpack(jnp, *a))(*args)
        else:
            out = env._unpack(np, *args)
    obs_o, raw_o, term_o, trunc_o, real_o = (np.asarray(x) for x in out)
    np.testing.assert_array_equal(obs_o[:, 0, 0, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(raw_o, [0, 10, 20, 30])
    np.testing.assert_array_equal(term_o, [0, 0, 0, 1])
    np.testing.assert_array_equal(real_o, [0, 0, 0, 1])
    assert not trunc_o.any()


@pytest.mark.parametrize("clip", [False, True])
def test_finalize_step_flushes_subnormal_rewards_in_both_paths(clip):
    # XLA:CPU treats subnormals as zero; NumPy does not. Both paths must give +0.0 bit for bit.
    tiny = np.finfo(np.float32).tiny
    reward = np.array([1e-45, -1e-45, -0.0, tiny, -tiny, 2.0], np.float32)
    z = np.zeros(reward.shape, bool)
    kwargs = dict(terminated=z, truncated=z, prev_done=z, prev_game_over=z, reward_clip=clip)
    out_np = finalize_step(np, obs=reward, raw_reward=reward, real_termination=None, **kwargs)
    out_jnp = jax.jit(
        lambda r: finalize_step(jnp, obs=r, raw_reward=r, real_termination=None, **kwargs)
    )(reward)
    want = np.array([0.0, 0.0, 0.0, tiny, -tiny, 1.0 if clip else 2.0], np.float32)
    for got in (out_np.reward, np.asarray(out_jnp.reward)):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_minatar_through_gymnasium():
    """MinAtar ids are served by the gymnasium backend: boolean [10, 10, C] grids, the game's
    minimal action set (-v1), MinAtar's own sticky actions and no time limit; env i is the
    gymnasium env reset with seed + i, and a game over is a termination."""
    with make_env("MinAtar/Breakout-v1", 2, seed=7) as env:
        spec = env.spec
        assert spec.backend == "gymnasium" and spec.discrete and spec.num_actions == 3
        assert spec.obs_shape == (10, 10, 4) and spec.obs_dtype == np.bool_
        assert spec.max_episode_steps is None and not spec.is_atari
        ts = env.reset()
        ref = gymnasium.make("MinAtar/Breakout-v1")
        for i in range(2):
            np.testing.assert_array_equal(np.asarray(ts.obs[i]), ref.reset(seed=7 + i)[0])
        ended = False
        for _ in range(2000):  # a random Breakout policy loses its ball within a few hundred
            ts = env.step(np.zeros(2, np.int32))
            ended |= bool(np.asarray(ts.terminated).any())
            assert not np.asarray(ts.truncated).any()
        assert ended
