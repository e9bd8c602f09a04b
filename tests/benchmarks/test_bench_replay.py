"""Smoke test of benchmarks.bench_replay: run `main` in-process at a tiny size."""

import json

import pytest

from benchmarks import bench_replay


def test_every_method_is_timed(tmp_path, capsys):
    out = tmp_path / "bench.json"
    args = bench_replay.Args(
        capacities=(100,), rounds=1, repeats=2, target_round_s=0.01, json_out=str(out)
    )
    report = bench_replay.main(args)
    methods = {e["method"] for e in report["results"]}
    assert methods == set(bench_replay.METHODS)
    assert all(e["us_median"] > 0 and len(e["us"]) == 1 for e in report["results"])
    assert json.loads(out.read_text())["results"]
    printed = capsys.readouterr().out
    assert "categorical / sum tree" in printed and "100" in printed


def test_args_are_validated():
    with pytest.raises(ValueError, match="--capacities"):
        bench_replay.Args(capacities=(10,))
    with pytest.raises(ValueError, match="--rounds"):
        bench_replay.Args(rounds=0)
