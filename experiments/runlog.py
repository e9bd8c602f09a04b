"""Run-folder logging: metrics.csv, TensorBoard events and a live progress bar."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

from tqdm import tqdm

from experiments.runfolder import atomic_file

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
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tb"), purge_step=start_step or None)
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
        self._csv.writerow(row)
        self._file.flush()
        step = int(row["env_steps"])
        if self._tb is not None:
            for key, value in row.items():
                if key != "env_steps" and isinstance(value, int | float) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)
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
        self._file.close()
        if self._tb is not None:
            self._tb.close()


class LineageLog:
    """lineage.csv of an evolving population (agents.evolution.Evolver): one row per member
    and generation (its parent, whether it was resampled or an elite, its score and its
    hyper-parameters after the generation). Flushed per generation; on a resume, rows past
    the checkpoint's env step are dropped first (as in metrics.csv)."""

    def __init__(self, run_dir: Path, columns: list[str], start_step: int = 0):
        self.path = run_dir / "lineage.csv"
        self.columns, self._file, self._csv = _open_csv(self.path, list(columns), start_step)

    def write(self, records: list[dict]) -> None:
        self._csv.writerows(records)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _open_csv(path: Path, columns: list[str], start_step: int):
    """(columns, file, writer) to append rows to `path`: an existing file repaired first
    (`_repair_csv`: rows past `start_step` dropped, columns united), a new one with its
    header written."""
    if path.exists():
        columns = _repair_csv(path, columns, start_step)
    new = not path.exists()
    file = open(path, "a", newline="")
    writer = csv.DictWriter(file, fieldnames=columns, restval="")
    if new:
        writer.writeheader()
        file.flush()
    return columns, file, writer


def _repair_csv(path: Path, columns: list[str], max_step: int) -> list[str]:
    """Make `path` safe to append rows of `columns` to; returns the columns to write.

    Keeps the header and the complete rows up to env step `max_step`; drops a last line
    without its newline (half-written) and rows that do not parse; rewrites the file
    (atomically) only when something changes, with the union of the old and new columns.
    """
    with open(path, newline="") as f:
        *lines, partial = f.read().split("\n")  # `partial`: text after the last newline
    if not lines:  # not even a complete header: start the file afresh
        path.unlink()
        return columns
    header = next(csv.reader(lines[:1]))
    if "env_steps" not in header:
        raise ValueError(f"{path} has no env_steps column in its header: {lines[0].strip()}")
    step_col = header.index("env_steps")
    keep, dropped = [], 0
    for row in csv.reader(lines[1:]):
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
