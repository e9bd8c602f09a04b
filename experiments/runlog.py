"""Run-folder logging: metrics.csv, TensorBoard events and a live progress bar."""

from __future__ import annotations

import csv
import math
import sys
from collections import deque
from pathlib import Path

from tqdm import tqdm

from experiments.runfolder import read_json, write_json_atomic

__all__ = ["RunLogger", "read_json", "write_json_atomic"]


class RunLogger:
    """Appends one row per iteration to metrics.csv and mirrors scalars to TensorBoard.

    On resume the CSV is reopened in append mode; rows past the resumed step are dropped
    first, so a crash between a log row and the next checkpoint leaves no duplicate steps.
    """

    def __init__(
        self,
        run_dir: Path,
        columns: list[str],
        total_steps: int,
        start_step: int = 0,
        tensorboard: bool = True,
        progress: bool = True,
        return_window: int = 20,
        write: bool = True,
    ):
        """`write=False` (processes other than 0) keeps the return window but writes nothing."""
        self.path = run_dir / "metrics.csv"
        self.columns = columns
        self.write = write
        self.recent = deque(maxlen=return_window)
        if not write:
            return
        if start_step > 0 and self.path.exists():
            _truncate_csv(self.path, start_step)
        new = not self.path.exists()
        self._file = open(self.path, "a", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=columns, extrasaction="ignore")
        if new:
            self._csv.writeheader()
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

    def add_returns(self, returns):
        self.recent.extend(float(r) for r in returns)

    @property
    def return_mean(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else math.nan

    def log(self, row: dict, advance: int):
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
            sps=f"{row.get('sps', 0):.0f}", ret=f"{self.return_mean:.1f}", refresh=False
        )

    def close(self):
        if not self.write:
            return
        self._bar.close()
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def _truncate_csv(path: Path, max_step: int):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return
    header, body = rows[0], rows[1:]
    col = header.index("env_steps")
    keep = [r for r in body if r and int(float(r[col])) <= max_step]
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(keep)
    tmp.replace(path)
