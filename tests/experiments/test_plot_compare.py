"""experiments.plot's run comparison (budget, returns at the budget, thresholds), and where
it may write its PNG."""

import math
import os

import pytest

from experiments import plot
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


def _run_folder(path):
    path.mkdir()
    rows = ["env_steps,return_mean,wall_s", "10,1.0,0.5", "20,2.0,1.0"]
    (path / "metrics.csv").write_text("\n".join(rows) + "\n")
    return path


def test_plot_refuses_a_curves_png_linked_outside_and_leaves_that_file(tmp_path, capsys):
    run = _run_folder(tmp_path / "run")
    outside = tmp_path / "precious.txt"
    outside.write_text("not a plot")
    os.symlink(outside, run / "curves.png")
    with pytest.raises(SystemExit) as info:
        plot.main([str(run)])
    message = str(info.value)
    assert message.startswith(f"error: refusing to write {run / 'curves.png'}: it is a symbolic")
    assert "for safety" in message and "\n" not in message
    assert outside.read_text() == "not a plot" and (run / "curves.png").is_symlink()
    assert sorted(p.name for p in run.iterdir()) == ["curves.png", "metrics.csv"]  # no temp

    link = tmp_path / "out.png"  # an --out that is a link is refused the same way
    os.symlink(outside, link)
    with pytest.raises(SystemExit, match=r"refusing to write .*out\.png: it is a symbolic link"):
        plot.main([str(run), "--out", str(link)])
    assert outside.read_text() == "not a plot"

    os.unlink(run / "curves.png")  # without the link: written in place, atomically
    assert plot.main([str(run)]) == run / "curves.png"
    assert (run / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in run.iterdir()) == ["curves.png", "metrics.csv"]


def test_a_half_written_last_line_is_not_a_row(tmp_path):
    """A live run may be writing its last line: cut inside env_steps it would be a fake point
    at a small step (and the comparison's common budget), cut inside return_mean a wrong
    return. Until its newline arrives it is not read."""
    run = tmp_path / "run"
    run.mkdir()
    whole = "env_steps,return_mean,wall_s\n100,1.5,2.0\n200,2.5,4.0\n"
    for tail in ("30", "300,12", "300,3.5,6.0"):
        (run / "metrics.csv").write_text(whole + tail)
        m = plot.read_metrics(run)
        assert m["env_steps"] == [100.0, 200.0] and m["return_mean"] == [1.5, 2.5], tail
    (run / "metrics.csv").write_text(whole + "300,3.5,6.0\n")
    assert plot.read_metrics(run)["env_steps"] == [100.0, 200.0, 300.0]
