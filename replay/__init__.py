"""Device-resident trace replay (ACER; Reactor later adds priorities)."""

from replay.trace_replay import (
    ReplayCapacityError,
    TraceBatch,
    TraceReplay,
    TraceReplayState,
    available_memory_bytes,
)

__all__ = [
    "ReplayCapacityError",
    "TraceBatch",
    "TraceReplay",
    "TraceReplayState",
    "available_memory_bytes",
]
