"""experiments.random_scores: the measured floor of references/minatar.csv."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from experiments import random_scores
from experiments.report import REFERENCES


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


def test_gymnax_unknown_env_is_a_one_line_error():
    message = r"unknown environment 'gymnax/Pong-MinAtar' in gymnax.*did you mean"
    with pytest.raises(SystemExit, match=message):
        random_scores.main(["gymnax/Pong-MinAtar"])
