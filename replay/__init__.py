"""Device-resident trace replay (ACER; Reactor later adds priorities)."""

from replay.memory import (
    ReplayCapacityError,
    available_memory_bytes,
    check_fits,
    format_bytes,
)
from replay.prioritized import PrioritizedReplayState, PrioritizedTraceReplay, SampleInfo
from replay.sum_tree import (
    sum_tree_build,
    sum_tree_descend,
    sum_tree_get,
    sum_tree_init,
    sum_tree_sample,
    sum_tree_set,
    sum_tree_size,
    sum_tree_total,
)
from replay.trace_replay import TraceBatch, TraceReplay, TraceReplayState

__all__ = [
    "PrioritizedReplayState",
    "PrioritizedTraceReplay",
    "ReplayCapacityError",
    "SampleInfo",
    "TraceBatch",
    "TraceReplay",
    "TraceReplayState",
    "available_memory_bytes",
    "check_fits",
    "format_bytes",
    "sum_tree_build",
    "sum_tree_descend",
    "sum_tree_get",
    "sum_tree_init",
    "sum_tree_sample",
    "sum_tree_set",
    "sum_tree_size",
    "sum_tree_total",
]
