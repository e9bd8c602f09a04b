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


def test_bootstrap_intervals_are_reproducible():
    scores = {"a": np.random.default_rng(0).random((5, 2))}
    np.random.seed(123)  # noqa: NPY002  (rliable draws from the global RNG)
    before = np.random.random()  # noqa: NPY002  (rliable draws from the global RNG)
    first, second = report.aggregates(scores, 200)[1], report.aggregates(scores, 200)[1]
    np.testing.assert_array_equal(first["a"], second["a"])
    np.random.seed(123)  # noqa: NPY002  (rliable draws from the global RNG)
    assert np.random.random() == before  # the global RNG is left as it was  # noqa: NPY002  (rliable draws from the global RNG)
    other = report.aggregates(scores, 200, seed=1)[1]
    assert not np.array_equal(first["a"], other["a"])


def test_mean_ci95_by_hand():
    mean, half = report.mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302652729911275 * 1.0 / np.sqrt(3))


def fake_run(root, algo, env, seed, final, steps=1000, eval_=True):
    d = root / f"{algo}-{env}-seed{seed}"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"run": {"agent": algo, "env": env, "seed": seed}}))
    rows = ["env_steps,return_mean,wall_s"] + [
        f"{s},{final * s / steps},{s / 100}" for s in np.linspace(steps / 4, steps, 4).astype(int)
    ]
    (d / "metrics.csv").write_text("\n".join(rows) + "\n")
    summary = {"wall_s": 10, "sps": 100.0} | ({"eval_return_mean": final} if eval_ else {})
    (d / "summary.json").write_text(json.dumps(summary))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One report, built once, checked by the tests below: ppo and a2c on CartPole and Acrobot
    (3 seeds, evaluated) and ppo on Pong for 10M steps (training returns, CleanRL's protocol)."""
    root = tmp_path_factory.mktemp("report")
    for algo, base in (("ppo", 400.0), ("a2c", 200.0)):
        for seed in range(3):
            fake_run(root / "runs", algo, "CartPole-v1", seed, base + seed)
            fake_run(root / "runs", algo, "Acrobot-v1", seed, -base / 2 - seed)
    fake_run(root / "runs", "ppo", "Pong-v5", 0, 20.0, steps=10_000_000, eval_=False)
    md = report.main([str(root / "runs"), "--out", str(root / "out"), "--reps", "200"])
    return root / "out", md.read_text(), json.loads((root / "out" / "report.json").read_text())


def test_report_end_to_end(built):
    out, text, data = built
    for png in ("aggregates.png", "performance_profile.png", "sample_efficiency.png"):
        assert (out / png).stat().st_size > 1000 and png in text
    assert "| ppo | 3 | 401.0 ± 2.5 |" in text  # mean 401, t(2)·1/√3 = 2.48
    assert "not run by every algorithm): Pong-v5" in text
    expected = np.array([[(300 - s) / 400, (400 + s) / 475] for s in range(3)])
    assert data["aggregates"]["ppo"]["IQM"]["point"] == pytest.approx(
        metrics.aggregate_iqm(expected)
    )
    assert data["aggregates"]["ppo"]["Mean"]["point"] == pytest.approx(expected.mean())
    # Curves: one env-step grid for all; wall-clock grids per algorithm, to its shortest run.
    steps, wall = data["curves"]["steps"], data["curves"]["wall"]
    assert sorted(wall) == sorted(steps) == ["a2c", "ppo"]
    assert steps["ppo"]["grid"] == steps["a2c"]["grid"] and steps["ppo"]["grid"][-1] == 1000
    assert wall["ppo"]["grid"][-1] == pytest.approx(10.0)  # metrics wall_s = steps / 100


def test_report_published_beside_ours(built):
    out, text, data = built
    pub = {(p["env"], p["source"].split(" ")[0], p["published"]): p for p in data["published"]}
    # CleanRL ppo_atari.py Pong: 10M steps = 40M frames, no-op starts, training returns: drawn.
    cleanrl = pub[("Pong-v5", "CleanRL", 20.36)]
    assert cleanrl["matches"] and cleanrl["ours"][0] == 20.0
    assert (out / "published.png").stat().st_size > 1000 and "published.png" in text
    # Reactor's table is for reactor, not ppo; the PPO paper's Pong is 40M frames: matches too.
    assert pub[("Pong-v5", "Schulman", 20.7)]["matches"]
    # CartPole runs of 1000 steps with evaluation returns vs CleanRL's 500k training steps.
    cart = pub[("CartPole-v1", "CleanRL", 490.04)]
    assert cart["differences"] == [
        "budget 500,000 frames vs ours 1,000",
        "training returns vs ours evaluation",
    ]
    assert "differs: budget 500,000 frames vs ours 1,000" in text
    assert not any(p["algo"] == "a2c" and p["env"] == "Pong-v5" for p in data["published"])


def test_report_prices_paper_budgets_from_the_same_family(built):
    _, text, data = built
    est = {(e["algo"], e["budget"]): e for e in data["compute"]}
    atari57 = "Atari-57, 200M frames (Reactor, Agent57 tables)"
    mujoco = "MuJoCo, 1M steps per env (SAC/TD3 papers)"
    # ppo has an Atari run (100 steps/s): 57 games x 3 seeds x 50M steps; never from CartPole.
    assert est[("ppo", atari57)]["envs"] == ["Pong-v5"]
    assert est[("ppo", atari57)]["hours"] == pytest.approx(57 * 3 * 50e6 / 100 / 3600)
    assert est[("a2c", atari57)]["hours"] is None and est[("ppo", mujoco)]["hours"] is None
    assert f"| a2c | {atari57} | no measured run of this family |" in text


def test_minatar_protocol_has_sticky_actions(tmp_path):
    fake_run(tmp_path, "dqn", "MinAtar/Breakout-v1", 0, 10.0)
    runs = [report.load_result(d) for d in report.find_runs([str(tmp_path)])]
    ours = report.our_protocol(runs)
    assert ours == {"frames": 1000.0, "starts": "none", "sticky": "true", "eval": "eval"}
    row = {"frames": "5000000", "starts": "none", "sticky": "false", "eval": "train_final"}
    assert report.protocol_differences(row, ours) == [
        "budget 5,000,000 frames vs ours 1,000",
        "no sticky actions (ours: sticky)",
        "training returns vs ours evaluation",
    ]
    row |= {"frames": "1000", "sticky": "true", "eval": "eval"}
    assert report.protocol_differences(row, ours) == []


def test_wall_clock_curves_per_algorithm(tmp_path):
    fake_run(tmp_path, "fast", "CartPole-v1", 0, 400.0, steps=4000)  # wall up to 40 s
    fake_run(tmp_path, "slow", "CartPole-v1", 0, 400.0, steps=1000)  # wall up to 10 s
    results = [report.load_result(p) for p in report.find_runs([str(tmp_path)])]
    shared, _ = report.curves(results, ["CartPole-v1"], "wall")
    own, c = report.curves(results, ["CartPole-v1"], "wall", algo="fast")
    assert shared[-1] == pytest.approx(10.0) and own[-1] == pytest.approx(40.0)
    assert list(c) == ["fast"] and c["fast"].shape == (1, 1, 30)


def test_normalisers_by_hand():
    name, f = report.normalizer("Pendulum-v1")
    assert name == "solved-normalised"
    assert f(-1197.18) == pytest.approx(0.0) and f(0.0) == 1.0 and f(-598.59) == 0.5
    name, f = report.normalizer("MinAtar/Breakout-v1")  # random 0.43, gymnax PPO 28
    assert name == "random-to-reference-normalised"
    assert f(0.43) == 0.0 and f(28.0) == pytest.approx(1.0)
    assert f(14.215) == pytest.approx(0.5)
    assert report.normalizer("MinAtar/Seaquest-v1") is None  # no published reference


def test_env_family():
    assert report.env_family("Pong-v5") == "atari"
    assert report.env_family("HalfCheetah-v4") == "mujoco"
    assert report.env_family("CartPole-v1") == "other"
    assert report.env_family("MinAtar/Breakout-v1") == "minatar"


def test_published_scores_file():
    rows = report.load_published()
    games = report.load_atari_scores()
    assert len(rows) > 150
    for row in rows:
        float(row["score"]), float(row["frames"])
        assert row["env"] in games or "-v" in row["env"], row
        assert row["starts"] in {"noop30", "human", "none"} and row["sticky"] in {"true", "false"}
        assert row["eval"] in {"eval", "train_last100", "train_final"} and len(row["source"]) > 40
    by = {(r["agent"], r["env"], r["source"].split(" ")[0]): float(r["score"]) for r in rows}
    assert by[("acer", "breakout", "Schulman")] == 456.4  # PPO paper Table 6
    assert by[("a2c", "qbert", "OpenAI")] == 2047.07  # Baselines Atari10M table
    assert by[("reactor", "pong", "Gruslys")] == 20.7
