"""Episode statistics of a rollout (agents/core/rollout.py) against a count made here.

Both rollout modes (the XLA scan and the host loop) record through one function, so comparing
them with each other cannot catch a bookkeeping error. Here a random policy plays
Breakout-MinAtar through each mode for two rollouts (games span the rollout boundary); the
same env, seeded alike, is then stepped directly with the actions the rollout recorded, and
each game's return and length are counted from its TimeSteps: the rewards from the game's
first step to its `game_over`, and its real steps (the fake auto-reset step after a game, its
reward 0, is neither a step nor a game)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.rollout import (
    ActorOutput,
    initial_actor_state,
    make_host_rollout,
    make_xla_rollout,
)
from envs import make_env

ENV, N, SEED, T = "gymnax/Breakout-MinAtar", 3, 4, 150


def _random_policy(params, obs, first, core, key):
    probs = jnp.full((N, 3), 1 / 3)
    return ActorOutput(jax.random.randint(key, (N,), 0, 3), probs, core)


def _games(actions: np.ndarray):
    """(env, end step, return, length) of every game that ends, stepping the env directly."""
    env = make_env(ENV, N, SEED)
    env.reset()
    games, ret, length = [], np.zeros(N), np.zeros(N, int)
    for t, a in enumerate(actions):
        ts = env.step(a)
        real = ~np.asarray(ts.first)  # a step whose obs starts a game is the fake one
        ret += np.where(real, np.asarray(ts.raw_reward, float), 0.0)
        length += real
        for b in np.flatnonzero(np.asarray(ts.game_over)):
            games.append((b, t, ret[b], length[b]))
            ret[b], length[b] = 0.0, 0
    return games


@pytest.mark.parametrize("xla", [True, False], ids=["xla", "host"])
def test_finished_games_return_and_length_match_a_direct_count(xla):
    env = make_env(ENV, N, SEED)
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
    games = _games(actions)
    assert len(games) > 10 and any(r > 0 for _, _, r, _ in games)  # bricks were hit
    assert any(t - n + 1 < T <= t for _, t, _, n in games)  # a game spans the two rollouts
    assert over.sum() == len(games)
    for b, t, ret, length in games:
        assert over[t, b]
        assert fin_ret[t, b] == pytest.approx(ret) and fin_len[t, b] == length, (b, t)
    assert (fin_ret[~over] == 0).all() and (fin_len[~over] == 0).all()
