"""Run folders written before the agent registry (a flat `args` block in config.json, the
old metrics columns, checkpoints without checksums) still evaluate, plot and resume.

tests/data/legacy_runs/ holds two tiny CartPole runs (ACER and Reactor, 20 env steps) made
with commit 0196e04, the last one before the change, and a PPO `--normalize-reward` run (32
env steps) made with 93616ea, the last one before the per-env returns of reward scaling
moved into the learner state."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from experiments import evaluate, plot, train

pytestmark = pytest.mark.slow  # the slow tier (README: Tests)

LEGACY = Path(__file__).resolve().parents[1] / "data" / "legacy_runs"


@pytest.mark.parametrize("agent", ["acer", "reactor"])
def test_legacy_run_evaluates_plots_and_resumes(agent, tmp_path):
    run_dir = tmp_path / agent
    shutil.copytree(LEGACY / agent, run_dir)
    assert "args" in json.loads((run_dir / "config.json").read_text())  # the old layout

    result = evaluate.main([str(run_dir), "--episodes", "1"])
    assert result["checkpoint_step"] == 20 and result["episodes"] == 1

    png = plot.main([str(run_dir), "--out", str(tmp_path / "c.png")])
    assert Path(png).stat().st_size > 10_000
    if agent != "acer":
        return  # resuming compiles the whole agent: once is enough for the suite's time

    summary = train.main(["--resume", str(run_dir), "--total-steps", "40", "--no-progress",
                          "--num-devices", "1",
                          "--eval-episodes", "1"])  # fmt: skip
    assert summary["agent"] == agent and summary["env_steps"] == 40
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["env_steps"]) for r in rows] == [10, 20, 30, 40]
    assert "replay_updates" in rows[0]  # old columns are kept (union header)


def test_ppo_run_from_before_the_returns_were_learner_state_resumes(tmp_path):
    """Its checkpoint has no `learner/returns`: they restore as zeros (episode state; the
    resumed run starts new episodes), the return statistics as saved."""
    run_dir = tmp_path / "ppo"
    shutil.copytree(LEGACY / "ppo-normalize-reward", run_dir)
    result = evaluate.main([str(run_dir), "--episodes", "1"])
    assert result["checkpoint_step"] == 32
    summary = train.main(["--resume", str(run_dir), "--total-steps", "64", "--no-progress",
                          "--num-devices", "1",
                          "--eval-episodes", "0"])  # fmt: skip
    assert summary["env_steps"] == 64
