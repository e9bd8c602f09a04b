"""`experiments.arms`: an A/B experiment's table from its arms' run folders, checked against
values worked out by hand from small synthetic runs (the bootstrap's interval only for
bracketing the mean and being the same on a second call)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import arms

HEADER = "env_steps,return_mean,wall_s\n"


def _run(path, rows, evaluation=None):
    path.mkdir(parents=True)
    lines = "".join(f"{s},{r},{0.1 * i}\n" for i, (s, r) in enumerate(rows))
    (path / "metrics.csv").write_text(HEADER + lines)
    if evaluation is not None:
        (path / "summary.json").write_text(json.dumps({"eval_return_mean": evaluation}))


@pytest.fixture
def experiment(tmp_path):
    # arm "a": a population of two seeds; arm "b": two single runs, one never above -150
    _run(tmp_path / "a" / "member-0", [(100, "nan"), (200, -200), (300, -100)], -90.0)
    _run(tmp_path / "a" / "member-1", [(100, -180), (200, -140), (300, -120)], -110.0)
    _run(tmp_path / "b" / "seed-0", [(100, -200), (200, -190), (300, -160)], -170.0)
    _run(tmp_path / "b" / "seed-1", [(100, -200), (250, -120)])  # not evaluated
    (tmp_path / "notes").mkdir()  # no runs: not an arm
    return tmp_path


def _cells(line):
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_table_reads_each_seed_at_the_steps_asked(experiment):
    text = arms.main([str(experiment), "--at", "150", "200", "1000", "--above", "-150"])
    head, _, a, b = text.splitlines()
    assert _cells(head) == ["arm", "seeds", "150", "200", "1k", "run mean",
                            "first step above -150", "final eval"]  # fmt: skip
    a, b = _cells(a), _cells(b)
    assert a[:2] == ["a", "2"] and b[:2] == ["b", "2"]
    # a at 150: seed 0 has no finished episode yet, seed 1 -180 -> "-180 [...] (1 of 2)"
    assert a[2].startswith("-180 [-180, -180] (1 of 2)")
    assert a[3].startswith("-170 [")  # (-200 + -140) / 2
    assert a[4].startswith("-110 [")  # the last rows: (-100 + -120) / 2
    assert a[5].startswith("-148 [")  # run means -150 and -146.67
    assert a[6].startswith("250 [200, 300]")  # seed 0 first above -150 at 300, seed 1 at 200
    assert a[7].startswith("-100 [-110, -90]")
    assert b[6] == "250 [250, 250] (1 of 2)" and b[7] == "-170 [-170, -170] (1 of 2)"
    assert arms.main([str(experiment), "--at", "150", "200", "1000", "--above", "-150"]) == text


def test_an_arm_without_runs_or_a_damaged_file_is_one_line(experiment):
    with pytest.raises(SystemExit, match="no runs"):
        arms.main([str(experiment), "--arms", "a", "notes"])
    (experiment / "b" / "seed-0" / "metrics.csv").write_text(HEADER + "100,x,0\n")
    with pytest.raises(SystemExit, match=r"seed-0/metrics.csv line 2"):
        arms.main([str(experiment)])
    with pytest.raises(SystemExit, match="no such folder"):
        arms.main([str(experiment / "missing")])
    with pytest.raises(SystemExit, match="--at takes env steps >= 0"):
        arms.main([str(experiment), "--at", "-5"])


def test_interval_brackets_the_mean():
    rng = np.random.default_rng(1)
    x = np.array([1.0, 2.0, 3.0, 10.0])
    text = arms.interval(x, rng)
    mean, lo, hi = (
        float(t) for t in text.replace("[", "").replace("]", "").replace(",", " ").split()
    )
    assert mean == 4.0 and lo <= mean <= hi and lo >= 1.0 and hi <= 10.0
