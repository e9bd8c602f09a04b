"""The gymnax backend (envs/gymnax_env.py) keeps the envs' contract: next-step auto-reset with
a fake transition, termination vs truncation, env k of a vector seeded base == the env seeded
base + k, host mode == XLA mode, sticky actions for MinAtar, flattened observations."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import make_env
from envs.gymnax_env import GymnaxVecEnv

# The tests compile at XLA's lowest optimisation (tests/conftest.py), where a scan of gymnax
# Seaquest runs about 10x slower than optimised (400 steps of 8 envs: 5.1 CPU-s against 0.47;
# compiling 1.9 against 4.0 CPU-s); the other MinAtar games' scans run in 0.12 CPU-s or less
# at the lowest level (measured 2026-12-06). Seaquest's long scans are compiled optimised.
OPTIMISED = {"xla_backend_optimization_level": 2, "xla_llvm_disable_expensive_passes": False}
RUN_OPTIMISED = {"Seaquest"}


def _scan_program(env, state, actions, optimised: bool = False):
    """`(state, actions) -> (state, TimeSteps)`: a `lax.scan` of the env's XLA step, jitted,
    or compiled optimised for `state` and `actions`' shapes."""
    program = jax.jit(lambda s, a: jax.lax.scan(env.xla_step, s, a))
    if optimised:
        program = program.lower(state, actions).compile(compiler_options=OPTIMISED)
    return program


def _run(env, actions, optimised: bool = False, program=None):
    """XLA mode over a `[T, B]` action sequence, as a rollout runs it (one `lax.scan` of the
    step), from a fresh reset; the TimeSteps stacked `[T, B]`, on the host. `program`: one
    `_scan_program` of this env and these shapes already built (not traced again)."""
    state, _ = env.xla_reset()
    actions = jnp.asarray(actions)
    program = program or _scan_program(env, state, actions, optimised)
    state, ts = program(state, actions)
    return state, jax.device_get(ts)


def test_termination_then_fake_step():
    """CartPole pushed one way falls: terminated (not truncated), then a fake step with
    first, reward 0 and no flags, whatever the action; the return counts real steps."""
    env = make_env("gymnax/CartPole-v1", 2, 0)
    _, ts = _run(env, np.ones((40, 2), np.int32))
    for b in range(2):
        t = int(np.argmax(ts.terminated[:, b]))
        assert ts.terminated[t, b] and not ts.truncated[t, b] and ts.game_over[t, b]
        assert 5 < t < 30 and ts.reward[t, b] == 1.0
        assert ts.first[t + 1, b] and ts.reward[t + 1, b] == 0.0
        assert not ts.terminated[t + 1, b] and not ts.truncated[t + 1, b]
        assert not ts.first[:t, b].any()


def test_truncation_is_not_termination():
    env = make_env("gymnax/CartPole-v1", 3, 0, max_episode_steps=5)
    assert env.spec.max_episode_steps == 5
    actions = np.tile([0, 1], (12, 3))[:, :3].astype(np.int32)  # balanced: it stays up
    _, ts = _run(env, actions)
    assert ts.truncated[4].all() and not ts.terminated[4].any() and ts.game_over[4].all()
    assert ts.first[5].all() and (ts.reward[5] == 0).all()
    assert ts.truncated[10].all()  # 5 real steps after the fake one
    # The observation of the truncated step is the episode's last (what the learner
    # bootstraps from), not a reset one: CartPole's Euler step moves the cart by τ·ẋ
    # (τ = 0.02, Barto et al. 1983 as gymnasium writes it), and a reset draws every
    # component from U(-0.05, 0.05); the fake step after it shows the reset observation.
    for t in (4, 10):
        np.testing.assert_allclose(
            ts.obs[t, :, 0], ts.obs[t - 1, :, 0] + 0.02 * ts.obs[t - 1, :, 1], rtol=1e-5
        )
    assert np.all(np.abs(ts.obs[5]) <= 0.05) and np.all(np.abs(ts.obs[11]) <= 0.05)
    assert not np.allclose(ts.obs[4, :, 0], ts.obs[5, :, 0])


def test_env_k_of_a_vector_is_the_env_seeded_base_plus_k():
    actions = np.random.default_rng(0).integers(0, 2, (30, 4)).astype(np.int32)
    _, many = _run(make_env("gymnax/CartPole-v1", 4, 10), actions)
    for k in range(4):
        _, one = _run(make_env("gymnax/CartPole-v1", 1, 10 + k), actions[:, k : k + 1])
        np.testing.assert_array_equal(many.obs[:, k], one.obs[:, 0])
        np.testing.assert_array_equal(many.first[:, k], one.first[:, 0])


def test_host_mode_equals_xla_mode():
    env = make_env("gymnax/Breakout-MinAtar", 3, 5)
    actions = np.random.default_rng(1).integers(0, 3, (50, 3)).astype(np.int32)
    _, xla = _run(env, actions)
    host = make_env("gymnax/Breakout-MinAtar", 3, 5)
    host.reset()
    for t, a in enumerate(actions):
        ts = host.step(a)
        jax.tree.map(lambda x, y, t=t: np.testing.assert_array_equal(x[t], y), xla, ts)


def test_minatar_spec_and_random_returns():
    env = make_env("gymnax/Breakout-MinAtar", 16, 0)
    spec = env.spec
    assert spec.obs_shape == (10, 10, 4) and spec.obs_dtype == np.dtype(bool)
    assert spec.num_actions == 3 and spec.backend == "gymnax" and env.sticky == 0.1
    actions = np.random.default_rng(2).integers(0, 3, (300, 16)).astype(np.int32)
    _, ts = _run(env, actions)
    assert set(np.unique(ts.raw_reward)) <= {0.0, 1.0}  # a brick is worth 1
    assert (ts.raw_reward[ts.first] == 0).all()  # fake reset steps earn nothing
    # Every game of every env: the rewards from its first step to its game_over. Breakout
    # never truncates here, and a random paddle soon misses the ball: many short games.
    returns, lengths = [], []
    for b in range(16):
        ends = np.flatnonzero(ts.game_over[:, b])
        assert ts.first[ends[ends + 1 < len(ts.first)] + 1, b].all()  # then a fake step
        for start, end in zip(np.concatenate([[0], ends[:-1] + 2]), ends, strict=True):
            returns.append(ts.raw_reward[start : end + 1, b].sum())
            lengths.append(end + 1 - start)
    assert not ts.truncated.any() and len(returns) > 100 and max(lengths) < 100
    # About the uniform random policy's 0.34 (sd 0.57, references/minatar.csv; 0.38 here, a
    # standard error of 0.03): far from 0 (bricks are hit) and from the 0.7 of a reward
    # counted twice, or the longer games of a game_over missed.
    assert 0.25 < np.mean(returns) < 0.5


def test_sticky_actions_repeat_the_last_executed_action_with_p():
    """Executed actions (the state's `last_action`) differ from the requested ones only by
    repeating the previous executed action, about 10% of the time (p = 0.1); none with p = 0.
    Fake auto-reset steps execute the no-op."""
    rng = np.random.default_rng(3)
    actions = rng.integers(0, 6, (200, 64)).astype(np.int32)
    for p in (0.1, 0.0):
        env = GymnaxVecEnv("gymnax/SpaceInvaders-MinAtar", 64, 0, sticky_action_prob=p)
        state, _ = env.xla_reset()
        step = jax.jit(env.xla_step)
        prev, changed, repeated = np.zeros(64, np.int32), 0, 0
        for a in actions:
            fake = np.asarray(state.prev_done)
            state, _ = step(state, jnp.asarray(a))
            executed = np.asarray(state.last_action)
            assert (executed[fake] == 0).all()
            real = ~fake & (a != prev)
            assert ((executed == a) | (executed == prev))[~fake].all()
            changed += real.sum()
            repeated += (real & (executed == prev)).sum()
            prev = executed
        if p:
            assert 0.08 < repeated / changed < 0.12, repeated / changed
        else:
            assert repeated == 0


def test_split_and_join_state_for_populations():
    env = make_env("gymnax/CartPole-v1", 6, 0)
    state, _ = env.xla_reset()
    parts = env.split_xla_state(state, 3)
    assert parts.key.shape == (3, 2, 2)
    jax.tree.map(np.testing.assert_array_equal, env.join_xla_state(parts), state)


def test_flatten_obs():
    env = make_env("gymnax/Breakout-MinAtar", 2, 0, flatten_obs=True)
    inner = make_env("gymnax/Breakout-MinAtar", 2, 0)
    assert env.spec.obs_shape == (400,) and env.spec.obs_dtype == np.dtype(bool)
    _, ts = env.xla_reset()
    _, ts_inner = inner.xla_reset()
    np.testing.assert_array_equal(ts.obs, np.asarray(ts_inner.obs).reshape(2, -1))


def test_unknown_gymnax_id_gets_close_matches():
    with pytest.raises(ValueError, match="did you mean: gymnax/Breakout-MinAtar"):
        make_env("gymnax/Breakout-MinAtr", 1, 0)
    with pytest.raises(ValueError, match="did you mean: gymnax/Breakout-MinAtar-full"):
        make_env("gymnax/Breakout-MinAtar-ful", 1, 0)
    with pytest.raises(ValueError, match="unknown environment 'gymnax/CartPole-v1-full'"):
        make_env("gymnax/CartPole-v1-full", 1, 0)  # only MinAtar games have a -full id
    with pytest.raises(ValueError, match="gymnax"):
        make_env("gymnax/CartPole-v1", 1, 0, num_threads=2)


def test_minatar_frames_colour_each_channel():
    from envs.gymnax_render import CELL, minatar_frame, palette

    obs = np.zeros((10, 10, 4), bool)
    obs[2, 3, 0] = obs[7, 1, 2] = True
    obs[5, 5, 1] = obs[5, 5, 3] = True  # two channels in one cell: the last one is drawn
    colours = palette(4)
    assert len({tuple(c) for c in colours}) == 4 and colours.dtype == np.uint8
    for frame in (minatar_frame(obs, colours), minatar_frame(obs.reshape(-1), colours)):  # flat too
        assert frame.shape == (10 * CELL, 10 * CELL, 3)
        cell = lambda r, c, f=frame: f[r * CELL : (r + 1) * CELL, c * CELL : (c + 1) * CELL]  # noqa: E731
        assert (cell(2, 3) == colours[0]).all() and (cell(7, 1) == colours[2]).all()
        assert (cell(5, 5) == colours[3]).all() and (cell(0, 0) == 0).all()
        assert (frame.reshape(-1, 3).any(axis=1)).sum() == 3 * CELL * CELL


def test_classic_control_states_from_observations():
    """The gymnasium state each renderer sets, recovered from the observation: the angles
    from their cos/sin (Acrobot, Pendulum), positions and velocities as they are."""
    from envs.gymnax_render import CLASSIC, FrameRenderer, video_refusal

    a1, a2, d1, d2 = 2.5, -1.2, 0.3, -0.7
    acrobot = np.array([np.cos(a1), np.sin(a1), np.cos(a2), np.sin(a2), d1, d2])
    np.testing.assert_allclose(CLASSIC["Acrobot-v1"][1](acrobot), [a1, a2, d1, d2], rtol=1e-12)
    pendulum = np.array([np.cos(-2.9), np.sin(-2.9), 4.0])
    np.testing.assert_allclose(CLASSIC["Pendulum-v1"][1](pendulum), [-2.9, 4.0], rtol=1e-12)
    np.testing.assert_allclose(CLASSIC["MountainCar-v0"][1](np.array([-0.5, 0.01])), [-0.5, 0.01])
    render = FrameRenderer("gymnax/CartPole-v1", (4,))
    left, right = render(np.array([-1.5, 0, 0, 0])), render(np.array([1.5, 0, 0.2, 0]))
    render.close()
    assert left.shape == right.shape == (400, 600, 3) and (left != right).any()
    assert video_refusal("gymnax/Breakout-MinAtar") is None
    assert "no renderer" in video_refusal("gymnax/DeepSea-bsuite")


# Uniformly random play, 200 episodes each (Freeway: 16 of 2,500 steps), sticky p = 0.1 in
# both: gymnax 1.0.1's ports against the `minatar` package (Young & Tian 2019), without shared
# seeds. The reward values, the minimal action sets' sizes and the channels are the same, and
# the mean return and episode length agree within 4 standard errors. One difference: a
# Freeway game lasts 2,500 steps in gymnax and 2,501 in minatar (its clock ends the game on
# the step after it runs out).
MINATAR_GAMES = {
    "Asterix": "asterix",
    "Breakout": "breakout",
    "Freeway": "freeway",
    "Seaquest": "seaquest",
    "SpaceInvaders": "space_invaders",
}


def _minatar_random(name, episodes, rng):
    from minatar import Environment

    env = Environment(name, sticky_action_prob=0.1)
    actions, returns, lengths, rewards = env.minimal_action_set(), [], [], set()
    for _ in range(episodes):
        env.reset()
        done, total, length = False, 0.0, 0
        while not done:
            reward, done = env.act(actions[rng.integers(len(actions))])
            total, length = total + reward, length + 1
            rewards.add(float(reward))
        returns.append(total)
        lengths.append(length)
    return np.array(returns), np.array(lengths), rewards, len(actions), env.state_shape()[2]


def _gymnax_random(game, episodes, rng):
    """Each of `episodes` envs' first episode (later ones would favour short episodes)."""
    env = make_env(f"gymnax/{game}-MinAtar", episodes, 0)
    state, _ = env.xla_reset()
    n = env.spec.num_actions
    play = _scan_program(
        env, state, jnp.zeros((500, episodes), jnp.int32), optimised=game in RUN_OPTIMISED
    )

    returns, lengths = np.full(episodes, np.nan), np.zeros(episodes)
    total, rewards = np.zeros(episodes), set()
    while np.isnan(returns).any():
        state, ts = play(state, jnp.asarray(rng.integers(0, n, (500, episodes)), jnp.int32))
        ts = jax.device_get(ts)
        rewards |= set(np.unique(ts.raw_reward).tolist())
        for t in range(500):
            running = np.isnan(returns)
            total += ts.raw_reward[t] * running
            lengths += running
            ended = running & ts.game_over[t]
            returns[ended] = total[ended]
    return returns, lengths, rewards, n, env.spec.obs_shape[2]


@pytest.mark.slow
@pytest.mark.parametrize("game", sorted(MINATAR_GAMES))
def test_random_play_against_the_minatar_package(game):
    episodes = 16 if game == "Freeway" else 200
    m_ret, m_len, m_rewards, m_actions, m_channels = _minatar_random(
        MINATAR_GAMES[game], episodes, np.random.default_rng(0)
    )
    g_ret, g_len, g_rewards, g_actions, g_channels = _gymnax_random(
        game, episodes, np.random.default_rng(1)
    )
    assert g_rewards <= m_rewards | {0.0} and m_rewards <= g_rewards | {0.0}, (g_rewards, m_rewards)
    assert (g_actions, g_channels) == (m_actions, m_channels)
    se = lambda a, b: 4 * np.sqrt(a.var() / len(a) + b.var() / len(b))  # noqa: E731
    assert abs(g_ret.mean() - m_ret.mean()) <= se(g_ret, m_ret), (g_ret.mean(), m_ret.mean())
    if game == "Freeway":  # a fixed clock: no randomness in the length
        assert (g_len == 2500).all() and (m_len == 2501).all()
    else:
        assert abs(g_len.mean() - m_len.mean()) <= se(g_len, m_len), (g_len.mean(), m_len.mean())


# The fast tier's two games are the cheapest to compile; the three whose steps take 20-40 s
# to build beside other jobs (Freeway's cars, Seaquest's divers, Asterix) are the slow tier's.
FULL_ACTION_SLOW = {"Asterix", "Freeway", "Seaquest"}


@pytest.mark.parametrize(
    "game",
    [
        pytest.param(g, marks=[pytest.mark.slow] * (g in FULL_ACTION_SLOW))
        for g in sorted(MINATAR_GAMES)
    ],
)
def test_full_action_set_is_the_minimal_set_plus_no_ops(game):
    """`gymnax/<Game>-MinAtar-full` takes all 6 of MinAtar's actions (the MinAtar paper's
    runs; the `minatar` package's -v0 ids): the actions of the game's minimal set (their full
    indices from the `minatar` package, not gymnax) act as the minimal id's, every other one
    as the no-op. Same seed, sticky p = 0.1 in both: equal trajectories step for step, game
    ends, auto-resets and sticky repeats included."""
    from minatar import Environment

    minimal = [int(a) for a in Environment(MINATAR_GAMES[game]).minimal_action_set()]
    full, small = (make_env(f"gymnax/{game}-MinAtar{s}", 8, 0) for s in ("-full", ""))
    assert full.spec.num_actions == 6 and small.spec.num_actions == len(minimal)
    assert full.spec.obs_shape == small.spec.obs_shape and full.sticky == small.sticky == 0.1
    x = np.random.default_rng(7).integers(0, 6, (400, 8)).astype(np.int32)
    as_minimal = np.vectorize(lambda a: minimal.index(a if a in minimal else 0))(x)
    fast = game in RUN_OPTIMISED
    # one program of the full env for both of its action sequences (tracing MinAtar's step is
    # most of this test's cost: Freeway's scan took 5.6 s to trace beside other jobs)
    full_program = _scan_program(full, full.xla_reset()[0], jnp.asarray(x), fast)
    _, ts_full = _run(full, x, program=full_program)
    _, ts_small = _run(small, as_minimal.astype(np.int32), fast)
    jax.tree.map(np.testing.assert_array_equal, ts_full, ts_small)
    assert ts_full.game_over.any() or game == "Freeway"  # resets were compared too
    # and the actions act: not two idle envs
    _, ts_idle = _run(full, np.zeros_like(x), program=full_program)
    assert (np.asarray(ts_idle.obs) != np.asarray(ts_full.obs)).any()


def test_convert_obs_maps_raw_observations_as_the_env_does():
    """`VecEnv.convert_obs` (evaluate's gymnasium render loop): arrays cast to the spec's
    dtype, then the wrappers' maps (here --flatten-obs)."""
    raw = np.zeros((2, 10, 10, 4), np.int64)
    raw[1, 3, 4, 2] = 1
    plain = make_env("gymnax/Breakout-MinAtar", 2, 0)
    flat = make_env("gymnax/Breakout-MinAtar", 2, 0, flatten_obs=True)
    got = plain.convert_obs(raw)
    assert got.dtype == np.dtype(bool) and got.shape == (2, 10, 10, 4) and got[1, 3, 4, 2]
    got = flat.convert_obs(raw)
    assert got.shape == (2, 400) and got.dtype == np.dtype(bool)
    np.testing.assert_array_equal(got, raw.reshape(2, -1).astype(bool))
