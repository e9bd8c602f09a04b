"""Run-folder guards: the lock, the writability check, strict atomic JSON, a metrics.csv
that survives resumes, new columns and kills mid-write, writes that never leave the run
folder or go through a link, and a full disk reported in one line."""

import csv
import errno
import json
import logging
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.runfolder import (
    RunFolderLocked,
    RunLock,
    UnsafePathError,
    WriteError,
    atomic_file,
    atomic_path,
    check_run_dir_writable,
    check_run_folder_links,
    held_thread_output,
    open_append,
    read_json,
    storage_errno,
    write_json_atomic,
)
from engine.runlog import LineageLog, RunLogger, TensorBoardScalars
from experiments import evaluate
from tests.xla import subprocess_xla_flags

ROOT = Path(__file__).resolve().parents[2]

# The lock


_HOLDER = """
import sys, time
from engine.runfolder import RunLock
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


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "deep", "long-number"])
def test_read_json_of_what_is_not_a_small_json_file_is_one_line(tmp_path, kind):
    """A FIFO (reading it would block for ever), a device (/dev/zero never ends), a folder,
    and JSON the parser cannot take (nested too deep, a number too long): one line each."""
    path = tmp_path / "config.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.symlink("/dev/zero", path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        path.write_text('{"seed": ' + "9" * 5000 + "}")
    with pytest.raises(ValueError, match=f"^config {re.escape(str(path))} cannot be read") as info:
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
    # what it held is set aside, not deleted (it may be a file of old-Mac line ends)
    assert (tmp_path / "metrics.csv.set-aside").read_text() == "env_st"
    (tmp_path / "metrics.csv").write_text("env_steps,loss\r10,0.5\r")
    _logger(tmp_path, ["env_steps", "loss"], start_step=100).close()
    assert (tmp_path / "metrics.csv.set-aside-1").read_bytes() == b"env_steps,loss\r10,0.5\r"


def test_a_metrics_file_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    """Resuming onto a metrics.csv that is not text (or whose header is not CSV): a one-line
    ValueError naming the file, nothing rewritten; a row csv cannot take (a field over its
    size limit) is dropped as malformed."""
    (tmp_path / "metrics.csv").write_bytes(b"\x00\xff garbage\n10,1\n")
    with pytest.raises(ValueError, match=r"metrics\.csv cannot be read: 'utf-8' codec") as info:
        _logger(tmp_path, ["env_steps", "loss"], start_step=100)
    assert "\n" not in str(info.value)
    assert (tmp_path / "metrics.csv").read_bytes() == b"\x00\xff garbage\n10,1\n"
    (tmp_path / "metrics.csv").write_text(f"env_steps,loss\n10,0.5\n20,{'9' * 200_000}\n30,0.3\n")
    _logger(tmp_path, ["env_steps", "loss"], start_step=100).close()
    assert _read(tmp_path) == [["env_steps", "loss"], ["10", "0.5"], ["30", "0.3"]]


@pytest.mark.parametrize(
    "name, kind",
    [("metrics.csv", "folder"), ("summary.json", "folder"), (".lock", "folder"),
     ("tb", "file"), ("checkpoints", "file"), ("member-0/config.json", "folder")],
)  # fmt: skip
def test_a_run_file_or_folder_of_the_wrong_kind_is_refused_before_a_run(tmp_path, name, kind):
    """A folder where a file of the run belongs, or a file where its folder does: one line
    before the run builds anything (not an OSError half-way through the run)."""
    run = tmp_path / "run"
    (run / "member-0").mkdir(parents=True)
    if kind == "folder":
        (run / name).mkdir()
    else:
        (run / name).write_text("x")
    wanted = "a file" if kind == "folder" else "a folder"
    with pytest.raises(ValueError, match=rf"{re.escape(name)} exists and is not {wanted}"):
        check_run_folder_links(run)


# Writes stay in the run folder and never go through a link


def _outside(tmp_path) -> Path:
    path = tmp_path / "precious.txt"
    path.write_text("keep me")
    return path


def test_every_writer_refuses_a_link_in_one_line_and_leaves_its_target(tmp_path):
    outside = _outside(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    link = run / "summary.json"
    os.symlink(outside, link)
    writers = {
        "write_json_atomic": lambda: write_json_atomic(link, {"a": 1}),
        "atomic_file": lambda: atomic_file(link).__enter__(),
        "atomic_path": lambda: atomic_path(link, run).__enter__(),
        "open_append": lambda: open_append(link),
        "RunLock": lambda: RunLock(_linked(run, ".lock", outside)).acquire(),
        "metrics.csv": lambda: _logger(_linked(run, "metrics.csv", outside), ["env_steps"]),
        "lineage.csv": lambda: LineageLog(_linked(run, "lineage.csv", outside), ["env_steps"]),
    }
    for name, write in writers.items():
        with pytest.raises(UnsafePathError) as info:
            write()
        message = str(info.value)
        assert message.startswith("refusing to write "), name
        assert "symbolic link" in message and "for safety" in message and "\n" not in message
        assert outside.read_text() == "keep me", name
    assert not [p for p in run.iterdir() if ".tmp" in p.name]  # no temporary file left


def test_files_written_in_place_refuse_a_hard_link_and_leave_its_other_name(tmp_path):
    """metrics.csv and lineage.csv are appended to and .lock gets the holder's PID: a hard
    link to a file outside the run would be changed through them. Refused in one line, by
    the writers and by the check before a run starts; files replaced by a rename are not
    concerned (the other name keeps the old contents)."""
    run = tmp_path / "run"
    (run / "member-0").mkdir(parents=True)
    for rel in ("metrics.csv", "lineage.csv", ".lock", "member-0/metrics.csv"):
        outside = tmp_path / ("outside-" + rel.replace("/", "-"))
        outside.write_text("keep me")
        os.link(outside, run / rel)
        with pytest.raises(UnsafePathError) as info:
            check_run_folder_links(run)
        assert "hard links" in str(info.value) and "\n" not in str(info.value)
        with pytest.raises(UnsafePathError, match=r"hard links"):
            if rel == ".lock":
                RunLock(run).acquire()
            else:
                open_append(run / rel)
        assert outside.read_text() == "keep me"
        os.unlink(run / rel)
    check_run_folder_links(run)
    os.link(tmp_path / "outside-metrics.csv", run / "summary.json")
    write_json_atomic(run / "summary.json", {"a": 1}, run_dir=run)  # a rename: no harm
    assert (tmp_path / "outside-metrics.csv").read_text() == "keep me"


def _linked(run: Path, name: str, target: Path) -> Path:
    """`run` with `name` a link to `target`."""
    if not (run / name).is_symlink():
        os.symlink(target, run / name)
    return run


def test_atomic_path_replaces_in_place_and_keeps_a_libraries_suffix(tmp_path):
    target = tmp_path / "curves.png"
    target.write_bytes(b"old")
    with atomic_path(target, tmp_path) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".png" and tmp != target
        tmp.write_bytes(b"new")
        assert target.read_bytes() == b"old"  # replaced only when the block ends
    assert target.read_bytes() == b"new"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("the library failed")
    assert target.read_bytes() == b"new" and sorted(tmp_path.iterdir()) == [target]


def test_folders_that_lead_outside_the_run_are_refused_and_links_inside_it_are_not(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    run = tmp_path / "run"
    (run / "real").mkdir(parents=True)
    os.symlink(outside, run / "videos")
    os.symlink(run / "real", run / "inside")
    with pytest.raises(UnsafePathError) as info:
        write_json_atomic(run / "videos" / "eval.json", {}, run_dir=run)
    assert str(info.value).startswith(f"refusing to write in {run / 'videos'}: it leads to")
    assert "outside the run folder" in str(info.value) and "\n" not in str(info.value)
    write_json_atomic(run / "inside" / "x.json", {"a": 1}, run_dir=run)
    assert read_json(run / "real" / "x.json") == {"a": 1} and not any(outside.iterdir())
    # The run folder itself may be a link (run folders kept on another disk).
    os.symlink(run, tmp_path / "alias")
    write_json_atomic(tmp_path / "alias" / "y.json", {"b": 2}, run_dir=tmp_path / "alias")
    assert read_json(run / "y.json") == {"b": 2}


def test_tensorboard_folder_linked_outside_is_refused_before_writing(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(outside, run / "tb")
    with pytest.raises(UnsafePathError, match=r"it leads to .*outside the run folder"):
        RunLogger(run, ["env_steps"], total_steps=10, progress=False)
    assert not any(outside.iterdir())


def test_run_folder_links_are_refused_before_a_run_starts(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    check_run_folder_links(run)  # a new run folder passes, as does a missing one
    check_run_folder_links(tmp_path / "missing")
    cases = {
        "checkpoints": "checkpoints: it is a symbolic link",
        "tb": "tb: it leads to",
        "member-0": "member-0: it leads to",
        "config.json": "config.json: it is a symbolic link",
    }
    for name, problem in cases.items():
        os.symlink(outside, run / name)
        with pytest.raises(UnsafePathError, match=re.escape(problem)):
            check_run_folder_links(run)
        os.unlink(run / name)
    (run / "member-1").mkdir()
    os.symlink(outside / "m.csv", run / "member-1" / "metrics.csv")
    with pytest.raises(UnsafePathError, match=r"member-1/metrics\.csv: it is a symbolic link"):
        check_run_folder_links(run)


def test_evaluate_refuses_a_videos_folder_linked_outside_before_building(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "legacy_runs" / "acer", run)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, run / "videos")
    with pytest.raises(SystemExit) as info:
        evaluate.main([str(run), "--episodes", "1", "--video", "--video-format", "gif"])
    message = str(info.value)
    assert message.startswith(f"error: refusing to write in {run / 'videos'}: it leads to")
    assert "\n" not in message and not any(outside.iterdir())


def _events(path: Path) -> list:
    """The Event protos of a TensorBoard file, each record's framing and CRCs checked."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import masked_crc32c

    data, events, i = path.read_bytes(), [], 0
    while i < len(data):
        header = data[i : i + 8]
        (size,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[i + 8 : i + 12])[0] == masked_crc32c(header)
        body = data[i + 12 : i + 12 + size]
        assert struct.unpack("<I", data[i + 12 + size : i + 16 + size])[0] == masked_crc32c(body)
        events.append(Event.FromString(body))
        i += 16 + size
    return events


def _content(events) -> list:
    out = []
    for e in events:
        if e.HasField("session_log"):
            out.append(("session_log", e.step, e.session_log.status))
        out += [(v.tag, e.step, v.simple_value) for v in e.summary.value]
    return out


def test_tensorboard_scalars_read_back_as_tensorboardx_writes_them(tmp_path):
    """The same rows through tensorboardX's SummaryWriter and through TensorBoardScalars
    give the same events: scalars, steps, and the purge marker of a resume."""
    from tensorboardX import SummaryWriter

    rows = [
        {"env_steps": 30, "loss": 0.5, "return_mean": math.nan, "sps": 120},
        {"env_steps": 40, "loss": 0.25, "return_mean": 9.5, "sps": 130},
    ]
    theirs = SummaryWriter(str(tmp_path / "theirs"), purge_step=20)
    for row in rows:
        for key, value in row.items():
            if key != "env_steps" and math.isfinite(value):
                theirs.add_scalar(key, value, row["env_steps"])
    theirs.close()
    ours = TensorBoardScalars(tmp_path / "ours", tmp_path, purge_step=20)
    for row in rows:
        ours.write(row, row["env_steps"])
    ours.close()
    (their_file,) = (tmp_path / "theirs").iterdir()
    (our_file,) = (tmp_path / "ours").iterdir()
    assert "tfevents" in our_file.name
    expected = _content(_events(their_file))
    assert ("session_log", 20, 1) in expected and ("loss", 40, 0.25) in expected
    assert _content(_events(our_file)) == expected
    assert _events(our_file)[0].file_version == "brain.Event:2"


# A full disk


def test_storage_errors_are_recognised_whatever_carries_them():
    assert storage_errno(OSError(errno.ENOSPC, "No space left on device")) == errno.ENOSPC
    assert storage_errno(OSError(errno.EDQUOT, "Disk quota exceeded")) == errno.EDQUOT
    assert storage_errno(OSError(errno.EROFS, "Read-only file system")) == errno.EROFS
    assert storage_errno(OSError(errno.EACCES, "Permission denied")) is None
    tensorstore = "RESOURCE_EXHAUSTED: Error writing ...: No space left [os_error_code='28']"
    assert storage_errno(ValueError(tensorstore)) == errno.ENOSPC
    assert storage_errno(ValueError("NOT_FOUND: ... [os_error_code='2']")) is None
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as err:
            raise RuntimeError("write failed") from err
    except RuntimeError as err:
        assert storage_errno(err) == errno.EDQUOT
    message = str(WriteError.of(OSError(errno.ENOSPC, "No space left on device"), "run/x.csv"))
    assert message == "cannot write run/x.csv: No space left on device"


class _Recorder:
    """Stands in for the hooks and a logger's handler: what would have been printed."""

    def __init__(self, monkeypatch):
        self.seen = []
        monkeypatch.setattr(threading, "excepthook", lambda a: self.seen.append(a.exc_value))
        monkeypatch.setattr(sys, "unraisablehook", lambda u: self.seen.append(u.exc_value))
        handler = logging.Handler()
        handler.emit = lambda record: self.seen.append(record.getMessage())
        for name in ("absl", "asyncio"):
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            monkeypatch.setattr(logger, "propagate", False)
            monkeypatch.setattr(logger, "handlers", [handler])


class _DelRaises:
    def __init__(self, err):
        self.err = err

    def __del__(self):
        raise self.err


def _thread_noise(err: BaseException):
    """What orbax's writer threads do when a write fails: a thread's exception, a log
    record, and an unraisable exception of a callback."""

    def fail():
        raise err

    thread = threading.Thread(target=fail)
    thread.start()
    thread.join()
    logging.getLogger("absl").error("_SignalingThread.run() raised an exception: %s", err)
    obj = _DelRaises(RuntimeError("Event loop is closed"))
    del obj


def test_thread_failures_are_held_and_the_callers_error_is_the_one_report(monkeypatch):
    recorder = _Recorder(monkeypatch)
    full = ValueError("RESOURCE_EXHAUSTED: Failed writing [os_error_code='28']")
    with pytest.raises(ValueError), held_thread_output():
        _thread_noise(full)
        raise full
    assert recorder.seen == []
    # Later echoes of that full disk stay quiet (orbax's abandoned futures, at exit) ...
    _thread_noise(OSError(errno.ENOSPC, "No space left on device"))
    logging.getLogger("asyncio").error("Task exception was never retrieved", exc_info=full)
    assert recorder.seen == []
    # ... and everything else still reaches its hook or logger.
    _thread_noise(KeyError("unrelated"))
    obj = _DelRaises(ValueError("an unrelated unraisable"))
    del obj
    assert [str(x) for x in recorder.seen] == [
        "'unrelated'",
        "_SignalingThread.run() raised an exception: 'unrelated'",
        "an unrelated unraisable",
    ]  # not "Event loop is closed": after a full disk, that is orbax's echo


def test_thread_output_of_a_block_that_succeeds_is_passed_on(monkeypatch):
    recorder = _Recorder(monkeypatch)
    with held_thread_output():
        _thread_noise(KeyError("kept"))
        assert recorder.seen == []  # held while the block runs
    assert [str(x) for x in recorder.seen] == [
        "'kept'",
        "_SignalingThread.run() raised an exception: 'kept'",
        "Event loop is closed",
    ]


_FULL_DISK_CASES = {
    # the first checkpoint does not fit: orbax's writer threads fail
    "checkpoint": ("300k", ["--checkpoint-every", "20"], "checkpoints/"),
    # no checkpoint before the disk fills: metrics.csv or the TensorBoard file fails
    "logs": ("300k", ["--checkpoint-every", "1000000"], "/run/"),
}


def _unshare_mount(folder: Path) -> list[str] | None:
    """A command prefix that runs a command with a small tmpfs mounted at `folder` (a user
    and mount namespace of its own: no root needed where those are allowed), or None."""
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c"]
    probe = subprocess.run([*prefix, f"mount -t tmpfs tmpfs {folder}"], capture_output=True)
    return prefix if probe.returncode == 0 else None


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(_FULL_DISK_CASES))
def test_full_disk_is_one_line_on_stderr(tmp_path, case):
    size, flags, where = _FULL_DISK_CASES[case]
    disk = tmp_path / "disk"
    disk.mkdir()
    prefix = _unshare_mount(disk)
    if prefix is None:
        pytest.skip("cannot mount a small tmpfs here (unshare or user namespaces unavailable)")
    argv = [
        sys.executable, "-m", "experiments.train", "--run-dir", str(disk / "run"),
        "--num-envs", "4", "--trace-len", "5", "--batch-size", "4", "--buffer-size", "400",
        "--total-steps", "1000000", "--eval-episodes", "0", "--no-progress",
        "--num-devices", "1", "--iterations-per-sync", "1", "--log-every", "20", *flags,
    ]  # fmt: skip
    script = f'mount -t tmpfs -o size={size} tmpfs "$0" && exec "$@"'
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env["XLA_FLAGS"] = subprocess_xla_flags()
    proc = subprocess.run(
        [*prefix, script, str(disk), *argv], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    # The run's first line names its backend and devices (before anything is written); the
    # error is then one line.
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("jax ")]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("error: cannot write ") and where in lines[0]
    assert lines[0].endswith(": No space left on device")


def test_two_tensorboard_writers_of_one_process_in_one_second_get_two_files(tmp_path, monkeypatch):
    """A resume in the same process within the same second (tests, notebooks) opens a second
    event file beside the first instead of failing on the name they would share."""
    monkeypatch.setattr("engine.runlog.time.time", lambda: 1_700_000_000.0)
    first = TensorBoardScalars(tmp_path / "tb", tmp_path)
    second = TensorBoardScalars(tmp_path / "tb", tmp_path)
    assert first.path != second.path and first.path.exists() and second.path.exists()
    first.close()
    second.close()
