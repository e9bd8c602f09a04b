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

Every file the project writes goes through this module, so that a run folder is data that
cannot steer a write elsewhere:
- `atomic_file` (text or bytes), `atomic_path` (a temporary name for libraries that write by
  name: matplotlib, imageio) and `write_json_atomic` replace their target by a rename in its
  own folder; `open_append` opens a log to append to (metrics.csv) with `O_NOFOLLOW`, and
  refuses one with hard links (appending would change the file under its other names).
- Each refuses, with one `UnsafePathError` line, a target that is a symbolic link (refused
  rather than replaced, for safety: the user sees the link) or, given its `run_dir`, a
  target whose folder resolves outside the run folder (`videos/` or `tb/` linked elsewhere).
  `check_run_folder_links` makes the same checks on a whole run folder before a run starts;
  the run folder itself may be a link.
- A write refused by the disk (full, over quota, read-only) is one `WriteError` line naming
  the file. `held_thread_output()` keeps what library worker threads print when such a
  write fails (orbax's, for checkpoints) from reaching stderr: the error the main thread
  raises is the one report.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import re
import stat
import sys
import tempfile
import threading
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
        try:  # O_NOFOLLOW: a .lock linked elsewhere would be truncated there
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise UnsafePathError(_link_message(self.path)) from None
            raise
        _refuse_hard_link(fd, self.path)  # its PID is written into it
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


def write_json_atomic(path: str | Path, data: Any, run_dir: str | Path | None = None):
    """Write `data` as strict, indented JSON (keys sorted) to `path`, atomically and durably
    (`atomic_file`, whose checks apply). Non-finite floats become `null`; other values JSON
    cannot hold raise `TypeError` and leave `path` untouched."""
    text = json.dumps(strict_json_value(data), indent=2, sort_keys=True, allow_nan=False)
    with atomic_file(path, run_dir=run_dir) as f:
        f.write(text + "\n")


@contextlib.contextmanager
def atomic_file(
    path: str | Path,
    newline: str | None = None,
    run_dir: str | Path | None = None,
    binary: bool = False,
):
    """A text (or, with `binary`, bytes) file to write that replaces `path` atomically and
    durably when the block ends; see `atomic_path`, whose checks and guarantees apply."""
    with atomic_path(path, run_dir) as tmp:
        with open(tmp, "wb" if binary else "w", newline=None if binary else newline) as f:
            yield f


@contextlib.contextmanager
def atomic_path(path: str | Path, run_dir: str | Path | None = None):
    """A temporary file name beside `path` (same suffix, so libraries that pick a format by
    name, like matplotlib and imageio, pick the right one) for the block to write. When the
    block ends the file is fsynced, renamed over `path` (a rename replaces a directory entry,
    it never follows one) and the folder is fsynced; an exception leaves `path` untouched and
    no temporary file. The old file's mode is kept (else 0644).

    Refused with one `UnsafePathError` line, before anything is written: a `path` that is a
    symbolic link, and with `run_dir`, a `path` whose folder resolves outside `run_dir`. An
    `OSError` of the write becomes a one-line `WriteError` naming `path`."""
    path = check_file_target(path, run_dir)
    try:
        fd, name = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent
        )
    except OSError as err:
        raise WriteError.of(err, path) from None
    tmp = Path(name)
    try:
        try:  # mkstemp makes 0600: keep the old file's mode, else the usual 0644 of shared runs
            os.fchmod(fd, stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644)
        finally:
            os.close(fd)
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and not isinstance(err, WriteError):
            raise WriteError.of(err, path) from None
        raise
    fsync_dir(path.parent)


def open_append(
    path: str | Path,
    run_dir: str | Path | None = None,
    newline: str | None = None,
    binary: bool = False,
):
    """`path` opened to append text (or bytes; created 0644 if missing), for logs that grow a
    row at a time and so cannot be replaced by a rename each time. Opened with `O_NOFOLLOW`:
    a `path` that is a symbolic link is refused (`UnsafePathError`), as is, with `run_dir`,
    a folder that resolves outside it."""
    path = check_file_target(path, run_dir)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:  # made a link since the check
            raise UnsafePathError(_link_message(path)) from None
        raise WriteError.of(err, path) from None
    _refuse_hard_link(fd, path)
    return os.fdopen(fd, "ab") if binary else os.fdopen(fd, "a", newline=newline)


def _refuse_hard_link(fd: int, path: Path):
    """Close `fd` and raise `UnsafePathError` when the file it opened has other names (hard
    links): written in place (appended to, or truncated), it would change them too, and one
    may be outside the run folder. (A file replaced by a rename never is.)"""
    links = os.fstat(fd).st_nlink
    if links > 1:
        os.close(fd)
        raise UnsafePathError(_hard_link_message(path, links))


def _hard_link_message(path: Path, links: int) -> str:
    return (
        f"refusing to write {path}: it has {links} hard links (the same file under other "
        "names, maybe outside the run folder), and a file written in place would change "
        f"them all, for safety; replace it by a copy (cp {path} x && mv x {path})"
    )


def _fsync_file(path: Path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_json(path: str | Path, what: str = "JSON file") -> dict:
    """The JSON object in `path`. A missing, unreadable, malformed or non-object file (or
    not a regular file: a folder, a FIFO) raises one `ValueError` line naming `what`, the
    file and the problem. NaN/Infinity written by older versions are accepted (reading
    stays lenient; writing is strict)."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a folder; a FIFO or device would block or never end
        raise ValueError(f"{what} {path} cannot be read: it is not a regular file")
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
    except (ValueError, RecursionError) as err:  # a number too long, arrays nested too deep
        reason = "nested too deeply" if isinstance(err, RecursionError) else one_line(err)
        raise ValueError(f"{what} {path} cannot be read as JSON: {reason}") from None
    if not isinstance(data, dict):
        kind = _JSON_KINDS.get(type(data), type(data).__name__)
        raise ValueError(f"{what} {path} holds a JSON {kind}, expected an object")
    return data


def summary_env_steps(summary: dict, path: str | Path, field: str = "env_steps") -> int | None:
    """summary.json's env_steps (or another `field` of steps; None where absent): the runner
    writes an integer >= 0, and any other value (a float, a string, a bool) is a one-line
    ValueError naming the file. The report, the sweep and train's --resume read it through
    here, so they judge a summary alike."""
    if field not in summary:
        return None
    value = summary[field]
    if type(value) is not int or value < 0:
        raise ValueError(f"summary {path}: {field} must be an integer >= 0, got {value!r}")
    return value


def summary_member_steps(summary: dict, path: str | Path) -> int | None:
    """The env steps each member trained: a population's summary.json counts `env_steps`
    over its members and gives `env_steps_per_member`; a single run's is `env_steps`."""
    per_member = "env_steps_per_member" in summary
    return summary_env_steps(summary, path, "env_steps_per_member" if per_member else "env_steps")


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


# Writes stay where they belong.


class UnsafePathError(ValueError):
    """A write the project refuses: its target is a symbolic link, or resolves outside the
    run folder. Refused rather than followed or replaced, for safety: a run folder is data,
    and what a link in it points to is never written or deleted."""


class WriteError(OSError):
    """An `OSError` of a write, as one line naming the file: `cannot write PATH: REASON`."""

    @classmethod
    def of(cls, err: OSError, path: str | Path) -> WriteError:
        code = err.errno if err.errno is not None else errno.EIO
        reason = err.strerror or one_line(err)
        return cls(code, reason, str(path))

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


def _link_message(path: Path, folder: bool = False) -> str:
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    if folder:
        return (
            f"refusing to write in {path}: it is a symbolic link{target}, and old files are "
            "deleted in it: it must be a real folder, for safety (the run folder itself may "
            "be a link)"
        )
    return (
        f"refusing to write {path}: it is a symbolic link{target}, and links in a run folder "
        "are never followed or replaced, for safety; remove the link"
    )


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_file_target(path: str | Path, run_dir: str | Path | None = None) -> Path:
    """`path`, if the project may write it: not a symbolic link, and with `run_dir`, in a
    folder that resolves inside `run_dir` (`check_folder`). Else one `UnsafePathError`."""
    path = Path(path)
    if path.is_symlink():
        raise UnsafePathError(_link_message(path))
    if run_dir is not None:
        check_folder(path.parent, run_dir)
    return path


def check_folder(folder: str | Path, run_dir: str | Path, link_ok: bool = True) -> Path:
    """`folder` (in `run_dir`, existing or not), if the project may write in it: it resolves
    inside `run_dir` (itself resolved: the run folder may be a link), and with
    `link_ok=False` it is not a symbolic link at all. Else one `UnsafePathError`."""
    folder, run_dir = Path(folder), Path(run_dir)
    if not link_ok and folder.is_symlink():
        raise UnsafePathError(_link_message(folder, folder=True))
    real, root = folder.resolve(), run_dir.resolve()
    if not _inside(real, root):
        raise UnsafePathError(
            f"refusing to write in {folder}: it leads to {real}, outside the run folder "
            f"{run_dir} (through a symbolic link), and a run writes only in its own folder, "
            "for safety; remove the link"
        )
    return folder


# What a training run writes in its folder, and in each member-<i>/ of a population; of
# those, the files written in place (appended to, or the lock's PID), not replaced by a rename.
RUN_FILES = ("config.json", "metrics.csv", "summary.json", "lineage.csv")
IN_PLACE = ("metrics.csv", "lineage.csv", LOCK_NAME)
RUN_FOLDERS = ("tb",)
CHECKPOINTS = "checkpoints"


def check_run_folder_links(run_dir: str | Path):
    """One `UnsafePathError` line, before a run writes anything, when a write of the run
    would go through a symbolic link: one of `RUN_FILES` is a link, `checkpoints/` is a link
    (its rotation deletes old checkpoints), or `tb/` or a `member-<i>/` folder leads outside
    the run folder; or through a hard link: a file written in place (`IN_PLACE`) has other
    names. A file or folder of the run that is there but of the wrong kind (a folder where
    metrics.csv belongs, a file where tb/ does) is a one-line `ValueError`. The run folder
    itself may be a link; a missing one passes."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return
    folders = [run_dir, *sorted(run_dir.glob("member-*"))]
    for folder in folders:
        check_folder(folder, run_dir)
        for name in RUN_FILES:
            check_file_target(folder / name, run_dir)
        for name in (*RUN_FILES, LOCK_NAME):
            if os.path.lexists(folder / name) and not (folder / name).is_file():
                raise ValueError(f"{folder / name} exists and is not a file; move it away")
        for name in IN_PLACE:
            with contextlib.suppress(OSError):
                info = os.lstat(folder / name)
                if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                    raise UnsafePathError(_hard_link_message(folder / name, info.st_nlink))
        for name in RUN_FOLDERS:
            check_folder(folder / name, run_dir)
            _check_is_folder(folder / name)
    check_folder(run_dir / CHECKPOINTS, run_dir, link_ok=False)
    _check_is_folder(run_dir / CHECKPOINTS)


def _check_is_folder(path: Path):
    if os.path.lexists(path) and not path.is_dir():
        raise ValueError(f"{path} exists and is not a folder; move it away")


# A full disk, one line.

STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
# An OS error code inside an error's text: tensorstore's (orbax's writer) status text, or an
# OSError's text carried by another exception or a log message
_OS_ERROR_CODE = re.compile(r"(?:os_error_code='?|\[Errno )(\d+)")


def storage_errno(err: BaseException | None) -> int | None:
    """ENOSPC, EDQUOT or EROFS when `err` (or an exception it was raised from) is a write the
    disk refused: full, over quota, read-only. Orbax re-raises tensorstore's failures as
    `ValueError`s whose text carries the OS error code; those count too, as does any error
    whose text quotes an OSError's code (`[Errno 28]`)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in STORAGE_ERRNOS:
            return err.errno
        if not isinstance(err, OSError):
            for code in _OS_ERROR_CODE.findall(str(err)):
                if int(code) in STORAGE_ERRNOS:
                    return int(code)
        err = err.__cause__ or err.__context__
    return None


# Loggers that library worker threads report their failures to: orbax's (absl) and asyncio's
# ("exception was never retrieved", for the futures orbax abandons when a write fails).
_HELD_LOGGERS = ("absl", "asyncio")


class _Hold(logging.Filter):
    """Collects what the hooks and loggers would print (see `held_thread_output`)."""

    def __init__(self):
        super().__init__()
        self.held: list[tuple[str, Any]] = []
        self.thread = threading.excepthook
        self.unraisable = sys.unraisablehook

    def filter(self, record: logging.LogRecord) -> bool:
        self.held.append(("log", record))
        return False

    def on_thread(self, args):
        self.held.append(("thread", args))

    def on_unraisable(self, unraisable):
        # the hook's argument is only valid during the call: keep a copy of its fields
        fields = ("exc_type", "exc_value", "exc_traceback", "err_msg", "object")
        self.held.append(("unraisable", {k: getattr(unraisable, k, None) for k in fields}))

    def replay(self):
        for kind, item in self.held:
            if kind == "log":
                logging.getLogger(item.name).handle(item)
            elif kind == "thread":
                self.thread(item)
            else:
                self.unraisable(_Unraisable(**item))


class _Unraisable:
    def __init__(self, **fields):
        self.__dict__.update(fields)


class _Echoes(logging.Filter):
    """Once a full disk has been reported by the main thread, drops for the rest of the
    process what orbax's abandoned writes still print about it as they finish or are
    garbage-collected (often at exit): log records and thread or unraisable exceptions that
    carry a full-disk error, and the "Event loop is closed" errors of tensorstore callbacks
    landing on orbax's closed loops. Everything else passes, to the hooks it was meant for."""

    _installed: _Echoes | None = None

    @classmethod
    def install(cls):
        if cls._installed is not None and sys.unraisablehook == cls._installed.on_unraisable:
            return
        for name in _HELD_LOGGERS:  # a reinstall (the hooks were replaced): one filter
            logging.getLogger(name).removeFilter(cls._installed)
        echoes = cls._installed = cls()
        echoes.thread, echoes.unraisable = threading.excepthook, sys.unraisablehook
        threading.excepthook, sys.unraisablehook = echoes.on_thread, echoes.on_unraisable
        for name in _HELD_LOGGERS:
            logging.getLogger(name).addFilter(echoes)

    @staticmethod
    def is_echo(err: BaseException | None) -> bool:
        if isinstance(err, RuntimeError) and str(err) == "Event loop is closed":
            return True
        return storage_errno(err) is not None

    def filter(self, record: logging.LogRecord) -> bool:
        err = record.exc_info[1] if record.exc_info else None
        if self.is_echo(err):
            return False
        codes = _OS_ERROR_CODE.findall(record.getMessage())
        return not any(int(code) in STORAGE_ERRNOS for code in codes)

    def on_thread(self, args):
        if not self.is_echo(args.exc_value):
            self.thread(args)

    def on_unraisable(self, unraisable):
        if not self.is_echo(unraisable.exc_value):
            self.unraisable(unraisable)


@contextlib.contextmanager
def held_thread_output():
    """Hold back, while the block runs, what library worker threads print when they fail:
    exceptions reaching `threading.excepthook`, unraisable exceptions (`sys.unraisablehook`:
    tensorstore's callbacks landing on an asyncio loop that orbax already closed) and records
    of the absl and asyncio loggers. Orbax re-raises its writer threads' failure in the
    calling thread, so when the block raises, that exception is the one report: the held
    output is dropped, and after a full disk (`storage_errno`) so are its later echoes
    (`_Echoes`). When the block ends normally, the held output is passed on unchanged to the
    hooks and loggers it was meant for. Process-wide: use it from the main thread."""
    hold = _Hold()
    loggers = [logging.getLogger(name) for name in _HELD_LOGGERS]
    threading.excepthook, sys.unraisablehook = hold.on_thread, hold.on_unraisable
    for logger in loggers:
        logger.addFilter(hold)
    failure = None
    try:
        yield
    except BaseException as err:
        failure = err
        raise
    finally:
        threading.excepthook, sys.unraisablehook = hold.thread, hold.unraisable
        for logger in loggers:
            logger.removeFilter(hold)
        if failure is None:
            hold.replay()
        elif storage_errno(failure) is not None:
            _Echoes.install()


def one_line(err: BaseException, limit: int = 300) -> str:
    """An exception's message on one line, at most `limit` characters (for one-line errors)."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
