"""replay.memory: memory probing, the size check, and what the buffers count."""

import re
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import replay
from replay import PrioritizedTraceReplay, ReplayCapacityError, TraceReplay, memory

GIB = 1024**3


def test_format_bytes():
    assert memory.format_bytes(2 * GIB) == "2.0 GiB"
    assert memory.format_bytes(1234 * GIB) == "1,234.0 GiB"
    assert memory.format_bytes(0.1 * GIB) == "0.1 GiB"
    assert memory.format_bytes(50 * 1024**2) == "50.0 MiB"


def test_check_fits_against_an_explicit_limit():
    memory.check_fits(2 * GIB, limit_bytes=2 * GIB, what="x")  # equal fits
    msg = "replay capacity 10 transitions needs 3.0 GiB (7 B/transition) but only 2.0 GiB is "
    with pytest.raises(ReplayCapacityError, match="^" + re.escape(msg) + "available; lower"):
        memory.check_fits(
            3 * GIB,
            limit_bytes=2 * GIB,
            what="replay capacity 10 transitions",
            note="7 B/transition",
        )
    with pytest.raises(ValueError, match=r"^thing needs 3\.0 GiB but only 2\.0 GiB is available"):
        memory.check_fits(3 * GIB, limit_bytes=2 * GIB, what="thing")
    assert replay.ReplayCapacityError is memory.ReplayCapacityError


def test_check_fits_defaults_to_80_percent_of_what_is_available(monkeypatch):
    seen = []

    def available(device):
        seen.append(device)
        return 10 * GIB

    monkeypatch.setattr(memory, "available_memory_bytes", available)
    memory.check_fits(8 * GIB, what="x")
    with pytest.raises(ReplayCapacityError, match=r"needs 8\.1 GiB but only 8\.0 GiB"):
        memory.check_fits(int(8.1 * GIB), what="x")
    device = jax.devices()[1]
    memory.check_fits(1, device=device, what="x")
    assert seen == [jax.devices()[0], jax.devices()[0], device]
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device: None)
    memory.check_fits(10**18, what="x")  # cannot tell: no check


def meminfo_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def test_available_memory_on_the_host():
    got = memory.available_memory_bytes(jax.devices("cpu")[0])
    assert isinstance(got, int) and got > 0
    reference = meminfo_available()
    if reference is not None:  # capped by cgroup limits, never above MemAvailable (+ drift)
        assert got <= reference + 256 * 1024**2


def test_available_memory_on_an_accelerator_comes_from_memory_stats():
    def device(stats):
        def memory_stats():
            if isinstance(stats, Exception):
                raise stats
            return stats

        return types.SimpleNamespace(platform="gpu", memory_stats=memory_stats)

    assert memory.available_memory_bytes(device({"bytes_limit": 100, "bytes_in_use": 30})) == 70
    assert memory.available_memory_bytes(device({"bytes_limit": 100})) == 100
    assert memory.available_memory_bytes(device({})) is None
    assert memory.available_memory_bytes(device(None)) is None
    assert memory.available_memory_bytes(device(RuntimeError("no stats"))) is None


def base_replay(**kwargs):
    return TraceReplay(
        num_envs=3,
        trace_len=4,
        capacity=3 * 4 * 5,  # C = 5
        obs_shape=(2, 6),
        obs_dtype=np.uint8,
        frame_stack=2,
        step_spec={
            "frame_reset": jax.ShapeDtypeStruct((), jnp.bool_),
            "mu": {"mean": jax.ShapeDtypeStruct((3,), jnp.float32)},
        },
        extras_spec=(jax.ShapeDtypeStruct((2,), jnp.float32),),
        **kwargs,
    )


def test_sizes_count_every_array():
    base = base_replay()
    n, c, t = 3, 5, 4
    frames = n * c * t * 6  # uint8, newest frame only
    steps = n * c * t * (1 + 3 * 4)  # frame_reset bool + mu.mean [3] float32
    extras = n * c * 2 * 4
    counters = 2 * 4
    assert base.total_bytes == frames + steps + extras + counters
    assert base.bytes_per_transition == base.total_bytes / (n * c * t)
    prioritized = PrioritizedTraceReplay(base)
    leaves = n * c  # 15 -> a tree of 2 * 16 float32
    extra = 2 * 16 * 4 + leaves * 4 + leaves * 1  # tree, priorities, assigned
    assert prioritized.total_bytes == base.total_bytes + extra
    assert prioritized.bytes_per_transition == prioritized.total_bytes / (n * c * t)


def test_prioritized_replay_checks_its_whole_size():
    size = base_replay().total_bytes
    base = base_replay(memory_limit_bytes=size)  # the storage alone fits exactly
    pattern = r"^prioritized replay capacity 60 transitions needs 0\.0 MiB \(\d+ B/transition\)"
    with pytest.raises(ReplayCapacityError, match=pattern):
        PrioritizedTraceReplay(base)
    PrioritizedTraceReplay(base_replay(memory_limit_bytes=size + 2 * 16 * 4 + 15 * 5))
