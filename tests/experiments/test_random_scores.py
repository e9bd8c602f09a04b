"""experiments.random_scores: the measured floor of references/minatar.csv."""

from __future__ import annotations

import csv
import re

import jax
import numpy as np
import pytest

from experiments import random_scores
from experiments.report import REFERENCES


def _floor(env_id: str) -> tuple[float, float]:
    """The committed random-policy mean of `env_id` and the sd its note records."""
    with open(REFERENCES / "minatar.csv") as f:
        rows = {r["env"]: r for r in csv.DictReader(ln for ln in f if not ln.startswith("#"))}
    row = rows[env_id]
    sd = re.search(r"\(sd ([\d.]+)\)", row["source"])
    assert sd, f"{env_id}: its note in minatar.csv no longer says '(sd <number>)'"
    return float(row["low"]), float(sd.group(1))


def _agrees(floor: float, sd: float, returns: np.ndarray) -> bool:
    """Two means of 100 and len(returns) episodes within 3 standard errors of each other (the
    seeds are fixed: a pass or a failure repeats)."""
    se = np.sqrt(sd**2 / 100 + returns.var() / len(returns))
    return abs(returns.mean() - floor) < 3 * se


def test_breakout_floor_agrees_with_the_minatar_package_played_directly():
    """An estimate that shares no code with experiments.random_scores: `minatar`'s own
    Environment (sticky actions 0.1, ramping), actions drawn uniformly from its minimal set
    (as `MinAtar/Breakout-v1` registers it), other seeds. The tolerance (about half the
    floor) catches a reward counted twice or games merged, not subtler changes of the
    policy or the env."""
    from minatar import Environment

    env = Environment("breakout", sticky_action_prob=0.1)
    env.seed(12345)
    rng, actions = np.random.default_rng(12345), env.minimal_action_set()
    returns = []
    for _ in range(400):
        env.reset()
        done, total = False, 0.0
        while not done:
            reward, done = env.act(actions[rng.integers(len(actions))])
            total += reward
        returns.append(total)
    assert _agrees(*_floor("MinAtar/Breakout-v1"), np.asarray(returns))


@pytest.mark.parametrize("full", [False, True], ids=["minimal", "full"])
def test_gymnax_breakout_floor_agrees_with_gymnax_played_directly(full):
    """The same for the gymnax rows: gymnax's env stepped one game at a time, sticky actions
    (p = 0.1, the last executed action, no-op before the first) written here; `full`: on all
    6 actions (gymnax's own `use_minimal_action_set=False`), the `-full` row."""
    import gymnax

    env, params = gymnax.make("Breakout-MinAtar", use_minimal_action_set=not full)
    assert env.num_actions == (6 if full else 3)
    rng, key = np.random.default_rng(7), jax.random.key(7)
    returns = []
    for _ in range(300):
        key, k_reset = jax.random.split(key)
        _, state = env.reset(k_reset, params)
        done, total, last = False, 0.0, 0
        while not done:
            action = int(rng.integers(env.num_actions))
            action = last if rng.random() < 0.1 else action
            key, k_step = jax.random.split(key)
            _, state, reward, terminated, truncated, _ = env.step(k_step, state, action, params)
            total, done, last = total + float(reward), bool(terminated | truncated), action
        returns.append(total)
    floor = _floor("gymnax/Breakout-MinAtar" + ("-full" if full else ""))
    assert _agrees(*floor, np.asarray(returns))


def test_random_returns_are_reproducible_and_match_the_reference_floor():
    a = random_scores.random_returns("MinAtar/Breakout-v1", 5)
    b = random_scores.random_returns("MinAtar/Breakout-v1", 5)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (5,) and (a >= 0).all()  # Breakout: +1 per brick, no penalties
    with open(REFERENCES / "minatar.csv") as f:
        rows = {r["env"]: r for r in csv.DictReader(ln for ln in f if not ln.startswith("#"))}
    # The committed floor is this function's mean over 100 episodes (rounded to 2 places).
    floor = float(rows["MinAtar/Breakout-v1"]["low"])
    assert round(random_scores.random_returns("MinAtar/Breakout-v1", 100).mean(), 2) == floor
    assert floor < float(rows["MinAtar/Breakout-v1"]["high"])


def test_unknown_env_is_a_one_line_error():
    with pytest.raises(SystemExit, match=r"unknown gymnasium environment 'MinAtar/Pong-v1'"):
        random_scores.main(["MinAtar/Pong-v1"])


def test_gymnax_random_returns_match_the_reference_floor():
    a = random_scores.random_returns("gymnax/Breakout-MinAtar", 100)
    np.testing.assert_array_equal(a, random_scores.random_returns("gymnax/Breakout-MinAtar", 100))
    assert a.shape == (100,) and (a >= 0).all() and a.max() > 0
    with open(REFERENCES / "minatar.csv") as f:
        rows = {r["env"]: r for r in csv.DictReader(ln for ln in f if not ln.startswith("#"))}
    assert round(a.mean(), 2) == float(rows["gymnax/Breakout-MinAtar"]["low"])
    full = random_scores.random_returns("gymnax/Breakout-MinAtar-full", 100)
    assert round(full.mean(), 2) == float(rows["gymnax/Breakout-MinAtar-full"]["low"])


def test_gymnax_unknown_env_is_a_one_line_error():
    message = r"unknown environment 'gymnax/Pong-MinAtar' in gymnax.*did you mean"
    with pytest.raises(SystemExit, match=message):
        random_scores.main(["gymnax/Pong-MinAtar"])
