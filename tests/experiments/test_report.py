"""experiments.report: aggregates against rliable's own functions on fixed data, HNS against
hand-computed values, and the whole report on fake run folders."""

import json

import numpy as np
import pytest
from rliable import library as rly
from rliable import metrics

from experiments import report


def test_hns_by_hand():
    # Pong: random -20.7, human 14.6 (Badia et al. 2020): (21 + 20.7) / 35.3
    assert report.human_normalized("pong", 21.0) == pytest.approx(41.7 / 35.3)
    # Breakout: random 1.7, human 30.5: (30.5 - 1.7) / 28.8 = 1
    assert report.human_normalized("breakout", 30.5) == pytest.approx(1.0)
    assert report.atari_game("MontezumaRevenge-v5") == "montezuma_revenge"
    assert report.atari_game("UpNDown-v5") == "up_n_down"
    assert report.atari_game("CartPole-v1") is None
    _name, f = report.normalizer("Acrobot-v1")
    assert f(-300.0) == pytest.approx(0.5)  # (-300 + 500) / (-100 + 500)
    assert len(report.load_atari_scores()) == 57


def test_aggregates_match_rliable():
    rng = np.random.default_rng(0)
    scores = {"a": rng.normal(1, 0.5, (5, 4)), "b": rng.normal(0.5, 0.3, (5, 4))}
    point, interval = report.aggregates(scores, reps=300, seed=3)
    for algo, x in scores.items():
        expected = [metrics.aggregate_iqm(x), metrics.aggregate_median(x),
                    metrics.aggregate_mean(x), metrics.aggregate_optimality_gap(x)]  # fmt: skip
        np.testing.assert_allclose(point[algo], expected)
    _, ci = rly.get_interval_estimates(
        {"a": scores["a"]}, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=300,
        random_state=np.random.RandomState(3),
    )  # fmt: skip
    assert interval["a"][0, 0] <= point["a"][0] <= interval["a"][1, 0]
    assert ci["a"][0, 0] <= metrics.aggregate_iqm(scores["a"]) <= ci["a"][1, 0]


def test_mean_ci95_by_hand():
    mean, half = report.mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302652729911275 * 1.0 / np.sqrt(3))


def fake_run(root, algo, env, seed, final):
    d = root / f"{algo}-{env}-seed{seed}"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"run": {"agent": algo, "env": env, "seed": seed}}))
    rows = ["env_steps,return_mean,wall_s"] + [
        f"{s},{final * s / 1000},{s / 100}" for s in (250, 500, 750, 1000)
    ]
    (d / "metrics.csv").write_text("\n".join(rows) + "\n")
    (d / "summary.json").write_text(
        json.dumps({"eval_return_mean": final, "wall_s": 10, "sps": 100.0})
    )


def test_report_end_to_end(tmp_path):
    for algo, base in (("ppo", 400.0), ("a2c", 200.0)):
        for seed in range(3):
            fake_run(tmp_path / "runs", algo, "CartPole-v1", seed, base + seed)
            fake_run(tmp_path / "runs", algo, "Acrobot-v1", seed, -base / 2 - seed)
    md = report.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--reps", "200"])
    text = md.read_text()
    for png in ("aggregates.png", "performance_profile.png", "sample_efficiency.png"):
        assert (tmp_path / "out" / png).stat().st_size > 1000 and png in text
    assert "| ppo | 3 | 401.0 ± 2.5 |" in text  # mean 401, t(2)·1/√3 = 2.48
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    expected = np.array([[(300 - s) / 400, (400 + s) / 475] for s in range(3)])
    assert data["aggregates"]["ppo"]["IQM"]["point"] == pytest.approx(
        metrics.aggregate_iqm(expected)
    )
    assert data["aggregates"]["ppo"]["Mean"]["point"] == pytest.approx(expected.mean())
