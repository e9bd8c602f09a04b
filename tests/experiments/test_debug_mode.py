"""`--debug` trains with run-time data checks in every loss (on one device and sharded)."""

import json

import jax
import pytest

from engine import programs
from experiments import train

TINY = ["--num-envs", "4", "--trace-len", "5", "--batch-size", "4", "--buffer-size", "400",
        "--total-steps", "60", "--eval-episodes", "1", "--no-progress", "--debug"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("devices", ["1", "2"])  # one device: would be chunked without --debug
def test_debug_run_checks_data_and_finishes(tmp_path, devices, monkeypatch):
    called = []
    real = programs.Program.__call__

    def spy(self, *args):
        called.append(self.checks)
        return real(self, *args)

    monkeypatch.setattr(programs.Program, "__call__", spy)
    run_dir = tmp_path / "dbg"
    summary = train.main([*TINY, "--num-devices", devices, "--run-dir", str(run_dir)])
    assert summary["env_steps"] == 60 and summary["devices"] == int(devices)
    # the run's iterations went through checked programs (the chunk program has no checks)
    assert len(called) >= 60 // (4 * 5) and all(called)
    assert not (run_dir / "tb").exists()
    assert json.loads((run_dir / "config.json").read_text())["run"]["debug"] is True
    assert programs._DATA_CHECKS == [False]  # switched off again after the run
    assert not jax.config.jax_debug_nans


def test_debug_ppo_dispatching_each_minibatch_finishes(tmp_path):
    """`--update-loop dispatch`: PPO's prepare program, checked, returns (error, output);
    compiling the minibatch program from its output shape must see through that."""
    argv = ["--agent", "ppo", "--update-loop", "dispatch", "--num-envs", "4", "--trace-len",
            "8", "--total-steps", "64", "--eval-episodes", "0", "--no-progress", "--debug",
            "--num-devices", "1", "--run-dir", str(tmp_path / "dbg")]  # fmt: skip
    assert train.main(argv)["env_steps"] == 64


def test_debug_switches_are_reset_when_the_build_fails(tmp_path):
    """`--debug` turns on process-wide switches (data checks, `jax_debug_nans`); a run that
    fails while it is built (here a discrete-only agent on a continuous env) leaves them as
    they were, for whatever the process runs next."""
    argv = ["--agent", "dqn", "--env", "Pendulum-v1", "--debug", "--no-progress",
            "--run-dir", str(tmp_path / "dbg")]  # fmt: skip
    with pytest.raises(SystemExit):
        train.main(argv)
    assert programs._DATA_CHECKS == [False]
    assert not jax.config.jax_debug_nans
