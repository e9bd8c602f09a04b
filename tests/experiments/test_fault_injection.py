"""Fault injection on a run folder: a training process killed (SIGKILL) at random moments,
each followed by `--resume`, damaged checkpoints, and a second writer.

One chain of processes on one CartPole run folder (they share a persistent compilation
cache, so only the first ones compile from scratch):

1. killed while it compiles, before any checkpoint;
2. killed as its first metrics row appears, still before the first checkpoint;
3. killed at seeded random moments: twice while a checkpoint is being written (as soon as
   `checkpoints/.staging` has an entry, plus 0-40 ms), right after a checkpoint is
   committed, after a random number of new metrics rows, or after a random delay. During
   one of them a second `--resume` is started: it must fail with one line naming the
   holder's PID;
4. the newest checkpoint's data file corrupted: the resume skips it and restores the one
   before;
5. every checkpoint corrupted: the resume fails with one line and sets them aside;
6. a last `--resume` starts the run over and runs to `--total-steps`.

After every kill each committed checkpoint verifies against its checksums. At the end
metrics.csv holds exactly one row per iteration, from the first to the last, env_steps
strictly increasing, and summary.json is strict JSON.
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.checkpoint import STAGING, Checkpointer
from tests.xla import subprocess_xla_flags

pytestmark = pytest.mark.slow  # the slow tier (docs/tests.md)

ROOT = Path(__file__).resolve().parents[2]
SEED = 20240611
STEPS_PER_ITERATION = 20  # 4 envs x 5 steps
EVERY = 60  # a checkpoint every 3 iterations: rows past the last one exist at most kills
TINY = [
    "--num-envs", "4", "--trace-len", "5", "--batch-size", "4", "--buffer-size", "400",
    "--checkpoint-every", str(EVERY), "--eval-episodes", "0", "--no-progress",
    "--iterations-per-sync", "1",
    "--log-every", "20",  # a metrics row per iteration (4 envs x 5 steps), as the checks count them
]  # fmt: skip
ENDLESS = "1000000"
# How long a process may take to reach a moment or to end before the test calls it hung: a
# guard against hangs only, generous because a loaded machine (the slow tier beside other
# jobs on 2 cores) can slow a compile several times over; nothing here is timed.
PATIENCE = 600.0


def _env(cache: Path) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env["XLA_FLAGS"] = subprocess_xla_flags()  # one device, as a plain command line gets
    env.update(
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1",
    )
    return env


class Chain:
    """Starts the training processes of one run folder and kills them."""

    def __init__(self, run_dir: Path, cache: Path, rng: random.Random):
        self.run_dir, self.env, self.rng = run_dir, _env(cache), rng
        self.ckpts = run_dir / "checkpoints"
        self.log: list[str] = []
        self.procs: list[subprocess.Popen] = []

    def start(self, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-m", "experiments.train", *args],
            cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def close(self):
        """Kill whatever it started that still runs (a test that failed half-way)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    def resume(self, total: str = ENDLESS) -> subprocess.Popen:
        return self.start("--resume", str(self.run_dir), "--total-steps", total)

    def steps(self) -> list[int]:
        if not self.ckpts.is_dir():
            return []
        return sorted(int(p.name) for p in self.ckpts.iterdir() if p.name.isdigit())

    def last_row_step(self) -> int:
        try:
            lines = (self.run_dir / "metrics.csv").read_text().split("\n")[1:-1]
        except FileNotFoundError:
            return -1
        try:
            return int(lines[-1].split(",", 1)[0]) if lines else -1
        except ValueError:
            return -1

    def wait(self, proc: subprocess.Popen, ready, what: str, timeout: float = PATIENCE):
        """Poll `ready()` every millisecond until it holds; the process must stay alive."""
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None:
                raise AssertionError(f"process ended (rc {proc.returncode}) before {what}:\n"
                                     f"{proc.stderr.read()}")  # fmt: skip
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.001)

    def finish(self, proc: subprocess.Popen, what: str) -> str:
        """Its stderr once it exits by itself; killed (no orphan left) if it runs past PATIENCE."""
        try:
            return proc.communicate(timeout=PATIENCE)[1]
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"timed out waiting for {what} to exit") from None

    def at_least(self, n: int) -> list[int]:
        """The checkpoint steps, after a resume killed once there are `n` if need be."""
        if len(self.steps()) < n:
            proc = self.resume()
            self.wait(proc, lambda: len(self.steps()) >= n, f"{n} checkpoints")
            self.kill(proc, f"{n} checkpoints")
        return self.steps()

    def kill(self, proc: subprocess.Popen, note: str) -> str:
        proc.send_signal(signal.SIGKILL)
        err = self.finish(proc, "a killed process")
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, err)
        self.log.append(f"{note}; checkpoints {self.steps()}")
        self.check_checkpoints()
        return err

    def check_checkpoints(self):
        """Every committed checkpoint verifies; partial writes stay in .staging."""
        if not self.ckpts.is_dir():
            return
        checkpointer = Checkpointer(self.ckpts)
        try:
            for step in checkpointer.steps():
                assert checkpointer.verify(step) is None, (step, checkpointer.verify(step))
        finally:
            checkpointer.close()
        names = {p.name for p in self.ckpts.iterdir()}
        assert all(n.isdigit() or n == STAGING or n.startswith("damaged-") for n in names), names


def _corrupt(checkpoint: Path):
    """Flip bytes in the middle of the largest data file of a checkpoint."""
    files = [p for p in (checkpoint / "state").rglob("*") if p.is_file()]
    data = max(files, key=lambda p: p.stat().st_size)
    raw = bytearray(data.read_bytes())
    for i in range(len(raw) // 2, min(len(raw), len(raw) // 2 + 8)):
        raw[i] ^= 0xFF
    data.write_bytes(bytes(raw))


def _has_entries(folder: Path) -> bool:
    try:
        return any(folder.iterdir())
    except OSError:  # not there (yet, or any more)
        return False


def _holds_lock(run_dir: Path, pid: int) -> bool:
    try:
        return (run_dir / ".lock").read_text().strip() == str(pid)
    except OSError:
        return False


def _kill_at_random_moment(chain: Chain, proc, kind: str, start_step: int) -> str:
    rng = chain.rng
    if kind == "staging":  # during a checkpoint write
        staging = chain.ckpts / STAGING
        chain.wait(proc, lambda: _has_entries(staging), "a .staging entry")
        delay = rng.uniform(0, 0.04)
        time.sleep(delay)
        return chain.kill(proc, f"staging+{1000 * delay:.0f}ms")
    if kind == "committed":  # right after a new checkpoint is committed
        chain.wait(proc, lambda: chain.steps() and chain.steps()[-1] > start_step, "a commit")
        return chain.kill(proc, "committed")
    if kind == "rows":  # (rows past the checkpoint of the killed process come first)
        rows = rng.randint(1, 5)
        target = max(start_step, chain.last_row_step()) + rows * STEPS_PER_ITERATION
        chain.wait(proc, lambda: chain.last_row_step() >= target, f"row {target}")
        return chain.kill(proc, f"row {target}")
    delay = rng.uniform(1.0, 5.0)  # "sleep": anywhere from start-up to training
    deadline = time.monotonic() + delay
    chain.wait(proc, lambda: time.monotonic() >= deadline, "the delay")
    return chain.kill(proc, f"after {delay:.1f}s")


@pytest.fixture
def chain(tmp_path):
    """The test's Chain; on teardown what it started and left running is killed, so that a
    failed assertion leaves no training process behind."""
    chain = Chain(tmp_path / "run", tmp_path / "jax-cache", random.Random(SEED))
    yield chain
    chain.close()


def test_kill_9_at_random_moments_damage_and_a_second_writer(chain):
    rng, run_dir = chain.rng, chain.run_dir
    t0 = time.monotonic()

    # 1. Killed while compiling: config.json is written, no checkpoint yet.
    proc = chain.start(*TINY, "--run-dir", str(run_dir), "--total-steps", ENDLESS)
    chain.wait(proc, (run_dir / "config.json").exists, "config.json")
    time.sleep(rng.uniform(0, 1.0))
    assert chain.steps() == [] and not (run_dir / "metrics.csv").exists()
    chain.kill(proc, "compiling")

    # 2. Killed at its first metrics row, before the first checkpoint.
    proc = chain.resume()
    chain.wait(proc, lambda: chain.last_row_step() >= STEPS_PER_ITERATION, "the first row")
    chain.kill(proc, "first row")  # two iterations before the first checkpoint is due

    # 3. Seeded random moments, two of them during a checkpoint write; a second writer
    # during one.
    kinds = ["staging", "staging", "committed", "rows", "sleep"]
    rng.shuffle(kinds)
    for i, kind in enumerate(kinds):
        start_step = chain.steps()[-1] if chain.steps() else 0
        proc = chain.resume()
        if i == 1:
            chain.wait(proc, lambda pid=proc.pid: _holds_lock(run_dir, pid), "the lock")
            second = chain.resume()
            err = chain.finish(second, "a second writer")
            lines = err.strip().splitlines()
            assert second.returncode == 1 and len(lines) == 1, err
            assert lines[0].startswith("error: ") and f"in use by process {proc.pid}" in lines[0]
        _kill_at_random_moment(chain, proc, kind, start_step)

    # 4. The newest checkpoint damaged: the resume skips it, sets it aside and restores the
    # one before; killed once it has committed a checkpoint past that one.
    steps = chain.at_least(2)
    _corrupt(chain.ckpts / str(steps[-1]))
    proc = chain.resume()
    aside, previous = chain.ckpts / f"damaged-{steps[-1]}-1", steps[-2]
    chain.wait(
        proc,
        lambda: aside.is_dir() and chain.steps() and chain.steps()[-1] > previous,
        "a checkpoint after the fallback",
    )
    err = chain.kill(proc, "after falling back")
    assert f"checkpoint {steps[-1]} skipped: " in err, err
    assert f"resumed {run_dir} from checkpoint at env step {previous}" in err, err

    # 5. Every checkpoint damaged: one error line (after one report per checkpoint set
    # aside), nothing trained; the next resume starts the run over.
    for step in chain.at_least(1):
        _corrupt(chain.ckpts / str(step))
    proc = chain.resume()
    err = chain.finish(proc, "a resume with every checkpoint damaged")
    *reports, last = err.strip().splitlines()
    assert proc.returncode == 1 and all(" skipped: " in r for r in reports), err
    assert last.startswith("error: no checkpoint in ") and "could be restored" in last, err
    assert chain.steps() == []

    # 6. The last resume runs to the end.
    final = (chain.steps()[-1] if chain.steps() else 0) + 3 * EVERY
    proc = chain.resume(str(final))
    err = chain.finish(proc, "the last resume")
    assert proc.returncode == 0, err
    assert "Traceback" not in err

    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    steps = [int(r["env_steps"]) for r in rows]
    assert steps == list(range(STEPS_PER_ITERATION, final + 1, STEPS_PER_ITERATION)), chain.log
    assert [int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1))
    summary = json.loads(
        (run_dir / "summary.json").read_text(),
        parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"non-strict JSON {c}")),
    )
    assert summary["env_steps"] == final and summary["stopped_by"] == "total_steps"
    assert summary["last_checkpoint"].endswith(f"/{final}")
    assert chain.steps()[-1] == final
    chain.check_checkpoints()
    assert len(chain.log) >= 8, chain.log
    print(f"{time.monotonic() - t0:.0f} s; kills: {chain.log}")
