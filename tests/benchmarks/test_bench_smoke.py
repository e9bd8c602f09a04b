"""The throughput and scaling benchmarks run end to end at tiny sizes (no timing asserts)."""

import math

import pytest

from benchmarks import bench_gymnax, bench_scaling, bench_throughput, fused_dqn_peer, fused_ppo_peer

pytestmark = pytest.mark.slow  # the slow tier (docs/tests.md)

TINY = ["--env", "CartPole-v1", "--iterations", "1", "--warmup", "2", "--raw-steps", "20"]


def test_bench_throughput_acer_with_its_cost_model():
    out = bench_throughput.main(
        [*TINY, "--num-envs", "4", "--preset", "acer-classic", "--batch-sizes", "8",
         "--compare", "replay_ratio=0,2", "--rounds", "2"]
    )  # fmt: skip
    assert out["compare"] == "replay_ratio"
    assert [r["replay_ratio"] for r in out["rows"]] == [0.0, 2.0]
    assert out["num_envs"] == 4 and out["raw_env_sps"] > 0
    for r in out["rows"]:
        assert r["sps"] > 0 and len(r["sps_rounds"]) == 2
    assert out["rows"][0]["updates_per_s"] > 0  # the on-policy update alone
    assert math.isfinite(out["rows"][1]["ratio_to_first"])
    assert set(out["cost_model"]) == {"forward", "forward+backward+adam"}
    assert 0 < out["rows"][-1]["train_over_ceiling"] < math.inf


def test_bench_throughput_reactor_compares_acting_modes_by_default():
    # Without --num-envs the benchmark runs the preset's env count (reactor-classic: 8).
    out = bench_throughput.main(
        [*TINY, "--agent", "reactor", "--preset", "reactor-classic", "--rounds", "2"]
    )
    assert out["num_envs"] == 8 and out["compare"] == "decoupled"
    assert [r["decoupled"] for r in out["rows"]] == [True, False]
    assert 0 <= out["rows"][0]["learner_waiting_for_actor_fraction"] <= 1
    # the preset's learning warm-up (start_train_at) is zeroed: both variants learned
    assert all(r["updates_per_s"] > 0 for r in out["rows"])
    assert out["cost_model"] is None  # the Reactor has no cost model


def test_bench_scaling_one_and_two_devices():
    out = bench_scaling.main(
        ["--devices", "1", "2", "--num-envs", "4", "--batch-size", "4", "--iterations", "2",
         "--rounds", "1"]
    )  # fmt: skip
    # `devices` is read back from the agent: the second run really was split over a mesh.
    assert [r["devices"] for r in out["rows"]] == [1, 2]
    for r in out["rows"]:
        assert r["updates_per_s"] > 0 and r["env_steps_per_s"] > 0


def test_bench_population_counts_every_members_steps(tmp_path):
    from agents.core.registry import get_agent
    from benchmarks import bench_population

    out = bench_population.main(
        ["--num-seeds", "1", "--steps-per-member", "1", "--json-out", str(tmp_path / "b.json")]
    )
    # one iteration of ACER's default config, as a population of 1 and as a single run
    cfg = get_agent("acer").make_config(None)
    iteration = cfg.num_envs * cfg.trace_len
    assert out["population"]["env_steps"] == out["sequential"]["env_steps"] == iteration
    assert out["population"]["compile_s"] > 0 and out["sequential"]["compile_s"] > 0
    assert out["ratio"] == out["population"]["sps"] / out["sequential"]["sps"]
    assert "processes" not in out and (tmp_path / "b.json").exists()


def test_bench_gymnax_runs_the_single_file_ppo_beside_ours(tmp_path):
    out = bench_gymnax.main(
        bench_gymnax.Args(cases=["ppo-cartpole"], rounds=2, scale=0.005, out=str(tmp_path))
    )
    case = out["ppo-cartpole"]
    assert len(case["rounds"]) == len(case["peer_rounds"]) == 2
    assert all(r["env_steps"] == 2048 and r["sps"] > 0 for r in case["peer_rounds"])
    # each list holds its own side's rounds: train processes report syncs, the peer returns
    assert all("syncs" in r for r in case["rounds"])
    assert all("final_return" in r and "syncs" not in r for r in case["peer_rounds"])
    assert case["peer_ratio"] == case["median_sps"] / case["peer_median_sps"]
    assert (tmp_path / "results.json").is_file()


def test_bench_gymnax_times_a_population_in_aggregate_beside_its_single_run(tmp_path, monkeypatch):
    """A population case adds its single run to the cases and is timed from member 0's
    metrics: P members' steps per second, divided by the single run's median."""
    flags, total, _ = bench_gymnax.CASES["ppo-cartpole"]
    monkeypatch.setitem(
        bench_gymnax.CASES,
        "ppo-cartpole-x2",
        (f"{flags} --num-seeds 2 --num-devices 1", total, None),
    )
    monkeypatch.setitem(bench_gymnax.POPULATIONS, "ppo-cartpole-x2", ("ppo-cartpole", 2))
    args = bench_gymnax.Args(cases=["ppo-cartpole-x2"], rounds=1, scale=0.005, peers=False)
    out = bench_gymnax.main(args)
    pop, single = out["ppo-cartpole-x2"], out["ppo-cartpole"]
    assert [r["members"] for r in pop["rounds"]] == [2] and single["rounds"][0]["members"] == 1
    # 2,500 steps per member, 512 per iteration: timed from the first sync at or past 500
    assert pop["rounds"][0]["timed_steps"] == 2 * single["rounds"][0]["timed_steps"] == 2 * 2048
    assert pop["ratio_to_single"] == pop["median_sps"] / single["median_sps"]


def test_fused_ppo_peer_refuses_an_id_gymnax_lacks(capsys):
    with pytest.raises(SystemExit):
        fused_ppo_peer.main(["--env", "gymnax/CartPole-v1"])
    assert "is not a gymnax id" in capsys.readouterr().err


def test_fused_dqn_peer_refuses_an_id_gymnax_lacks_and_a_run_before_learning(capsys):
    for argv in (["--env", "gymnax/Breakout-MinAtar"], ["--total-steps", "1000"]):
        with pytest.raises(SystemExit):
            fused_dqn_peer.main(argv)
    err = capsys.readouterr().err
    assert "is not a gymnax id" in err and "--total-steps must be >= 2000" in err


@pytest.mark.slow
def test_fused_dqn_peer_learns_what_its_work_is(tmp_path):
    """The single-file DQN runs its steps and learns from them: on CartPole its last
    episodes last longer than a random policy's (about 22 steps) after 100k env steps."""
    out = fused_dqn_peer.main(["--env", "CartPole-v1", "--total-steps", "100000"])
    assert out["env_steps"] == 100_000 and out["sps"] > 0
    assert out["final_return"] > 40, out
