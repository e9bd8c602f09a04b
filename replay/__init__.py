"""Device-resident replay of fixed-length traces, flashbax-style: pure functions over a state
pytree.

* :class:`TraceReplay`: the trace storage (env-major rings of ``T``-step traces, frame stacks
  stored once), sampled uniformly; for ACER.
* :class:`PrioritizedTraceReplay`: wraps a :class:`TraceReplay` and samples traces by priority
  through a sum tree, with the Reactor's lazy priority initialisation; for the Reactor.

Both have ``init / add / sample / set_priorities`` with the same signatures, ``sample`` returns
a :class:`ReplaySample` (:class:`StoredTraces` + :class:`SampleInfo`) for both, and
``partition_specs(axis)`` lays their states out for data parallelism
(``make_trace_replay`` builds one device's, ``window_replay`` an agent config's window and
prioritisation); ``overwrite_steps`` and ``overwrite_extras`` are the one way to change
stored traces after ``add`` (a learner's new behaviour statistics or recurrent states for
what it sampled). ``replay.memory`` checks
that a buffer fits its device before anything is allocated.
"""

from replay.build import make_trace_replay, window_replay
from replay.memory import (
    ReplayCapacityError,
    available_memory_bytes,
    check_fits,
    format_bytes,
)
from replay.prioritized import PrioritizedReplayState, PrioritizedTraceReplay
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
from replay.trace_replay import (
    ReplaySample,
    SampleInfo,
    StoredTraces,
    TraceReplay,
    TraceReplayState,
)

__all__ = [
    "PrioritizedReplayState",
    "PrioritizedTraceReplay",
    "ReplayCapacityError",
    "ReplaySample",
    "SampleInfo",
    "StoredTraces",
    "TraceReplay",
    "TraceReplayState",
    "available_memory_bytes",
    "check_fits",
    "format_bytes",
    "make_trace_replay",
    "sum_tree_build",
    "sum_tree_descend",
    "sum_tree_get",
    "sum_tree_init",
    "sum_tree_sample",
    "sum_tree_set",
    "sum_tree_size",
    "sum_tree_total",
    "window_replay",
]


def __getattr__(name: str):
    """`replay.TraceBatch`, the old name of `StoredTraces` (renamed so that the learners' own
    `agents.core.learning.TraceBatch` is the one trace batch type): kept for one release,
    with a DeprecationWarning."""
    if name == "TraceBatch":
        import warnings

        warnings.warn(
            "replay.TraceBatch is now replay.StoredTraces (the learners' batch type is "
            "agents.core.learning.TraceBatch); the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return StoredTraces
    raise AttributeError(f"module 'replay' has no attribute {name!r}")
