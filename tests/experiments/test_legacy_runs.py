"""Run folders written before the agent registry (a flat `args` block in config.json, the
old metrics columns, checkpoints without checksums) still evaluate, plot and resume.

tests/data/legacy_runs/ holds two tiny CartPole runs (ACER and Reactor, 20 env steps) made
with commit 0196e04, the last one before the change, and a PPO `--normalize-reward` run (32
env steps) made with 93616ea, the last one before the per-env returns of reward scaling
moved into the learner state."""

import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from experiments import evaluate, plot, train

pytestmark = pytest.mark.slow  # the slow tier (docs/tests.md)

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


def test_a_resume_whose_checkpoints_are_all_damaged_sets_the_old_logs_aside(tmp_path, capsys):
    """No checkpoint restores (all set aside as damaged): the run starts over, and the logs of
    the run it replaces are renamed, not truncated to step 0 (nothing the user saved is
    lost)."""
    run_dir = tmp_path / "acer"
    shutil.copytree(LEGACY / "acer", run_dir)
    old_metrics = (run_dir / "metrics.csv").read_text()
    old_summary = (run_dir / "summary.json").read_text()
    os.rename(run_dir / "checkpoints" / "20", run_dir / "checkpoints" / "damaged-20-1")
    summary = train.main(["--resume", str(run_dir), "--total-steps", "20", "--no-progress",
                          "--num-devices", "1", "--eval-episodes", "0"])  # fmt: skip
    assert summary["env_steps"] == 20
    err = capsys.readouterr().err
    assert "has no checkpoint to resume from: starting it over (its checkpoints were set " in err
    assert "set aside: summary.json.set-aside, metrics.csv.set-aside)" in err
    assert (run_dir / "metrics.csv.set-aside").read_text() == old_metrics
    assert (run_dir / "summary.json.set-aside").read_text() == old_summary
    with open(run_dir / "metrics.csv", newline="") as f:
        assert [int(r["env_steps"]) for r in csv.DictReader(f)] == [10, 20]
    assert (run_dir / "checkpoints" / "damaged-20-1").is_dir()


def test_evaluate_of_a_folder_posing_as_a_member_touches_nothing_outside_it(tmp_path):
    """A config.json that names a population member, in a folder that is not a population's
    member-<i>: one line, and no checkpoints/ folder created next to it."""
    run_dir = tmp_path / "parent" / "acer"
    shutil.copytree(LEGACY / "acer", run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    config["population"] = {"member": 0, "of": 2}
    config["args"]["num_seeds"] = 2
    (run_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit) as info:
        evaluate.main([str(run_dir), "--episodes", "1"])
    message = str(info.value)
    assert "names population member 0, but the folder is not member-0" in message, message
    assert "\n" not in message
    assert sorted(p.name for p in (tmp_path / "parent").iterdir()) == ["acer"]
