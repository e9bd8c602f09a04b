"""Data parallelism over a 1-D device mesh: the synchronous replacement for Hogwild.

Parameters are replicated on every device; the environments, the replay and every batch
are split along their env/batch axis, one shard per device; gradients are averaged with
`lax.pmean` over the mesh axis `DATA` inside `jax.shard_map`. With `jax.distributed`
initialised, `jax.devices()` spans every process, so the same code runs multi-host: each
process steps its own envpool for its share of the envs and feeds its local devices.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from agents.core.rollout import Rollout

DATA = "data"
POP = "pop"  # the mesh axis a population of learners is split over (engine/population.py)
P = PartitionSpec


def make_mesh(local_devices: int | None = None, axis: str = DATA) -> Mesh:
    """A 1-D mesh over `local_devices` devices of every process (default: all of them).

    In a single process that is simply the first `local_devices` devices. With
    `jax.distributed` initialised the mesh takes as many devices from each process, so it
    spans P·`local_devices` devices in all.
    """
    procs = jax.process_count()
    by_process = [[d for d in jax.devices() if d.process_index == p] for p in range(procs)]
    available = min(len(devs) for devs in by_process)
    n = available if local_devices is None else local_devices
    if n < 1 or n > available:
        platform = jax.devices()[0].platform
        raise ValueError(
            f"--num-devices {n} is not possible: {available} local {platform} device(s) are "
            f"visible; on CPU, fake more with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={max(n, 2)}"
        )
    return Mesh(np.array([d for devs in by_process for d in devs[:n]]), (axis,))


def check_divisible(what: str, value: int, shards: int, unit: str = "devices"):
    if value % shards:
        raise ValueError(f"{what}={value} is not divisible by the number of {unit} ({shards})")


def local_replica(tree):
    """This process's copy of a replicated pytree, on its first local device (no copy)."""
    return jax.tree.map(lambda x: x.addressable_data(0), tree)


def to_global(tree, mesh: Mesh, spec: PartitionSpec):
    """Place per-process data into global arrays sharded by `spec` over the mesh.

    Single process: a device_put that splits the arrays. Several processes: each passes
    its local part (its envs), concatenated across processes along the sharded axis.
    """
    sharding = NamedSharding(mesh, spec)
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, x), tree)


# How an on-policy rollout is laid out over the mesh: split along the env axis. The episode
# statistics stay on the acting device (they are only logged). Each spec is a prefix: it
# applies to every leaf of a pytree field (dict observations, the steps dict, a core state).
ROLLOUT_SPECS = Rollout(
    obs=P(None, DATA),
    steps=P(None, DATA),
    core_state=P(DATA),
    last_obs=P(DATA),
    last_first=P(DATA),
    finished_return=None,
    finished_length=None,
    game_over=None,
)


def _map_rollout(traj: Rollout, fn) -> Rollout:
    trimmed = traj._replace(finished_return=None, finished_length=None, game_over=None)
    return jax.tree.map(
        lambda spec, x: x if spec is None else jax.tree.map(lambda y: fn(spec, y), x),
        ROLLOUT_SPECS,
        trimmed,
        is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None,
    )


def place_rollout(traj: Rollout, mesh: Mesh) -> Rollout:
    """This process's rollout, as global arrays split over the mesh by env."""
    return _map_rollout(traj, lambda spec, x: to_global(x, mesh, spec))


def abstract_rollout(traj: Rollout, mesh: Mesh) -> Rollout:
    """ShapeDtypeStructs of `place_rollout`'s result (for ahead-of-time compilation)."""

    def abstract(spec, x):
        shape = list(x.shape)
        shape[list(spec).index(DATA)] *= jax.process_count()  # every process adds its envs
        return jax.ShapeDtypeStruct(tuple(shape), x.dtype, sharding=NamedSharding(mesh, spec))

    return _map_rollout(traj, abstract)
