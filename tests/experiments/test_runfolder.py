"""Run-folder guards: the lock, the writability check, strict atomic JSON, and a
metrics.csv that survives resumes, new columns and kills mid-write."""

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.runfolder import (
    RunFolderLocked,
    RunLock,
    check_run_dir_writable,
    read_json,
    write_json_atomic,
)
from experiments.runlog import RunLogger

ROOT = Path(__file__).resolve().parents[2]

# The lock


_HOLDER = """
import sys, time
from experiments.runfolder import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(120)
"""


def _hold_in_subprocess(run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run_dir)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_process_is_refused_naming_the_holder_and_kill_9_frees_the_lock(tmp_path):
    run_dir = tmp_path / "run"
    holder = _hold_in_subprocess(run_dir)
    try:
        with pytest.raises(RunFolderLocked) as info:
            RunLock(run_dir).acquire()
        message = str(info.value)
        assert f"process {holder.pid}" in message and str(run_dir) in message
        assert "\n" not in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The stale lock file (with the dead PID in it) does not block the next run.
    assert (run_dir / ".lock").read_text().strip() == str(holder.pid)
    with RunLock(run_dir) as lock:
        assert lock.held
        assert (run_dir / ".lock").read_text().strip() == str(os.getpid())
    assert not lock.held


def test_lock_is_exclusive_within_a_process_and_released_on_exit(tmp_path):
    with RunLock(tmp_path / "run"):
        with pytest.raises(RunFolderLocked, match=f"process {os.getpid()}"):
            RunLock(tmp_path / "run").acquire()
    with RunLock(tmp_path / "run"):  # released by the `with` above
        pass
    lock = RunLock(tmp_path / "run").acquire()
    lock.close()
    lock.close()  # idempotent
    RunLock(tmp_path / "run").acquire().close()


def test_lock_is_released_when_an_exception_leaves_the_block(tmp_path):
    with pytest.raises(KeyError):
        with RunLock(tmp_path / "run"):
            raise KeyError("boom")
    RunLock(tmp_path / "run").acquire().close()


# Where a run folder may go


def test_writable_places_pass_and_nothing_is_created(tmp_path):
    check_run_dir_writable(tmp_path)  # exists
    check_run_dir_writable(tmp_path / "a" / "b" / "run")  # would be created
    assert list(tmp_path.iterdir()) == []


def test_run_dir_that_is_a_file_is_rejected(tmp_path):
    path = tmp_path / "run"
    path.write_text("not a folder")
    with pytest.raises(ValueError, match=re.escape(f"{path} exists and is not a folder")):
        check_run_dir_writable(path)
    with pytest.raises(ValueError, match=re.escape(f"run folder {path / 'sub'}: {path} is a")):
        check_run_dir_writable(path / "sub")


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux /proc")
def test_read_only_place_is_rejected_even_for_root():
    path = Path("/proc/reactor-jax-test/run")
    with pytest.raises(ValueError, match="cannot write run folder /proc/reactor-jax-test/run"):
        check_run_dir_writable(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_read_only_folder_is_rejected(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    with pytest.raises(ValueError, match="is not writable"):
        check_run_dir_writable(tmp_path / "ro" / "run")


# Strict JSON


def _strict_loads(text: str):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_become_null_at_any_depth(tmp_path):
    path = tmp_path / "summary.json"
    data = {
        "sps": math.nan,
        "best": math.inf,
        "worst": -math.inf,
        "np": np.float32("nan"),
        "np64": np.float64(1.5),
        "count": np.int64(3),
        "nested": {"list": [1.0, float("nan"), {"deep": -np.inf}], "tuple": (np.nan, 2)},
        "array": np.array([1.0, np.nan]),
    }
    write_json_atomic(path, data)
    loaded = _strict_loads(path.read_text())
    assert loaded == {
        "sps": None,
        "best": None,
        "worst": None,
        "np": None,
        "np64": 1.5,
        "count": 3,
        "nested": {"list": [1.0, None, {"deep": None}], "tuple": [None, 2]},
        "array": [1.0, None],
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temp left


def test_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "config.json"
    write_json_atomic(path, {"a": 1})
    os.chmod(path, 0o640)
    with pytest.raises(TypeError):
        write_json_atomic(path, {"a": object()})
    assert read_json(path, "config") == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
    write_json_atomic(path, {"a": 2})
    assert (path.stat().st_mode & 0o777) == 0o640  # replacing keeps the file's mode


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "is missing"),
        ('{"args": {', "is not valid JSON: .* at line 1 column 11"),
        ("[1, 2]", "holds a JSON array, expected an object"),
        ("", "is not valid JSON"),
    ],
)
def test_read_json_errors_are_one_line_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "config.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=f"^config {re.escape(str(path))} {problem}") as info:
        read_json(path, "config")
    assert "\n" not in str(info.value)


# metrics.csv


def _logger(run_dir, columns, start_step=0):
    return RunLogger(
        run_dir, columns, total_steps=1000, start_step=start_step, tensorboard=False,
        progress=False,
    )  # fmt: skip


def _read(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.reader(f))


def test_unknown_metric_raises_naming_it(tmp_path):
    logger = _logger(tmp_path, ["env_steps", "loss"])
    logger.log({"env_steps": 10, "loss": 1.0}, 10)
    with pytest.raises(ValueError, match="no column for 'kl_div'"):
        logger.log({"env_steps": 20, "loss": 0.5, "kl_div": 0.1}, 10)
    logger.close()
    assert _read(tmp_path) == [["env_steps", "loss"], ["10", "1.0"]]


def test_resume_with_new_columns_rewrites_with_the_union(tmp_path):
    logger = _logger(tmp_path, ["env_steps", "loss", "old_metric"])
    for step in (10, 20, 30):
        logger.log({"env_steps": step, "loss": step / 10, "old_metric": 7}, 10)
    logger.close()

    logger = _logger(tmp_path, ["env_steps", "loss", "new_metric"], start_step=20)
    assert logger.columns == ["env_steps", "loss", "new_metric", "old_metric"]
    logger.log({"env_steps": 30, "loss": 3.5, "new_metric": 0.25}, 10)
    logger.close()
    assert _read(tmp_path) == [
        ["env_steps", "loss", "new_metric", "old_metric"],
        ["10", "1.0", "", "7"],
        ["20", "2.0", "", "7"],
        ["30", "3.5", "0.25", ""],
    ]


def test_resume_drops_rows_past_the_step_and_a_half_written_last_line(tmp_path, capsys):
    logger = _logger(tmp_path, ["env_steps", "loss", "sps"])
    for step in (10, 20, 30):
        logger.log({"env_steps": step, "loss": 0.5, "sps": 100.0}, 10)
    logger.close()
    with open(tmp_path / "metrics.csv", "a", newline="") as f:
        f.write("40,0.2")  # kill -9 in the middle of a row: no sps, no newline

    logger = _logger(tmp_path, ["env_steps", "loss", "sps"], start_step=100)
    logger.log({"env_steps": 40, "loss": 0.25, "sps": 90.0}, 10)
    logger.close()
    rows = _read(tmp_path)
    assert [r[0] for r in rows] == ["env_steps", "10", "20", "30", "40"]
    assert rows[-1] == ["40", "0.25", "90.0"]
    assert "half-written last line" in capsys.readouterr().err

    logger = _logger(tmp_path, ["env_steps", "loss", "sps"], start_step=20)
    logger.close()
    assert [r[0] for r in _read(tmp_path)] == ["env_steps", "10", "20"]


def test_half_written_step_cell_is_not_read_as_a_smaller_step(tmp_path):
    (tmp_path / "metrics.csv").write_text("env_steps,loss\r\n100,0.5\r\n2")  # "200,..." cut
    logger = _logger(tmp_path, ["env_steps", "loss"], start_step=100)
    logger.log({"env_steps": 200, "loss": 0.4}, 100)
    logger.close()
    assert _read(tmp_path) == [["env_steps", "loss"], ["100", "0.5"], ["200", "0.4"]]


def test_malformed_rows_are_dropped_and_a_headerless_file_restarts(tmp_path):
    (tmp_path / "metrics.csv").write_text("env_steps,loss\r\n10,0.5\r\n\x00\x00\x00\r\n20\r\n")
    _logger(tmp_path, ["env_steps", "loss"], start_step=100).close()
    assert _read(tmp_path) == [["env_steps", "loss"], ["10", "0.5"]]
    (tmp_path / "metrics.csv").write_text("env_st")  # killed while writing the header
    logger = _logger(tmp_path, ["env_steps", "loss"], start_step=100)
    logger.log({"env_steps": 110, "loss": 0.1}, 10)
    logger.close()
    assert _read(tmp_path) == [["env_steps", "loss"], ["110", "0.1"]]
