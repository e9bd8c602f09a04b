"""The throughput and scaling benchmarks run end to end at tiny sizes (no timing asserts)."""

import math

from experiments import bench_scaling, bench_throughput


def test_bench_throughput_acer_and_reactor():
    tiny = ["--env", "CartPole-v1", "--iterations", "1", "--raw-steps", "20"]
    common = [*tiny, "--num-envs", "4"]
    out = bench_throughput.main(
        [*common, "--preset", "acer-classic", "--batch-sizes", "8", "--replay-ratios", "0", "2"]
    )
    assert [r["replay_ratio"] for r in out["rows"]] == [0.0, 2.0]
    for r in out["rows"]:
        assert r["train_sps"] > 0 and math.isfinite(r["train_over_ceiling"])
    # Without --num-envs the benchmark runs the preset's env count (reactor-classic: 8).
    reactor = ["--agent", "reactor", "--preset", "reactor-classic"]
    out = bench_throughput.main([*tiny, *reactor, "--rounds", "2"])
    assert out["num_envs"] == 8
    assert [r["mode"] for r in out["rows"]] == ["decoupled", "lock-step"]
    assert len(out["rows"][0]["ratio_rounds"]) == 2


def test_bench_scaling_one_and_two_devices():
    out = bench_scaling.main(
        ["--devices", "1", "2", "--num-envs", "4", "--batch-size", "4", "--updates", "2",
         "--iterations", "1", "--rounds", "1"]
    )  # fmt: skip
    assert [r["devices"] for r in out["rows"]] == [1, 2]
    assert out["rows"][0]["overhead"] == 1.0
