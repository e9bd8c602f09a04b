"""How many iterations the runner runs per `train_chunk` call (experiments/runner.py,
`SyncPace`), and that host-driven runs log one metrics row per call as chunked ones do."""

from __future__ import annotations

import csv

import jax
import pytest
from jax.experimental import multihost_utils

from experiments import train
from experiments.runner import SyncPace


def test_the_pace_grows_toward_a_sync_a_second_within_its_limits():
    pace = SyncPace(max_chunk=100)
    assert pace.count(limit=50) == 1  # it starts at one iteration per sync
    pace.observe(1, 0.01)  # 100 a second wanted, at most 4x the last count
    assert pace.count(limit=50) == 4
    pace.observe(4, 0.02)  # 200 a second: capped by max_chunk, then by the limit
    assert pace.count(limit=500) == 16 and pace.count(limit=3) == 3
    pace.observe(16, 8.0)  # 2 a second
    assert pace.count(limit=50) == 2
    assert pace.count(limit=0) == 1  # a boundary already reached: one iteration
    fixed = SyncPace(max_chunk=100, fixed=7)
    fixed.observe(1, 0.001)
    assert fixed.count(limit=50) == 7 and fixed.count(limit=5) == 5


@pytest.mark.parametrize("fixed", [0, 3])
def test_every_process_of_a_multi_process_run_takes_process_0s_pace(monkeypatch, fixed):
    """Each process times its own syncs; their stop checks are collectives, so all must run
    the same counts: process 0's plan (or its flag) is broadcast, also when fixed (a flag
    given to one process only would otherwise leave the others waiting in the broadcast)."""
    sent = []

    def broadcast(value):
        sent.append(int(value))
        return 9  # what process 0 planned

    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(multihost_utils, "broadcast_one_to_all", broadcast)
    pace = SyncPace(max_chunk=100, fixed=fixed)
    assert pace.count(limit=50) == 9 and pace.count(limit=4) == 4
    assert sent == [fixed or 1] * 2


def test_a_host_driven_run_logs_a_row_per_sync_and_keeps_its_checkpoints(tmp_path):
    """PPO with --update-loop dispatch (the host drives each iteration) at 2 iterations per
    sync: a row per 2 iterations of 16 env steps, cut at each checkpoint (every 3) and at the
    end, and the learner's update count of every iteration."""
    run_dir = tmp_path / "run"
    summary = train.main(
        ["--agent", "ppo", "--update-loop", "dispatch", "--num-envs", "2", "--trace-len", "8",
         "--num-minibatches", "2", "--epochs", "2", "--hidden", "16", "--total-steps", "128",
         "--checkpoint-every", "48", "--iterations-per-sync", "2", "--eval-episodes", "0",
         "--num-devices", "1", "--no-progress", "--run-dir", str(run_dir)]
    )  # fmt: skip
    assert summary["env_steps"] == 128
    rows = list(csv.DictReader(open(run_dir / "metrics.csv")))
    assert [int(r["env_steps"]) for r in rows] == [32, 48, 80, 96, 128]
    assert [int(r["iteration"]) for r in rows] == [2, 3, 5, 6, 8]
    assert [int(r["iteration_updates"]) for r in rows] == [8, 4, 8, 4, 8]  # 2 x 2 each
    assert sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir()) == [48, 96, 128]
