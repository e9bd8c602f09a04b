"""Smoke test of benchmarks.bench_losses: run `main` in-process at tiny sizes.

It runs the benchmark three times, once per setup it must handle (rlax compared with every
loss timed; the distributional Retrace skipped above `--max-dist-batch`; rlax missing, with a
hint printed and no ratios): one run cannot show all three. Only the first compiles; the
other two reuse its programs and take about 0.1 s each (measured 9.7 / 0.13 / 0.10 s), so
sharing a run would save nothing (issue 67: a variant serving two of them from one run at
two batch sizes took 21.2 s against 17.8 s)."""

import importlib.util
import json
import sys

import pytest

from benchmarks import bench_losses

# Written out here (not taken from the module) so that dropping a loss from the script fails.
EXPECTED = {
    "retrace_targets",
    "acer_value_loss",
    "acer_policy_loss",
    "trust_region_policy_loss",
    "categorical_projection",
    "distributional_retrace_targets",
    "beta_loo_policy_loss",
    "vtrace",
    "lambda_returns",
    "n_step_returns",
    "gae",
    "entropy",
}
RLAX_COMPARED = {"retrace_targets", "vtrace", "lambda_returns", "categorical_projection"}
HAVE_RLAX = importlib.util.find_spec("rlax") is not None


def tiny(**kwargs):
    return bench_losses.Args(batch_sizes=(2,), repeats=2, rounds=1, num_atoms=5, **kwargs)


def test_every_loss_is_timed(tmp_path, capsys):
    out = tmp_path / "bench.json"
    report = bench_losses.main(tiny(json_out=str(out)))

    names = {e["name"] for e in report["results"]}
    assert names >= EXPECTED
    assert {n for n in names if n.startswith("grad ")}
    for e in report["results"]:
        assert e["batch_size"] == 2
        assert e["us_median"] > 0
        assert 1 <= e["calls_per_round"] <= 2
        assert len(e["us_rounds"]) == 1
    if HAVE_RLAX:
        assert {e["name"] for e in report["rlax"]} == RLAX_COMPARED
        for e in report["rlax"]:
            assert e["ratio"] > 0 and e["ratio_median"] > 0
            assert e["max_abs_diff"] < 1e-4
    assert json.loads(out.read_text())["results"] == report["results"]
    printed = capsys.readouterr().out
    assert "jax" in printed and "B=2" in printed


def test_dist_retrace_skipped_above_max_dist_batch(capsys):
    report = bench_losses.main(tiny(compare_rlax=False, max_dist_batch=1))
    names = {e["name"] for e in report["results"]}
    assert names == EXPECTED - {"distributional_retrace_targets"} | set(bench_losses.GRAD_NAMES)
    assert report["rlax"] == []
    assert "skipped" in capsys.readouterr().out


def test_without_rlax_prints_hint_and_skips_ratios(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "rlax", None)  # makes `import rlax` raise ImportError
    report = bench_losses.main(tiny())
    assert report["rlax"] == []
    assert {e["name"] for e in report["results"]} >= EXPECTED
    out = capsys.readouterr().out
    assert "rlax not installed: pip install rlax==0.1.9 to compare" in out
    assert "ours/rlax" not in out


def test_args_are_checked():
    with pytest.raises(ValueError, match="--batch-sizes"):
        bench_losses.Args(batch_sizes=(0,))
    with pytest.raises(ValueError, match="--num-atoms"):
        bench_losses.Args(num_atoms=1)
