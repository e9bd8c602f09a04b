"""Run-folder logging: metrics.csv, TensorBoard events and a live progress bar.

Every file is written in the calling thread, through engine.runfolder (no symbolic
links followed, nothing outside the run folder), so a full disk is one `WriteError` line.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import math
import os
import socket
import struct
import sys
import time
from pathlib import Path

from tqdm import tqdm

from engine.runfolder import (
    WriteError,
    atomic_file,
    check_file_target,
    check_folder,
    open_append,
)

__all__ = ["RunLogger"]


class RunLogger:
    """Appends one row per iteration to metrics.csv and mirrors scalars to TensorBoard.

    The columns are fixed: logging a key that is not a column raises `ValueError` (naming
    it) instead of dropping it; a column missing from a row is left empty.

    When metrics.csv already exists (a resume), it is repaired before appending: rows past
    `start_step` are dropped, so a crash between a log row and the next checkpoint leaves no
    duplicate steps; a half-written last line (a kill mid-write) is dropped; and if its
    header differs from `columns`, the file is rewritten with the union (`columns`, then
    the old file's other columns), old rows keeping empty cells for new columns.
    `self.columns` is that union.
    """

    def __init__(
        self,
        run_dir: Path,
        columns: list[str],
        total_steps: int,
        start_step: int = 0,
        tensorboard: bool = True,
        progress: bool = True,
        write: bool = True,
    ):
        """`write=False` (processes other than 0): checks rows but writes nothing."""
        if "env_steps" not in columns:
            raise ValueError(f"metrics.csv columns must include env_steps, got {columns}")
        self.path = run_dir / "metrics.csv"
        self.columns = list(columns)
        self.write = write
        if not write:
            return
        self.columns, self._file, self._csv = _open_csv(self.path, self.columns, start_step)
        self._tb = None
        if tensorboard:
            self._tb = TensorBoardScalars(run_dir / "tb", run_dir, purge_step=start_step)
        self._bar = tqdm(
            total=total_steps,
            initial=start_step,
            unit="step",
            dynamic_ncols=True,
            disable=not progress,
            mininterval=1.0 if sys.stderr.isatty() else 30.0,
            file=sys.stderr,
        )

    def log(self, row: dict, advance: int):
        unknown = [k for k in row if k not in self.columns]
        if unknown:
            raise ValueError(
                f"metrics.csv has no column for {', '.join(map(repr, unknown))} "
                f"(columns: {', '.join(self.columns)})"
            )
        if not self.write:
            return
        try:
            self._csv.writerow(row)
            self._file.flush()
        except OSError as err:
            raise WriteError.of(err, self.path) from None
        if self._tb is not None:
            self._tb.write(row, int(row["env_steps"]))
        self._bar.update(advance)
        self._bar.set_postfix(
            sps=f"{row.get('sps', 0):.0f}",
            ret=f"{row.get('return_mean', math.nan):.1f}",
            refresh=False,
        )

    def close(self):
        if not self.write:
            return
        self._bar.close()
        try:
            self._file.close()
        except OSError as err:
            raise WriteError.of(err, self.path) from None
        finally:
            if self._tb is not None:
                self._tb.close()


class TensorBoardScalars:
    """The scalars of metrics rows as a TensorBoard event file in `folder` (made if needed,
    inside `run_dir`), written in the calling thread and flushed once per row.

    tensorboardX's SummaryWriter writes from a thread of its own: a full disk there printed
    a traceback and left the run blocked on the writer's full queue. Here a failed write is
    a `WriteError` in the caller. The file holds TFRecord-framed `Event` protos (tensorboardX
    builds them); a resume at `purge_step` > 0 starts with a SessionLog START at that step,
    which makes TensorBoard drop the older files' events from that step on."""

    def __init__(self, folder: Path, run_dir: Path, purge_step: int = 0):
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.record_writer import masked_crc32c
        from tensorboardX.summary import scalar

        self._event, self._crc, self._scalar = Event, masked_crc32c, scalar
        check_folder(folder, run_dir)
        folder.mkdir(exist_ok=True)
        stem = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for n in itertools.count():  # a second writer of this process within the same second
            self.path = check_file_target(folder / (stem if n == 0 else f"{stem}.{n}"), run_dir)
            try:
                self._file = os.fdopen(os.open(self.path, flags, 0o644), "wb")
                break
            except FileExistsError:  # never opened (O_EXCL): not a file of ours to touch
                continue
            except OSError as err:
                raise WriteError.of(err, self.path) from None
        self._add(Event(wall_time=time.time(), file_version="brain.Event:2"))
        if purge_step:
            start = SessionLog(status=SessionLog.START)
            self._add(Event(wall_time=time.time(), step=purge_step, session_log=start))
        self._flush()

    def write(self, row: dict, step: int):
        """The row's finite numbers except env_steps, at `step`; flushed (not fsynced)."""
        now = time.time()
        for key, value in row.items():
            if key != "env_steps" and isinstance(value, int | float) and math.isfinite(value):
                self._add(self._event(wall_time=now, step=step, summary=self._scalar(key, value)))
        self._flush()

    def _add(self, event):
        """One TFRecord: length, its masked CRC-32C, the data, the data's masked CRC-32C."""
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        crc = self._crc
        record = header + struct.pack("<I", crc(header)) + data + struct.pack("<I", crc(data))
        try:
            self._file.write(record)
        except OSError as err:
            raise WriteError.of(err, self.path) from None

    def _flush(self):
        try:
            self._file.flush()
        except OSError as err:
            raise WriteError.of(err, self.path) from None

    def close(self):
        try:
            self._file.close()
        except OSError as err:
            raise WriteError.of(err, self.path) from None


class LineageLog:
    """lineage.csv of an evolving population (engine.evolution.Evolver): one row per member
    and generation (its parent, whether it was resampled or an elite, its score and its
    hyper-parameters after the generation). Flushed per generation; on a resume, rows past
    the checkpoint's env step are dropped first (as in metrics.csv)."""

    def __init__(self, run_dir: Path, columns: list[str], start_step: int = 0):
        self.path = run_dir / "lineage.csv"
        self.columns, self._file, self._csv = _open_csv(self.path, list(columns), start_step)

    def write(self, records: list[dict]) -> None:
        try:
            self._csv.writerows(records)
            self._file.flush()
        except OSError as err:
            raise WriteError.of(err, self.path) from None

    def close(self) -> None:
        self._file.close()


def _open_csv(path: Path, columns: list[str], start_step: int):
    """(columns, file, writer) to append rows to `path`: an existing file repaired first
    (`_repair_csv`: rows past `start_step` dropped, columns united), a new one with its
    header written. A `path` that is a symbolic link is refused (`UnsafePathError`)."""
    check_file_target(path)
    if path.exists():
        columns = _repair_csv(path, columns, start_step)
    new = not path.exists()
    file = open_append(path, newline="")
    writer = csv.DictWriter(file, fieldnames=columns, restval="")
    if new:
        try:
            writer.writeheader()
            file.flush()
        except OSError as err:
            with contextlib.suppress(OSError):
                file.close()
            raise WriteError.of(err, path) from None
    return columns, file, writer


def _rows(lines: list[str]):
    """The CSV rows of `lines`, a line that is not CSV (a stray quote) read as no row."""
    for line in lines:
        try:
            yield from csv.reader([line])
        except csv.Error:
            yield ["<not CSV>"]  # counted as malformed


def set_aside(path: Path) -> Path:
    """Renames `path` to `<name>.set-aside` (or `-1`, `-2`, ... when taken), keeping what it
    held; returns the new path."""
    aside, n = path.with_name(path.name + ".set-aside"), 0
    while aside.exists() or aside.is_symlink():
        n += 1
        aside = path.with_name(f"{path.name}.set-aside-{n}")
    path.rename(aside)
    return aside


def last_logged_step(path: Path) -> int:
    """The largest env step among the complete rows of the metrics.csv at `path`; 0 when it
    has none, or is missing or not a regular file. Rows that do not parse are skipped."""
    if not path.is_file():
        return 0
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")[:-1]  # the last: empty, or half-written
    except OSError:
        return 0
    rows = list(_rows(lines))
    if not rows or "env_steps" not in rows[0]:
        return 0
    col, last = rows[0].index("env_steps"), 0
    for row in rows[1:]:
        with contextlib.suppress(IndexError, ValueError, OverflowError):
            last = max(last, int(float(row[col])))
    return last


def _repair_csv(path: Path, columns: list[str], max_step: int) -> list[str]:
    """Make `path` safe to append rows of `columns` to; returns the columns to write.

    Keeps the header and the complete rows up to env step `max_step`; drops a last line
    without its newline (half-written) and rows that do not parse; rewrites the file
    (atomically) only when something changes, with the union of the old and new columns.
    """
    try:
        with open(path, newline="") as f:
            *lines, partial = f.read().split("\n")  # `partial`: text after the last newline
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise ValueError(f"{path} cannot be read: {reason}; move it away") from None
    if not lines:  # not even a complete header: start the file afresh
        if partial:  # text without a newline (a cut-off header, or not this program's file)
            aside = set_aside(path)
            print(f"{path}: no complete header line; set aside as {aside.name}", file=sys.stderr)
        else:
            path.unlink()  # empty
        return columns
    try:
        header = next(csv.reader(lines[:1]))
    except csv.Error as err:
        raise ValueError(f"{path} has a header that is not CSV: {err}") from None
    if "env_steps" not in header:
        raise ValueError(f"{path} has no env_steps column in its header: {lines[0].strip()}")
    step_col = header.index("env_steps")
    keep, dropped = [], 0
    for row in _rows(lines[1:]):
        if not row:
            continue
        try:
            step = float(row[step_col])
        except (IndexError, ValueError):
            step = math.nan
        if len(row) != len(header) or not math.isfinite(step):
            dropped += 1
        elif step <= max_step:
            keep.append(row)
    notes = [f"{dropped} malformed row(s)"] if dropped else []
    notes += ["a half-written last line"] if partial else []
    if notes:
        print(f"{path}: dropped {' and '.join(notes)}", file=sys.stderr)
    union = list(columns) + [c for c in header if c not in columns]
    if union == header and not partial and len(keep) == len(lines) - 1:
        return union  # nothing to change: append as is
    with atomic_file(path, newline="") as f:
        writer = csv.DictWriter(f, fieldnames=union, restval="")
        writer.writeheader()
        writer.writerows(dict(zip(header, row, strict=True)) for row in keep)
    return union
