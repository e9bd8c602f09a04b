"""Guards for a run folder: one writer at a time, a usable location, strict atomic JSON.

- `RunLock(run_dir)`: an exclusive `fcntl.flock` on `run_dir/.lock` (the holder's PID is
  written into it). The kernel drops the lock when its process dies, even by `kill -9`, so
  a stale lock file never blocks the next run; the file itself is never deleted (deleting
  it would let two processes lock two different files of the same name). In a
  multi-process (jax.distributed) run every process shares the folder: take the lock in
  process 0 only.
- `check_run_dir_writable(path)`: fail early, with one line, when a run folder cannot be
  made at `path`.
- `write_json_atomic(path, data)`: strict JSON (NaN and ±inf become `null`), written to a
  temporary file, fsynced and renamed over `path`, so a reader sees the old file or the new
  one, never half of one. `read_json(path, what)` turns a missing, corrupt or non-object
  file into a one-line `ValueError`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

LOCK_NAME = ".lock"


class RunFolderLocked(RuntimeError):
    """Another process holds the run folder's lock."""


class RunLock:
    """Exclusive lock on a run folder, as a context manager (or `acquire()` / `close()`).

    Creates `run_dir` if needed. A second `RunLock` on the same folder, in this process or
    another, raises `RunFolderLocked` naming the folder and the holder's PID.
    """

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        if self._fd is not None:
            return self
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read_pid(fd)
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            who = f"process {holder}" if holder else "another process"
            raise RunFolderLocked(
                f"run folder {self.run_dir} is in use by {who} (lock {self.path}); "
                "wait for it to finish or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def close(self):
        """Release the lock (idempotent). The lock file stays, emptied."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    release = close

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc):
        self.close()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def check_run_dir_writable(path: str | Path, what: str = "run folder"):
    """Raise a one-line `ValueError` naming `path` (as `what`) if a run folder cannot be used there:
    it exists and is not a folder, a parent is a file, or the nearest existing folder
    (the folder itself, or the ancestor it would be created in) cannot be written.

    Writability is probed by creating and removing a temporary folder, so read-only
    mounts are caught even when running as root. Nothing is left behind.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} {path} exists and is not a folder")
    probe_in = path
    while not probe_in.exists():
        if probe_in.parent == probe_in:
            break
        probe_in = probe_in.parent
    if probe_in.exists() and not probe_in.is_dir():
        raise ValueError(f"cannot create {what} {path}: {probe_in} is a file")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-probe-", dir=probe_in))
    except OSError as err:
        where = "it" if probe_in == path else str(probe_in)
        raise ValueError(
            f"cannot write {what} {path}: {where} is not writable ({err.strerror or err})"
        ) from None


def strict_json_value(value: Any) -> Any:
    """`value` with NaN/±inf floats (also numpy scalars and arrays, at any depth) replaced by
    None, numpy scalars and arrays turned into Python numbers and lists, tuples into lists."""
    if isinstance(value, dict):
        return {k: strict_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json_value(v) for v in value]
    if isinstance(value, np.ndarray):
        return strict_json_value(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json_atomic(path: str | Path, data: Any):
    """Write `data` as strict, indented JSON (keys sorted) to `path`, atomically and durably:
    a temporary file in the same folder is fsynced, then renamed over `path`, then the folder
    is fsynced. Non-finite floats become `null`; other values JSON cannot hold raise
    `TypeError` and leave `path` untouched."""
    path = Path(path)
    text = json.dumps(strict_json_value(data), indent=2, sort_keys=True, allow_nan=False)
    with atomic_file(path) as f:
        f.write(text + "\n")


@contextlib.contextmanager
def atomic_file(path: str | Path, newline: str | None = None):
    """A text file to write that replaces `path` atomically and durably when the block ends:
    a temporary file in the same folder is fsynced, renamed over `path`, and the folder is
    fsynced. An exception leaves `path` untouched. The old file's mode is kept (else 0644)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600: keep the old file's mode, else the usual 0644 of shared runs
        os.fchmod(fd, stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644)
        with os.fdopen(fd, "w", newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def read_json(path: str | Path, what: str = "JSON file") -> dict:
    """The JSON object in `path`. A missing, unreadable, malformed or non-object file raises
    one `ValueError` line naming `what`, the file and the problem. NaN/Infinity written by
    older versions are accepted (reading stays lenient; writing is strict)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ValueError(f"{what} {path} is missing") from None
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise ValueError(f"{what} {path} cannot be read: {reason}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{what} {path} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
        ) from None
    if not isinstance(data, dict):
        kind = _JSON_KINDS.get(type(data), type(data).__name__)
        raise ValueError(f"{what} {path} holds a JSON {kind}, expected an object")
    return data


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_JSON_KINDS[type(None)] = "null"


def fsync_dir(path: str | Path):
    """Make renames and new entries in folder `path` durable (best effort: some
    filesystems refuse to fsync folders)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
