"""experiments.report: aggregates against rliable's own functions on fixed data, HNS against
hand-computed values, and the whole report on fake run folders."""

import json
import math

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
    # 100 env steps per training second, as metrics.csv's wall_s column says
    summary = {"wall_s": steps / 100} | ({"eval_return_mean": final} if eval_ else {})
    (d / "summary.json").write_text(json.dumps(summary))


def test_unlike_seeds_are_named_where_they_are_pooled(tmp_path):
    """Seeds of one configuration that end far apart (one cut off by --max-minutes) or that
    were not all evaluated at the end: each per-env table and the aggregates' notes say so;
    the normalised final has two decimals."""
    runs = tmp_path / "runs"
    for seed in range(3):  # seed 2 stopped at 40% of the budget, seed 1 not evaluated
        fake_run(runs, "ppo", "CartPole-v1", seed, 400.0 + seed, steps=400 if seed == 2 else 1000,
                 eval_=seed != 1)  # fmt: skip
        fake_run(runs, "a2c", "CartPole-v1", seed, 300.0 + seed)
    text = report.main([str(runs), "--out", str(tmp_path / "out"), "--reps", "50"]).read_text()
    for where in ("- ppo: ", "ppo on CartPole-v1: "):
        assert f"{where}1 of 3 runs have no final evaluation: their final is the last" in text
        assert f"{where}the runs end at 400 to 1,000 env steps" in text
    assert "a2c: " not in text and "a2c on CartPole-v1" not in text
    # a2c: mean final 301, normalised (301 − 0) / (475 − 0) = 0.634 (CartPole: low 0, solved 475)
    assert "| a2c | 3 | 301.0 ± 2.5 |" in text and " 0.63 ± 0.01 |" in text


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
    assert ours == {
        "frames": 1000.0,
        "starts": "none",
        "sticky": "true",
        "eval": "eval",
        "actions": "minimal",
    }
    row = {"env": "MinAtar/Breakout-v0", "frames": "5000000", "starts": "none"}
    row |= {"sticky": "false", "eval": "train_final"}
    assert report.protocol_differences(row, ours) == [
        "budget 5,000,000 frames vs ours 1,000",
        "no sticky actions (ours: sticky)",
        "full action set vs ours minimal",
        "training returns vs ours evaluation",
    ]
    row |= {"env": "MinAtar/Breakout-v1", "frames": "1000", "sticky": "true", "eval": "eval"}
    assert report.protocol_differences(row, ours) == []


def test_minatar_action_sets_by_id(tmp_path):
    assert report.minatar_action_set("MinAtar/Breakout-v0") == "full"
    assert report.minatar_action_set("gymnax/Breakout-MinAtar-full") == "full"
    assert report.minatar_action_set("MinAtar/Breakout-v1") == "minimal"
    assert report.minatar_action_set("gymnax/Breakout-MinAtar") == "minimal"
    assert report.minatar_action_set("gymnax/CartPole-v1") is None
    # Seaquest's minimal set is all 6 actions: its two ids are one protocol
    assert report.minatar_action_set("gymnax/Seaquest-MinAtar") == "full"
    assert report.minatar_action_set("MinAtar/Seaquest-v1") == "full"
    assert report.minatar_action_set("Breakout-v5") is None
    # a run on all 6 actions against gymnax's PPO checkpoint (minimal set, filed as -v1)
    fake_run(tmp_path, "ppo", "gymnax/Breakout-MinAtar-full", 0, 10.0)
    runs = [report.load_result(d) for d in report.find_runs([str(tmp_path)])]
    (row,) = report.published(runs)
    assert row["env"] == "gymnax/Breakout-MinAtar-full" and row["published"] == 28.0
    assert "minimal action set vs ours full" in row["differences"]


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
    name, f = report.normalizer("gymnax/Breakout-MinAtar")  # random 0.34 on gymnax's port
    assert name == "random-to-reference-normalised"
    assert f(0.34) == 0.0 and f(28.0) == pytest.approx(1.0)
    assert report.normalizer("gymnax/Seaquest-MinAtar") is None


def test_env_family():
    assert report.env_family("Pong-v5") == "atari"
    assert report.env_family("HalfCheetah-v4") == "mujoco"
    assert report.env_family("CartPole-v1") == "other"
    assert report.env_family("MinAtar/Breakout-v1") == "minatar"
    assert report.env_family("gymnax/SpaceInvaders-MinAtar") == "minatar"
    assert report.env_family("gymnax/CartPole-v1") == "other"
    assert report.minatar_game("gymnax/Breakout-MinAtar") == "Breakout"
    assert report.minatar_game("gymnax/Breakout-MinAtar-full") == "Breakout"
    assert report.env_family("gymnax/Asterix-MinAtar-full") == "minatar"
    assert report.minatar_game("MinAtar/Breakout-v1") == "Breakout"
    assert report.minatar_game("Breakout-v5") is None


def test_published_minatar_rows_match_either_port_by_game(tmp_path):
    fake_run(tmp_path, "ppo", "gymnax/Breakout-MinAtar", 0, 10.0)
    fake_run(tmp_path, "ppo", "gymnax/Seaquest-MinAtar", 0, 10.0)
    runs = [report.load_result(d) for d in report.find_runs([str(tmp_path)])]
    rows = report.published(runs)
    # gymnax's PPO checkpoint (28 on Breakout), filed under MinAtar/Breakout-v1; none for Seaquest
    assert [(r["env"], r["published"]) for r in rows] == [("gymnax/Breakout-MinAtar", 28.0)]
    assert "no sticky actions (ours: sticky)" in rows[0]["differences"]


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


# ----------------------------------------------------------------------------- damaged runs


def real_run(root, name, env="CartPole-v1", seed=0, final=400.0, agent="ppo", run=None,
             agent_config=None, top=None, columns=None, summary=None):  # fmt: skip
    """A run folder laid out as train writes it: config.json with run options, agent config
    and the derived fields; metrics.csv with 4 rows (plus `columns`: name -> 4 cells);
    summary.json."""
    d = root / name
    d.mkdir(parents=True)
    options = {"agent": agent, "env": env, "seed": seed, "total_steps": 1000,
               "run_dir": str(d), "exp_name": None, "resume": None, "preset": None,
               "num_seeds": 1, "vary": [], "sweep_lr": None, "evolve": "none",
               "num_threads": 0, "num_devices": None, "coordinator_address": None,
               "num_processes": 1, "process_id": 0, "progress": False, "debug": False,
               "checkpoint_every": 500, "keep_checkpoints": 3, "max_minutes": None,
               "eval_episodes": 20, "eval_greedy": False, "return_window": 20,
               "reward_clip": None} | (run or {})  # fmt: skip
    config = {"agent": agent, "run": options,
              "agent_config": {"lr": 0.001, "num_envs": 8, "hidden": [64, 64]}
              | (agent_config or {}),
              "env_spec": {"env_id": env}, "jax": "0.4.0",
              "replay_bytes_per_transition": 0} | (top or {})  # fmt: skip
    (d / "config.json").write_text(json.dumps(config))
    extra = columns or {}
    lines = ["env_steps,return_mean,wall_s" + "".join("," + c for c in extra)]
    for i, s in enumerate((250, 500, 750, 1000)):
        lines.append(f"{s},{final * s / 1000},{s / 100}" + "".join(
            f",{cells[i]}" for cells in extra.values()))  # fmt: skip
    (d / "metrics.csv").write_text("\n".join(lines) + "\n")
    summary = {"wall_s": 10.0, "sps": 100.0, "eval_return_mean": final} | (summary or {})
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def exits(argv, capsys) -> str:
    """The one line `report.main(argv)` exits with; nothing may reach stderr besides it."""
    with pytest.raises(SystemExit) as exit_info:
        report.main(argv)
    message = exit_info.value.code
    assert isinstance(message, str) and message.startswith("error: "), message
    assert "\n" not in message and not capsys.readouterr().err
    return message


MISSING = object()


def _set(data: dict, dotted: str, value):
    *parents, leaf = dotted.split(".")
    for key in parents:
        data = data[key]
    if value is MISSING:
        data.pop(leaf, None)
    else:
        data[leaf] = value


JSON_DAMAGE = {"missing": MISSING, "null": None, "int": 7, "string": "3", "list": [1],
               "dict": {"a": 1}, "nan string": "NaN", "nan": math.nan, "bool": True}  # fmt: skip
# (file, field) -> damages that are valid values or documented defaults; every other damage
# must be one line naming the file and the field.
JSON_ACCEPTED = {
    ("config.json", "agent"): {"missing"},  # the run block's agent
    ("config.json", "run.agent"): {"missing"},  # the top-level agent
    ("config.json", "run.env"): {"string", "nan string"},  # env ids are names
    ("config.json", "run.seed"): {"int"},
    ("config.json", "run.evolve"): {"missing", "string", "nan string"},  # a config field
    ("config.json", "run"): set(),
    ("config.json", "agent_config"): {"missing", "dict"},
    ("config.json", "population"): {"missing", "dict"},
    ("config.json", "population.member"): {"missing"},  # 7: not below population.of, 1
    ("config.json", "population.of"): {"missing", "int"},
    ("summary.json", "eval_return_mean"): {"missing", "null", "nan", "int"},
    ("summary.json", "wall_s"): {"missing", "null", "nan", "int"},
    ("summary.json", "env_steps"): {"missing", "int"},  # 7: stale, the run is unfinished
}


@pytest.mark.parametrize("damage", list(JSON_DAMAGE))
@pytest.mark.parametrize("file, name", list(JSON_ACCEPTED))
def test_every_json_field_report_reads_damaged(tmp_path, capsys, file, name, damage):
    d = real_run(tmp_path / "runs", "r", top={"population": {"member": 0, "of": 1}})
    data = json.loads((d / file).read_text())
    _set(data, name, JSON_DAMAGE[damage])
    (d / file).write_text(json.dumps(data))  # NaN as the NaN literal of lenient writers
    argv = [str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--reps", "10"]
    if damage in JSON_ACCEPTED[(file, name)]:
        (r,) = report.load_results(argv[:1])
        assert r.final in (400.0, 7.0) and not capsys.readouterr().err  # 7: the damage
        if (file, name, damage) == ("summary.json", "env_steps", "int"):
            assert not r.final_is_eval  # stale: its evaluation is not the final
        return
    message = exits(argv, capsys)
    assert str(d / file) in message and name in message, message
    assert not (tmp_path / "out").exists()


CSV_DAMAGE = {"missing": None, "empty": "", "word": "abc", "list": '"[1, 2]"',
              "dict": "\"{'a': 1}\"", "nan string": "NaN", "inf": "inf",
              "negative": "-5"}  # fmt: skip
CSV_ACCEPTED = {
    "env_steps": set(),
    "return_mean": {"empty", "nan string", "negative"},  # no episode yet / a return
    "wall_s": set(),
    "hp_lr": {"missing", "negative"},  # a member's value; no column: none logged
}


@pytest.mark.parametrize("damage", list(CSV_DAMAGE))
@pytest.mark.parametrize("column", list(CSV_ACCEPTED))
def test_every_metrics_column_report_reads_damaged(tmp_path, capsys, column, damage):
    member = {"population": {"member": 0, "of": 2}}
    d = real_run(tmp_path / "runs", "r", top=member, columns={"hp_lr": [0.001] * 4})
    header, *rows = (d / "metrics.csv").read_text().splitlines()
    i = header.split(",").index(column)
    cell = CSV_DAMAGE[damage]
    if cell is None:  # the column is missing
        keep = [j for j in range(len(header.split(","))) if j != i]
        header = ",".join(header.split(",")[j] for j in keep)
        rows = [",".join(row.split(",")[j] for j in keep) for row in rows]
    else:
        cells = rows[1].split(",")
        cells[i] = cell
        rows[1] = ",".join(cells)
    (d / "metrics.csv").write_text("\n".join([header, *rows]) + "\n")
    argv = [str(tmp_path / "runs"), "--out", str(tmp_path / "out")]
    if damage in CSV_ACCEPTED[column]:
        (r,) = report.load_results(argv[:1])
        assert r.final == 400.0 and not capsys.readouterr().err
        return
    message = exits(argv, capsys)
    assert str(d / "metrics.csv") in message and column in message, message
    if cell is not None:
        assert "line 3" in message, message


def test_damaged_files_of_the_issue(tmp_path, capsys):
    """The cases that ended in tracebacks: each is one line naming the file and field."""
    runs, out = tmp_path / "runs", str(tmp_path / "out")
    d = real_run(runs, "r", run={"seed": {"a": 1}})
    assert "run.seed must be an integer >= 0, got {'a': 1}" in exits(
        [str(runs), "--out", out], capsys
    )
    _set(config := json.loads((d / "config.json").read_text()), "run.seed", 0)
    config["run"]["env"] = None
    (d / "config.json").write_text(json.dumps(config))
    assert "run.env must be a non-empty string, got None" in exits(
        [str(runs), "--out", out], capsys
    )
    config["run"]["env"] = "CartPole-v1"
    (d / "config.json").write_text(json.dumps(config))
    (d / "summary.json").write_text(json.dumps({"wall_s": [1, 2]}))
    assert "summary.json: wall_s must be" in exits([str(runs), "--out", out], capsys)
    (d / "summary.json").write_text("[1]")
    assert "holds a JSON array" in exits([str(runs), "--out", out], capsys)
    (d / "summary.json").unlink()  # optional: the last training mean is the final return
    (d / "metrics.csv").write_text('env_steps,return_mean,wall_s\n10,"[1, 2]",1\n')
    assert "line 2: return_mean must be a finite number" in exits([str(runs), "--out", out], capsys)
    (d / "metrics.csv").write_text("env_steps,return_mean,wall_s\n10,5,1\n20,6\n")
    assert "line 3: 2 cells for the header's 3 columns" in exits([str(runs), "--out", out], capsys)
    (d / "metrics.csv").write_text("env_steps,return_mean,wall_s\n20,5,1\n10,6,2\n")
    assert "line 3: env_steps 10 is below" in exits([str(runs), "--out", out], capsys)
    (d / "metrics.csv").write_text("")
    assert "has no header line" in exits([str(runs), "--out", out], capsys)
    # A live run's half-written last line is left out, as documented.
    (d / "metrics.csv").write_text("env_steps,return_mean,wall_s\n10,5,1\n20,6")
    (r,) = report.load_results([str(runs)])
    assert r.env_steps == 10 and r.final == 5.0


@pytest.mark.parametrize(
    "argv, needle",
    [(["--reps", "0"], "--reps must be in [1, 1,000,000], got 0"),
     (["--reps", "-3"], "--reps must be in [1, 1,000,000]"),
     (["--reps", "100000000000"], "--reps must be in [1, 1,000,000], got 100000000000"),
     (["--out", "FILE"], "exists and is not a folder"), (["--out", "FILE/sub"], "is a file"),
     (["--out", " "], "--out must be a folder")],
)  # fmt: skip
def test_bad_flags_are_one_line_before_reading(tmp_path, capsys, argv, needle):
    (tmp_path / "FILE").write_text("x")
    argv = [a.replace("FILE", str(tmp_path / "FILE")) for a in argv]
    base = ["--out", str(tmp_path / "out")] if "--out" not in argv else []
    message = exits([str(tmp_path / "nothing-here"), *base, *argv], capsys)
    assert needle in message and "does not exist" not in message  # flags first
    assert (tmp_path / "FILE").read_text() == "x"


def test_a_header_only_run_is_skipped_not_the_report(tmp_path, capsys):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        real_run(runs, f"ppo-CartPole-v1-seed{seed}", seed=seed)
    starting = runs / "ppo-CartPole-v1-seed2"
    starting.mkdir()
    (starting / "config.json").write_text(
        (runs / "ppo-CartPole-v1-seed0" / "config.json").read_text()
    )
    (starting / "metrics.csv").write_text("env_steps,return_mean,wall_s\n")
    waiting = real_run(runs, "ppo-CartPole-v1-seed3", seed=3)
    (waiting / "metrics.csv").write_text("env_steps,return_mean,wall_s\n10,nan,1\n20,,2\n")
    (waiting / "summary.json").unlink()
    md = report.main([str(runs), "--out", str(tmp_path / "out"), "--reps", "10"])
    err = capsys.readouterr().err.splitlines()
    assert err == [f"skipping {starting}: no rows in metrics.csv yet",
                   f"skipping {waiting}: no episode finished yet"]  # fmt: skip
    assert "| ppo | 2 |" in md.read_text()


def test_a_live_run_without_summary_reports_quietly(tmp_path, capfd):
    """A run still training (no summary.json: no measured steps/s): its throughput cell is
    nan, and nothing reaches stderr (no numpy warning about an all-NaN mean)."""
    run = real_run(tmp_path / "runs", "ppo-CartPole-v1-seed0")
    (run / "summary.json").unlink()
    md = report.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--reps", "10"])
    assert "| ppo | 1 |" in md.read_text() and capfd.readouterr().err == ""


@pytest.mark.parametrize(
    "text, needle",
    [("[" * 100_000 + "]" * 100_000, "nested too deeply"), ('{"a": ' + "9" * 5000 + "}", "digits")],
    ids=["deep", "long-number"],
)
def test_json_the_parser_cannot_take_is_one_line_naming_the_file(tmp_path, capsys, text, needle):
    run = real_run(tmp_path / "runs", "ppo-CartPole-v1-seed0")
    (run / "config.json").write_text(text)
    message = exits([str(tmp_path / "runs"), "--out", str(tmp_path / "out")], capsys)
    assert f"{run / 'config.json'} cannot be read as JSON" in message and needle in message


# ----------------------------------------------------------------------------- provenance


def report_of(tmp_path, capsys=None) -> tuple[dict, str]:
    md = report.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--reps", "10"])
    return json.loads((tmp_path / "out" / "report.json").read_text()), md.read_text()


def test_two_configs_sharing_a_seed_are_not_two_seeds(tmp_path):
    real_run(tmp_path / "runs", "a", seed=0, final=100.0, agent_config={"lr": 0.001})
    real_run(tmp_path / "runs", "b", seed=0, final=300.0, agent_config={"lr": 0.0003})
    data, text = report_of(tmp_path)
    assert data["envs"]["CartPole-v1"] == {
        "ppo lr=0.0003": {
            "final": [300.0, None],
            "last_train": [300.0, None],
            "best": [300.0, None],
            "seeds": 1,
        },
        "ppo lr=0.001": {
            "final": [100.0, None],
            "last_train": [100.0, None],
            "best": [100.0, None],
            "seeds": 1,
        },
    }
    assert "| ppo lr=0.001 | 1 | 100.0 |" in text and "| ppo | 2 |" not in text
    assert data["configs"]["ppo lr=0.001"]["config"]["agent_config.lr"] == 0.001
    assert data["configs"]["ppo lr=0.001"]["runs"] == [str(tmp_path / "runs" / "a")]


NOT_CONFIG_VALUES = {"seed": 5, "env": "Acrobot-v1", "run_dir": "/elsewhere", "exp_name": "x",
                     "resume": "/r", "preset": "ppo-classic", "num_seeds": 4,
                     "vary": ["lr=0.1,0.2"], "sweep_lr": "0.1,0.2", "num_threads": 4,
                     "num_devices": 2, "coordinator_address": "h:1", "num_processes": 2,
                     "process_id": 1, "progress": True, "debug": True,
                     "checkpoint_every": 7, "keep_checkpoints": 9, "max_minutes": 3.0,
                     "eval_episodes": 5, "exact_resume": True}  # fmt: skip


def test_the_not_config_list_is_the_one_tested():
    assert set(NOT_CONFIG_VALUES) == set(report.RUN_FIELDS_NOT_CONFIG)


@pytest.mark.parametrize("name", report.RUN_FIELDS_NOT_CONFIG)
def test_runs_differing_only_where_nothing_is_learned_are_pooled(tmp_path, name):
    real_run(tmp_path / "runs", "one", seed=1)
    other = {"seed": 2} | {name: NOT_CONFIG_VALUES[name]}
    real_run(tmp_path / "runs", "two", env=other.pop("env", "CartPole-v1"), run=other,
             top={"jax": "0.5", "python": "3.12", "env_spec": {"x": 1}})  # fmt: skip
    results = report.load_results([str(tmp_path / "runs")])
    assert [r.algo for r in results] == ["ppo", "ppo"], name


@pytest.mark.parametrize(
    "change",
    [{"run": {"total_steps": 2000}}, {"run": {"reward_clip": True}},
     {"run": {"eval_greedy": True}}, {"run": {"return_window": 100}},
     {"run": {"evolve": "pbt"}}, {"agent_config": {"hidden": [32]}},
     {"agent_config": {"reshape_reward": "mod:fn"}}, {"top": {"git_commit": "abc"}},
     {"agent": "a2c"}],
)  # fmt: skip
def test_runs_differing_in_anything_else_are_apart(tmp_path, change):
    real_run(tmp_path / "runs", "one", seed=1)
    real_run(tmp_path / "runs", "two", seed=2, **change)
    labels = {r.path.name: r.algo for r in report.load_results([str(tmp_path / "runs")])}
    if "agent" in change:
        assert labels == {"one": "ppo", "two": "a2c"}
        return
    (field,) = next(iter(change.values()))  # the one field changed: named where it is set
    assert labels["two"].startswith(f"ppo {field}=") and labels["one"] != labels["two"]


def test_a_field_saved_under_its_former_name_pools_with_its_current_name(tmp_path):
    # The Reactor's microbatch_sequences became microbatch_traces (its config's RENAMED
    # table): a run saved before the rename is a seed of the same configuration.
    runs = tmp_path / "runs"
    real_run(runs, "old", seed=1, agent="reactor", agent_config={"microbatch_sequences": 4})
    real_run(runs, "new", seed=2, agent="reactor", agent_config={"microbatch_traces": 4})
    real_run(runs, "other", seed=3, agent="reactor", agent_config={"microbatch_traces": 8})
    labels = {r.path.name: r.algo for r in report.load_results([str(runs)])}
    assert labels["old"] == labels["new"] != labels["other"], labels
    assert "microbatch_traces=8" in labels["other"]


def test_an_agent_this_version_does_not_know_is_reported_under_its_names(tmp_path):
    real_run(tmp_path / "runs", "gone", agent="retired-agent", agent_config={"x": 1})
    (result,) = report.load_results([str(tmp_path / "runs")])
    assert result.algo == "retired-agent"


def population(root, name, values, evolve="none", seed=10, layout="member config"):
    """A --num-seeds P population of fakes with --vary lr=VALUES (member i: values[i]), its
    member configs as train writes them (the member's own values in agent_config and in
    `population.hparams`), or as earlier versions did (the base value; hp_lr column only)."""
    for i, lr in enumerate(values):
        block = {"member": i, "of": len(values)}
        if layout == "member config":
            block |= {"hparams": {"lr": lr}, "since": {"generation": 0, "env_steps": 0}}
        real_run(root / name, f"member-{i}", seed=seed + i, final=100.0 * (i + 1),
                 run={"num_seeds": len(values), "vary": ["lr=" + ",".join(map(str, values))],
                      "evolve": evolve, "exp_name": name},
                 agent_config={"lr": lr if layout == "member config" else 0.00025},
                 top={"population": block}, columns={"hp_lr": [lr] * 4})  # fmt: skip


@pytest.mark.parametrize("layout", ["member config", "hp columns only"])
def test_a_varied_population_is_labelled_by_its_values(tmp_path, layout):
    population(tmp_path / "runs", "pop", [0.001, 0.0003, 0.001, 0.0003], layout=layout)
    real_run(tmp_path / "runs", "single", seed=0, final=50.0, agent_config={"lr": 0.001})
    data, text = report_of(tmp_path)
    by = data["envs"]["CartPole-v1"]
    assert sorted(by) == ["ppo lr=0.0003", "ppo lr=0.001"]
    # Members 0 and 2 (lr 0.001) pool with the single run of --lr 0.001, as the population
    # README promises: a member with --vary lr=X is the single run with --lr X.
    assert by["ppo lr=0.001"]["seeds"] == 3 and by["ppo lr=0.0003"]["seeds"] == 2
    assert by["ppo lr=0.0003"]["final"][0] == pytest.approx(300.0)  # members 1 and 3
    assert "| ppo lr=0.001 | 3 |" in text


def test_an_evolving_populations_members_are_never_pooled(tmp_path):
    # Each member's config holds the values it has now (PBT changes them), and its index.
    population(tmp_path / "runs", "pbt", [0.001, 0.001], evolve="pbt")
    population(tmp_path / "runs", "old", [0.001, 0.001], evolve="pbt", layout="hp only")
    results = report.load_results([str(tmp_path / "runs")])
    assert sorted(r.algo for r in results) == [
        "ppo lr=0.00025 member=0",  # the layout of earlier versions: the base value
        "ppo lr=0.00025 member=1",
        "ppo lr=0.001 member=0",
        "ppo lr=0.001 member=1",
    ]


def test_a_population_without_logged_values_keeps_members_apart(tmp_path):
    for i in range(2):  # --vary, but no hp_ columns to say which member had which value
        real_run(tmp_path / "runs", f"member-{i}", seed=i, run={"vary": ["lr=0.1,0.2"],
                 "num_seeds": 2}, top={"population": {"member": i, "of": 2}})  # fmt: skip
    assert sorted(r.algo for r in report.load_results([str(tmp_path / "runs")])) == [
        "ppo member=0",
        "ppo member=1",
    ]


def test_sweep_labels_are_kept_and_clashes_named_by_full_paths(tmp_path):
    runs = tmp_path / "runs"
    real_run(runs, "ppo-CartPole-v1-seed0-lr=0.1", agent_config={"lr": 0.1})
    real_run(runs, "ppo-CartPole-v1-seed0-lr=0.2", agent_config={"lr": 0.2})
    real_run(runs, "big-CartPole-v1-seed0", agent_config={"num_envs": 64})
    real_run(runs, "big-Acrobot-v1-seed0", env="Acrobot-v1", agent_config={"num_envs": 64})
    # Two configurations that differ in fields of the same name in two blocks.
    real_run(runs, "x1", run={"tau": 1}, agent_config={"tau": 1})
    real_run(runs, "x2", run={"tau": 2}, agent_config={"tau": 2}, seed=1)
    labels = {r.path.name: r.algo for r in report.load_results([str(runs)])}
    assert labels == {
        "ppo-CartPole-v1-seed0-lr=0.1": "ppo lr=0.1",
        "ppo-CartPole-v1-seed0-lr=0.2": "ppo lr=0.2",
        "big-CartPole-v1-seed0": "big",  # one label over both envs
        "big-Acrobot-v1-seed0": "big",
        # Only the fields each sets are named: tau is unset in the lr runs.
        "x1": "ppo lr=0.001 agent_config.tau=1 run.tau=1",
        "x2": "ppo lr=0.001 agent_config.tau=2 run.tau=2",
    }


def test_the_same_run_twice_counts_once(tmp_path, capsys):
    runs = tmp_path / "runs"
    real_run(runs, "a", seed=0)
    real_run(runs, "copy-of-a", seed=0, run={"run_dir": "/moved"})
    real_run(runs, "b", seed=1)
    # The same folder given twice (and under its parent) is read once, silently.
    results = report.load_results([str(runs), str(runs / "a")])
    assert [r.path.name for r in results] == ["a", "b"]
    assert capsys.readouterr().err.splitlines() == [
        f"skipping {runs / 'copy-of-a'}: the same configuration, env and seed as {runs / 'a'}"
    ]


def test_published_scores_match_by_agent_not_label(tmp_path):
    real_run(tmp_path / "runs", "mine-CartPole-v1-seed0", agent="ppo")
    (r,) = report.load_results([str(tmp_path / "runs")])
    rows = [{"agent": "ppo", "env": "CartPole-v1", "score": "490", "frames": "1000",
             "starts": "none", "sticky": "false", "eval": "eval", "source": "x"}]  # fmt: skip
    (match,) = report.published([r], rows)
    assert r.algo == "mine" and match["matches"]


def test_labels_that_look_like_mathtext_are_drawn_as_text(tmp_path):
    """A sweep label from a run folder's name with a pair of `$` is a name in the figures,
    not mathtext that fails to parse (every figure is drawn, the label kept as it is)."""
    runs = tmp_path / "runs"
    for seed in (0, 1):
        real_run(runs, f"a$\\frac{{$b-CartPole-v1-seed{seed}", seed=seed)
        real_run(runs, f"ppo-CartPole-v1-seed{seed}", seed=seed, agent_config={"lr": 0.01})
    _, md = report_of(tmp_path)
    assert "| a$\\frac{$b | 2 |" in md
    assert all((tmp_path / "out" / f"{name}.png").stat().st_size > 0
               for name in ("aggregates", "performance_profile", "sample_efficiency"))  # fmt: skip


def test_last_training_mean_is_reported_beside_the_evaluation(tmp_path):
    # The MinAtar paper's measure (the last training episodes) next to our evaluation.
    for seed, (ev, last) in enumerate([(12.0, 8.0), (14.0, 10.0)]):
        fake_run(tmp_path / "runs", "ppo", "gymnax/Breakout-MinAtar", seed, last)
        summary = tmp_path / "runs" / f"ppo-gymnax/Breakout-MinAtar-seed{seed}" / "summary.json"
        summary.write_text(json.dumps({"wall_s": 10, "sps": 100.0, "eval_return_mean": ev}))
    md = report.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--reps", "50"])
    env = json.loads((tmp_path / "out" / "report.json").read_text())["envs"]
    row = env["gymnax/Breakout-MinAtar"]["ppo"]
    assert row["final"][0] == pytest.approx(13.0) and row["last_train"][0] == pytest.approx(9.0)
    assert "| last train |" in md.read_text()


def test_compute_prices_a_population_by_its_programs_rate(tmp_path):
    # 5 members side by side, 100 steps/s each (1,000 steps in 10 s): the program runs 500,
    # so 25 runs of 5M steps take 25 * 5M / 500 s, not 5 times that.
    for i in range(5):
        block = {"population": {"member": i, "of": 5}}
        d = real_run(tmp_path / "runs", f"member-{i}", env="gymnax/Breakout-MinAtar", seed=i,
                     top=block, summary={"wall_s": 10.0})  # fmt: skip
    results = report.load_results([str(tmp_path / "runs")])
    assert [r.members for r in results] == [5] * 5
    minatar = "MinAtar, 5 games, 5M frames = 5M steps (Young & Tian 2019)"
    (est,) = [e for e in report.compute_estimates(results) if e["budget"] == minatar]
    assert est["sps"] == 500.0 and est["runs"] == 25
    assert est["hours"] == pytest.approx(25 * 5_000_000 / 500 / 3600)
    config = json.loads((d / "config.json").read_text())
    config["population"]["of"] = 4  # member 4 of a population of 4
    (d / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"population\.member.*below population\.of \(4\)"):
        report.load_results([str(d)])


def test_a_resumed_runs_rate_covers_the_whole_run(tmp_path):
    # summary.json's sps of earlier versions is the rate of the process that wrote it: a run
    # resumed for its last stretch reports that stretch's (999 here). The report prices the
    # whole run: 1,000 env steps in the 20 training seconds of all its stretches (metrics.csv's
    # last row), 50 steps/s, in the per-env table and the compute estimate alike.
    d = real_run(tmp_path / "runs", "r", env="gymnax/Breakout-MinAtar",
                 summary={"wall_s": 20.0, "sps": 999.0})  # fmt: skip
    rows = (d / "metrics.csv").read_text().replace("1000,400.0,10.0", "1000,400.0,20.0")
    (d / "metrics.csv").write_text(rows)
    (result,) = report.load_results([str(tmp_path / "runs")])
    assert result.sps == 50.0 and result.wall_s == 20.0
    (est,) = [e for e in report.compute_estimates([result]) if e["family"] == "minatar"]
    assert est["sps"] == 50.0
    md = report.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--reps", "10"])
    assert "| 1,000 | 20 | 50 |" in md.read_text()
    # Raised --total-steps, resumed, not yet finished: the old summary (its 20 s, its
    # evaluation at 1,000 steps) describes an earlier moment than metrics.csv's last row, so
    # the run is reported as unfinished: 2,000 steps in 40 s, its last training mean as final.
    summary = json.loads((d / "summary.json").read_text())
    summary.update(env_steps=1000, eval_return_mean=123.0)
    (d / "summary.json").write_text(json.dumps(summary))
    (result,) = report.load_results([str(tmp_path / "runs")])
    assert result.final == 123.0 and result.final_is_eval and result.wall_s == 20.0
    (d / "metrics.csv").write_text(rows + "2000,400.0,40.0\n")
    (result,) = report.load_results([str(tmp_path / "runs")])
    assert result.sps == 50.0 and result.wall_s == 40.0
    assert result.final == 400.0 and not result.final_is_eval


def test_log_axis_labels_are_plain_numbers_without_mathtext():
    # The report turns mathtext off (labels come from run folders), so matplotlib's log tick
    # labels ($\\mathdefault{10^{2}}$) would be drawn as their source text.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"text.parse_math": False}):
        fig, ax = plt.subplots()
        ax.plot([10, 100, 1000, 5000], [0, 1, 2, 3])
        report.plain_log_axis(ax.xaxis)
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        plt.close(fig)
    assert ax.get_xscale() == "log"
    assert {"100", "1000"} <= set(labels) and not any("$" in t for t in labels), labels


def test_atari100k_reference_reproduces_the_published_aggregates():
    """The reference file's per-game rows give the aggregates their papers report (DER mean
    0.285, median 0.161; OTR 0.264 / 0.204; DrQ 0.357 / 0.268; SPR 0.704 / 0.415), and its
    random and human scores are the Atari-57 table's."""
    from experiments import atari100k

    got = atari100k.published_aggregates()
    want = {"DER": (0.285, 0.161), "OTR": (0.264, 0.204), "DrQ": (0.357, 0.268),
            "SPR": (0.704, 0.415)}  # fmt: skip
    for name, (mean, median) in want.items():
        assert got[name]["mean"] == pytest.approx(mean, abs=6e-4), name
        assert got[name]["median"] == pytest.approx(median, abs=6e-4), name
    table = atari100k.load_table()
    for game, row in table.items():
        assert report.load_atari_scores()[report.atari_game(f"{game}-v5")] == (
            row["random"],
            row["human"],
        )


def test_atari100k_section_sets_our_runs_beside_the_published_rows(tmp_path, capsys):
    """Runs under --protocol atari100k get the per-game table beside DER/OTR/DrQ/SPR, the
    published DER flagged where it falls outside our seeds, and human-normalised aggregates
    (mean of per-game means) beside the published ones, the cost table and the per-game
    curves; runs without the protocol none."""
    for seed, (pong, alien) in enumerate([(-21.0, 700.0), (-20.5, 900.0), (-21.0, 800.0)]):
        for env, final in (("Pong-v5", pong), ("Alien-v5", alien)):
            real_run(tmp_path / "runs", f"dqn-{env}-seed{seed}", env=env, seed=seed, final=final,
                     agent="dqn", run={"protocol": "atari100k"},
                     summary={"eval_s": 60.0 * (seed + 1)})  # fmt: skip
    # one seed is a point, not a range: Amidar's 100.0 against the published 188.6 is not flagged
    real_run(tmp_path / "runs", "dqn-Amidar-v5-seed0", env="Amidar-v5", seed=0, final=100.0,
             agent="dqn", run={"protocol": "atari100k"})  # fmt: skip
    real_run(tmp_path / "runs", "ppo-CartPole-v1-seed0")
    out = report.main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--reps", "50"])
    text = out.read_text()
    data = json.loads((tmp_path / "out" / "report.json").read_text())["atari100k"]
    assert "## Atari 100k" in text and "| Alien | 800.0 ± 248.4 |" in text  # t(2)·100/√3
    # Pong's published DER -19.3 lies outside our seeds' -21 .. -20.5; Alien's 739.9 inside.
    assert data["outside_der"] == ["Pong (dqn: -21.0 .. -20.5)"] and " !" in text
    hn = lambda s, r, h: (s - r) / (h - r)  # noqa: E731
    want = np.mean([hn(-62.5 / 3, -20.7, 14.6), hn(800.0, 227.8, 7127.7), hn(100.0, 5.8, 1719.5)])
    assert data["ours"]["dqn"]["mean"] == pytest.approx(want) and data["ours"]["dqn"]["games"] == 3
    assert "| DER (published) | 26 | 0.285 | 0.161 |" in text
    # Cost: medians over the 7 runs (Amidar's evaluation time unknown): 1,000 steps in 10 s
    # each, evaluations of 60, 120, 180 s for both games -> 2 min; 26 games x (1/6 + 2) min.
    want = {"runs": 7, "sps": 100.0, "train_min": 10 / 60, "eval_min": 2.0,
            "hours_per_26_games": 26 * (10 / 60 + 2) / 60}  # fmt: skip
    assert data["cost"]["dqn"] == pytest.approx(want)
    assert "| dqn | 7 | 100 | 0.2 | 2.0 | 0.9 |" in text
    assert (tmp_path / "out" / "atari100k_curves.png").stat().st_size > 10_000
