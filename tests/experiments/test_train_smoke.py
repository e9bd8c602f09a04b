"""End-to-end subprocess runs of the CLI scripts with tiny sizes, checking what they write."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.xla import subprocess_xla_flags

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
ENV["XLA_FLAGS"] = subprocess_xla_flags()  # one device, fast compilation

SUMMARY_KEYS = {
    "agent",
    "env",
    "env_steps",
    "wall_s",
    "sps",
    "compile_s",
    "eval_return_mean",
    "eval_episodes",
    "replay_bytes_per_transition",
    "devices",
    "processes",
}


def run(module, *args, check=True, timeout=300):
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{module} {args} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


CARTPOLE = ["--num-envs", "4", "--trace-len", "5", "--batch-size", "4", "--buffer-size", "400"]


@pytest.mark.slow
def test_cartpole_train_resume_evaluate(tmp_path):
    run_dir = tmp_path / "cp"
    common = [*CARTPOLE, "--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "3",
              "--iterations-per-sync", "1"]  # fmt: skip
    run("experiments.train", *common, "--total-steps", "200", "--checkpoint-every", "100")
    for name in ("config.json", "metrics.csv", "summary.json"):
        assert (run_dir / name).exists(), name
    assert any((run_dir / "tb").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert SUMMARY_KEYS <= summary.keys()
    assert summary["env_steps"] == 200 and summary["eval_episodes"] == 3
    assert summary["replay_bytes_per_transition"] > 0
    assert sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir()) == [100, 200]
    first = rows(run_dir)
    assert [int(r["env_steps"]) for r in first] == list(range(20, 201, 20))

    # Without --resume an existing run is never overwritten.
    proc = run("experiments.train", *common, "--total-steps", "300", check=False)
    assert proc.returncode != 0 and "--resume" in proc.stderr

    run("experiments.train", "--resume", str(run_dir), "--total-steps", "300", "--no-progress")
    after = rows(run_dir)
    steps = [int(r["env_steps"]) for r in after]
    assert steps == list(range(20, 301, 20))  # continued at 220, no duplicates
    assert [r["updates"] for r in after[:10]] == [r["updates"] for r in first]
    assert int(after[10]["updates"]) > int(after[9]["updates"])  # counters restored
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 300

    proc = run(
        "experiments.evaluate", str(run_dir), "--episodes", "2", "--out", str(tmp_path / "e.json")
    )
    result = json.loads((tmp_path / "e.json").read_text())
    assert result["episodes"] == 2 and result["checkpoint_step"] == 300
    assert "return" in proc.stdout

    run("experiments.plot", str(run_dir), "--out", str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").stat().st_size > 10_000


@pytest.mark.slow
def test_pong_train_resume_evaluate(tmp_path):
    run_dir = tmp_path / "pong"
    args = [
        "--preset", "acer-atari", "--env", "Pong-v5", "--num-envs", "2", "--trace-len", "4",
        "--batch-size", "2", "--buffer-size", "64", "--microbatch-traces", "1",
        "--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "1",
        "--checkpoint-every", "16",
    ]  # fmt: skip
    run("experiments.train", *args, "--total-steps", "24", timeout=600)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "Pong-v5" and summary["env_steps"] == 24
    assert summary["replay_bytes_per_transition"] < 28_224 / 3  # frames stored once
    assert json.loads((run_dir / "config.json").read_text())["run"]["preset"] == "acer-atari"
    assert int(rows(run_dir)[-1]["frames"]) == 4 * 24
    run("experiments.train", "--resume", str(run_dir), "--total-steps", "32", "--no-progress")
    assert int(rows(run_dir)[-1]["env_steps"]) == 32
    proc = run("experiments.evaluate", str(run_dir), "--episodes", "1", timeout=600)
    assert "Pong-v5 @ step 32" in proc.stdout


def _stopped_cleanly(run_dir, reason):
    """A run that stopped early still checkpointed its last step, logged it, and evaluated."""
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == reason
    steps = summary["env_steps"]
    assert 0 < steps < 100_000_000 and summary["eval_episodes"] == 3
    assert int(rows(run_dir)[-1]["env_steps"]) == steps
    assert max(int(p.name) for p in (run_dir / "checkpoints").iterdir()) == steps
    assert summary["last_checkpoint"].endswith(f"/{steps}")
    return steps


@pytest.mark.slow
def test_max_minutes_stops_cleanly_and_the_run_resumes(tmp_path):
    run_dir = tmp_path / "timed"
    out = run(
        "experiments.train", *CARTPOLE, "--run-dir", str(run_dir), "--no-progress",
        "--eval-episodes", "3", "--total-steps", "100000000", "--checkpoint-every", "10000000",
        "--max-minutes", "0.05",
    )  # fmt: skip
    steps = _stopped_cleanly(run_dir, "max_minutes=0.05")
    assert "stopped early: max_minutes=0.05" in out.stdout
    # The limit belongs to one invocation: the resumed run goes on to --total-steps.
    run(
        "experiments.train", "--resume", str(run_dir), "--no-progress",
        "--total-steps", str(steps + 40),
    )  # fmt: skip
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by"] == "total_steps" and summary["env_steps"] == steps + 40


def test_resume_does_not_carry_the_time_limit_over():
    """--max-minutes limits one invocation: a run saved with it resumes without it (on to
    --total-steps) unless it is given again. (The slow test above cannot tell: its resumed
    run is short enough to finish within the old limit too.)"""
    from engine.args import parse_train_args, resume_args

    saved = parse_train_args(["--agent", "acer", "--max-minutes", "40", "--total-steps", "900"])
    assert saved.run.max_minutes == 40
    again = resume_args(["--resume", "somewhere"], saved)
    assert again.run.max_minutes is None and again.run.total_steps == 900
    again = resume_args(["--resume", "somewhere", "--max-minutes", "5"], saved)
    assert again.run.max_minutes == 5


@pytest.mark.slow
def test_sigterm_stops_after_the_iteration_and_keeps_everything(tmp_path):
    run_dir = tmp_path / "term"
    cmd = [
        sys.executable, "-m", "experiments.train", *CARTPOLE, "--run-dir", str(run_dir),
        "--total-steps", "100000000", "--checkpoint-every", "10000000", "--no-progress",
        "--eval-episodes", "3",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if (run_dir / "metrics.csv").exists() and len(rows(run_dir)) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err.decode()
    assert b"SIGTERM: stopping after this sync" in err
    _stopped_cleanly(run_dir, "SIGTERM")


@pytest.mark.slow
def test_non_finite_loss_stops_run_and_keeps_checkpoint(tmp_path):
    run_dir = tmp_path / "nan"
    proc = run(
        "experiments.train", *CARTPOLE, "--run-dir", str(run_dir), "--total-steps", "4000",
        "--checkpoint-every", "20", "--lr", "1e30", "--max-grad-norm", "1e30", "--no-progress",
        check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    message = proc.stderr.strip().splitlines()[-1]
    assert message.startswith("error: non-finite ") and "iteration" in message
    assert "Traceback" not in proc.stderr
    assert not (run_dir / "summary.json").exists()
    # The first iteration's update is still finite (its loss is computed before the huge
    # step) and checkpointed every 20 steps; the blow-up comes after, so a checkpoint is kept.
    kept = Path(message.split("last good checkpoint: ")[1])
    assert kept.name.isdigit() and kept.exists()


def test_help_lists_every_flag():
    out = run("experiments.train", "--help").stdout
    for flag in (
        "--agent", "--env", "--total-steps", "--seed", "--num-envs", "--run-dir", "--preset",
        "--trace-len", "--batch-size", "--replay-ratio", "--buffer-size", "--start-train-at",
        "--discount", "--c", "--trust-region", "--trust-region-delta", "--tau", "--lr",
        "--reward-clip", "--entropy-weight", "--max-grad-norm", "--exp-name", "--debug",
        "--resume",
    ):  # fmt: skip
        assert flag in out, flag
