"""Episode statistics of a rollout (engine/rollout.py) against a count made here.

Both rollout modes (the XLA scan and the host loop) record through one function, so comparing
them with each other cannot catch a bookkeeping error. Here a random policy plays
Breakout-MinAtar through each mode for two rollouts (games span the rollout boundary); the
same env, seeded alike, is then stepped directly with the actions the rollout recorded, and
each game's return and length are counted from the positions of the `game_over` flags alone:
a game runs from the step after the fake auto-reset step that follows the previous game (or
from step 0) to its `game_over`. Games end by the rules, or by a time limit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.rollout import ActorOutput
from engine.rollout import initial_actor_state, make_host_rollout, make_xla_rollout
from envs import make_env

ENV, N, SEED, T = "gymnax/Breakout-MinAtar", 3, 4, 150


def _random_policy(params, obs, first, core, key):
    probs = jnp.full((N, 3), 1 / 3)
    return ActorOutput(jax.random.randint(key, (N,), 0, 3), probs, core)


def _games(actions: np.ndarray, max_steps: int | None):
    """(env, end step, return, length) of every game that ends, stepping the env directly:
    a game runs from the step after the previous game's fake auto-reset step (or from step 0)
    to its game_over; the number of games that a truncation ended."""
    env = make_env(ENV, N, SEED, max_episode_steps=max_steps)
    env.reset()
    steps = [env.step(a) for a in actions]
    reward = np.stack([np.asarray(ts.raw_reward, float) for ts in steps])
    over = np.stack([np.asarray(ts.game_over) for ts in steps])
    truncated = np.stack([np.asarray(ts.truncated) for ts in steps])
    games = []
    for b in range(N):
        start = 0
        for end in np.flatnonzero(over[:, b]):
            games.append((b, end, reward[start : end + 1, b].sum(), end + 1 - start))
            start = end + 2
    return games, int(truncated.sum())


@pytest.mark.parametrize("max_steps", [None, 12], ids=["games", "time-limit"])
@pytest.mark.parametrize("xla", [True, False], ids=["xla", "host"])
def test_finished_games_return_and_length_match_a_direct_count(xla, max_steps):
    env = make_env(ENV, N, SEED, max_episode_steps=max_steps)
    make = make_xla_rollout if xla else make_host_rollout
    rollout = make(env, _random_policy, T, 0.99)
    if xla:
        rollout = jax.jit(rollout)
    actor = initial_actor_state(env, (), jax.random.key(0), use_xla=xla)
    parts = []
    for _ in range(2):
        actor, out = rollout({}, actor)
        parts.append(jax.device_get(out))
    actions = np.concatenate([p.steps["action"] for p in parts])
    over = np.concatenate([p.game_over for p in parts])
    fin_ret = np.concatenate([p.finished_return for p in parts])
    fin_len = np.concatenate([p.finished_length for p in parts])
    games, truncated = _games(actions, max_steps)
    assert len(games) > 10 and any(r > 0 for _, _, r, _ in games)  # bricks were hit
    assert (truncated > 0) == (max_steps is not None)
    assert any(t - n + 1 < T <= t for _, t, _, n in games)  # a game spans the two rollouts
    assert over.sum() == len(games)
    for b, t, ret, length in games:
        assert over[t, b]
        assert fin_ret[t, b] == pytest.approx(ret) and fin_len[t, b] == length, (b, t)
    assert (fin_ret[~over] == 0).all() and (fin_len[~over] == 0).all()
