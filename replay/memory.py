"""How much memory a device has left, and whether a replay of a given size fits in it.

The buffers check their size when they are constructed, before anything is allocated, so that
a too-large ``--buffer-size`` fails at once with a one-line message instead of an allocator
error (or the host's OOM killer) minutes into a run.
"""

from __future__ import annotations

import math
import os

import jax
import numpy as np

_GIB = 1024**3
DEFAULT_FRACTION = 0.8
"""Share of the available memory a buffer may take when no explicit limit is given."""


class ReplayCapacityError(ValueError):
    """The requested replay does not fit in the memory available on its device."""


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _host_available_bytes() -> int | None:
    """Memory the host can still give us: MemAvailable, capped by a cgroup limit if any."""
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    for limit_path, usage_path in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        limit, usage = _read_int(limit_path), _read_int(usage_path)
        if limit is not None and usage is not None:
            available = min(available, max(limit - usage, 0))
    return available


def available_memory_bytes(device: jax.Device) -> int | None:
    """Free memory on ``device`` in bytes, or None when it cannot be told.

    On CPU: the host's ``MemAvailable`` (``/proc/meminfo``), capped by the cgroup (v2 or v1)
    limit minus usage. Elsewhere: ``bytes_limit - bytes_in_use`` from ``device.memory_stats()``.
    """
    if device.platform == "cpu":
        return _host_available_bytes()
    try:
        stats = device.memory_stats()
    except Exception:  # backends without memory stats raise various errors
        return None
    if not stats or "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def format_bytes(n: float) -> str:
    """``n`` bytes for a message: GiB from 0.1 GiB up, MiB below (one decimal)."""
    if n >= 0.1 * _GIB:
        return f"{n / _GIB:,.1f} GiB"
    return f"{n / 1024**2:,.1f} MiB"


def check_fits(
    need_bytes: int,
    *,
    device: jax.Device | None = None,
    limit_bytes: int | None = None,
    what: str,
    note: str | None = None,
) -> None:
    """Raises :class:`ReplayCapacityError` when ``need_bytes`` exceed the limit.

    Args:
      need_bytes: bytes the arrays will take.
      device: where they will live; the default device when None.
      limit_bytes: the most they may take; by default 80% of
        :func:`available_memory_bytes` of ``device`` (no check when that cannot be told).
      what: the subject of the message, e.g. ``"replay capacity 1,000 transitions"``.
      note: optional detail shown in parentheses after the size, e.g. ``"7,098 B/transition"``.

    The message reads ``"{what} needs 6.6 GiB ({note}) but only 2.0 GiB is available; lower
    --buffer-size"``.
    """
    if limit_bytes is None:
        available = available_memory_bytes(device if device is not None else jax.devices()[0])
        if available is None:
            return
        limit_bytes = int(DEFAULT_FRACTION * available)
    if need_bytes > limit_bytes:
        detail = f" ({note})" if note else ""
        raise ReplayCapacityError(
            f"{what} needs {format_bytes(need_bytes)}{detail} but only "
            f"{format_bytes(limit_bytes)} is available; lower --buffer-size"
        )


class SizedBuffer:
    """`total_bytes` and `bytes_per_transition` of a buffer with `_state_specs()` (a pytree
    of ShapeDtypeStructs of its whole state) and `num_transitions`."""

    @property
    def total_bytes(self) -> int:
        """Bytes of all arrays in the state."""
        return tree_bytes(self._state_specs())

    @property
    def bytes_per_transition(self) -> float:
        """Storage bytes per stored transition, counting every array."""
        return self.total_bytes / self.num_transitions


def tree_bytes(specs) -> int:
    """Bytes of every array described by a pytree of ShapeDtypeStructs (or arrays)."""
    return sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in jax.tree.leaves(specs))
