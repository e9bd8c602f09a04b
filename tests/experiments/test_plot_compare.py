"""experiments.plot's run comparison: budget, returns at the budget, thresholds."""

import math

from experiments.plot import compare, first_reached


def _metrics(steps, returns, walls):
    return {"env_steps": steps, "return_mean": returns, "wall_s": walls}


def test_first_reached_skips_nan_and_reports_the_first_row():
    m = _metrics([10, 20, 30, 40], [math.nan, -5.0, 1.0, 0.5], [1.0, 2.0, 3.0, 4.0])
    assert first_reached(m, 0.0) == (30, 3.0)
    assert first_reached(m, -5.0) == (20, 2.0)
    assert first_reached(m, 2.0) is None


def test_compare_uses_the_shorter_run_as_budget():
    fast = _metrics([100, 200, 300, 400], [-20.0, -10.0, 0.0, 5.0], [10.0, 20.0, 30.0, 40.0])
    slow = _metrics([100, 250], [-21.0, -19.0], [50.0, 125.0])
    lines = compare({"fast": fast, "slow": slow}, thresholds=(-10.0, 0.0))
    assert lines[0] == "common budget: 250 env steps"
    # fast's last row at or before 250 steps is the one at 200.
    assert lines[1] == "fast: return -10.0 at 200 env steps, 20 s of training (10.0 steps/s)"
    assert lines[2] == "  first return >= -10: 200 env steps, 20 s"
    assert lines[3] == "  first return >= 0: 300 env steps, 30 s"
    assert lines[4] == "slow: return -19.0 at 250 env steps, 125 s of training (2.0 steps/s)"
    assert lines[5:] == ["  first return >= -10: not reached", "  first return >= 0: not reached"]
