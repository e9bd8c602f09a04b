"""How many iterations the runner runs per `train_chunk` call (engine/runner.py,
`SyncPace`), and that the metrics rows do not depend on it (`TrainLoop.record`): rows every
`log_every` iterations and where the runner flushes, whatever the chunks, for host-driven runs
as for chunked ones."""

from __future__ import annotations

import csv
import math
import types

import jax
import numpy as np
import pytest
from jax.experimental import multihost_utils

from engine.protocol import ChunkOutput
from engine.runner import SyncPace, TrainLoop
from experiments import train


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


def test_a_host_driven_runs_rows_and_checkpoints_do_not_depend_on_its_syncs(tmp_path):
    """PPO with --update-loop dispatch (the host drives each iteration of 16 env steps) at 1
    and at 2 iterations per sync: rows every --log-every 32 env steps (2 iterations) and at
    each checkpoint (every 48) and the end, the same rows either way but for their timing
    columns, with each row's learner updates since the last one (4 an iteration)."""
    rows = {}
    for sync in (1, 2):
        run_dir = tmp_path / f"sync-{sync}"
        summary = train.main(
            ["--agent", "ppo", "--update-loop", "dispatch", "--num-envs", "2", "--trace-len",
             "8", "--num-minibatches", "2", "--epochs", "2", "--hidden", "16", "--total-steps",
             "128", "--checkpoint-every", "48", "--iterations-per-sync", str(sync),
             "--log-every", "32", "--eval-episodes", "0", "--num-devices", "1", "--no-progress",
             "--run-dir", str(run_dir)]
        )  # fmt: skip
        assert summary["env_steps"] == 128
        with open(run_dir / "metrics.csv", newline="") as f:
            rows[sync] = [
                {k: v for k, v in r.items() if k not in ("sps", "wall_s")}
                for r in csv.DictReader(f)
            ]
        assert sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir()) == [48, 96, 128]
    assert [int(r["env_steps"]) for r in rows[2]] == [32, 48, 64, 96, 128]
    assert [int(r["iteration"]) for r in rows[2]] == [2, 3, 4, 6, 8]
    assert [int(r["iteration_updates"]) for r in rows[2]] == [8, 4, 4, 8, 8]
    assert rows[1] == rows[2]


def _outputs(n: int, seed: int = 0) -> ChunkOutput:
    """n iterations' host output (T = 3 steps, B = 2 envs) with random metrics, update counts
    and finished episodes."""
    rng = np.random.default_rng(seed)
    over = rng.random((n, 3, 2)) < 0.3
    return ChunkOutput(
        {"loss": rng.normal(size=n).astype(np.float32) * 1e3,
         "q": rng.normal(size=n).astype(np.float32)},
        rng.integers(0, 4, n).astype(np.int32),
        np.where(over, rng.normal(size=over.shape) * 100, 0.0).astype(np.float32),
        np.where(over, rng.integers(1, 50, over.shape), 0).astype(np.int32), over,
    )  # fmt: skip


def _rows(chunks: list[int], log_every: int, flush_at=()) -> list[dict]:
    agent = types.SimpleNamespace(
        metric_names=("loss", "q"), steps_per_iteration=6,
        env=types.SimpleNamespace(spec=types.SimpleNamespace(is_atari=False)),
    )  # fmt: skip
    loop, out, rows, start = (
        TrainLoop(agent, None, return_window=5, log_every=log_every),
        _outputs(sum(chunks)),
        [],
        0,
    )
    for count in chunks:
        part = ChunkOutput(
            *(jax.tree.map(lambda x, a=start, b=start + count: x[a:b], f) for f in out)
        )
        rows += loop.record(part, count, dt=0.01 * count)
        start += count
        if start in flush_at:
            rows += [r for r in [loop.flush()] if r is not None]
    # as metrics.csv writes them (a NaN equals a NaN there), less the timing columns
    return [{k: repr(v) for k, v in r.items() if k not in ("sps", "wall_s")} for r in rows]


@pytest.mark.parametrize("log_every", [1, 3, 7])
def test_rows_do_not_depend_on_how_the_iterations_were_synced(log_every):
    """20 iterations in chunks of 1, of 5 or of 10, or 1, 6, 3, 10 (chunks never pass a
    checkpoint): the same rows, bit for bit (metric means summed exactly, not chunk by chunk),
    at multiples of `log_every` and where the runner flushes (a checkpoint at iteration 10,
    the end at 20)."""
    runs = [
        _rows(c, log_every, flush_at=(10, 20)) for c in ([1] * 20, [5] * 4, [10, 10], [1, 6, 3, 10])
    ]
    assert all(r == runs[0] for r in runs[1:])
    expected = sorted({*range(log_every, 21, log_every), 10, 20})
    assert [int(r["iteration"]) for r in runs[0]] == expected
    assert [int(r["env_steps"]) for r in runs[0]] == [6 * i for i in expected]
    # each row's means are over the updates since the row before it, its returns a window of 5
    out, last = _outputs(20), 0
    for row in runs[0]:
        i = int(row["iteration"])
        updates = int(out.updates[last:i].sum())
        assert int(row["iteration_updates"]) == updates
        if updates:
            assert float(row["loss"]) == pytest.approx(
                float(np.sum(out.metric_sums["loss"][last:i], dtype=np.float64)) / updates
            )
        finished = out.finished_return[:i][out.game_over[:i]]
        assert float(row["return_mean"]) == pytest.approx(
            float(np.mean(finished[-5:])) if finished.size else math.nan, nan_ok=True
        )
        last = i
