"""Prioritized sequence replay for the Reactor (Gruslys et al. 2018, arXiv:1704.04651, §3.3).

:class:`PrioritizedTraceReplay` wraps a :class:`~replay.trace_replay.TraceReplay` (composition)
and adds, per trace slot, a stored priority, an ``assigned`` flag and a sum tree over the
``num_envs * C`` slots. Leaf ``env * C + slot`` of the tree holds the sampling priority of trace
``(env, slot)``. It has the uniform replay's interface (``init / add / sample /
set_priorities``) and result types (:class:`~replay.trace_replay.ReplaySample`), so agents
switch between the two with one flag.

Priorities
----------
``state.priorities [num_envs, C]`` stores each slot's priority: the learner's value once
:meth:`~PrioritizedTraceReplay.set_priorities` has set it (``assigned`` True), otherwise the
lazily initialised value (``assigned`` False), or 0 while the slot is the newest, not yet
sampleable one. Invariant, after every function:

    ``tree leaf (env, slot) == priorities[env, slot] if valid_mask[slot] else 0``

so only valid slots can ever be drawn by the tree, and the slot that stops being valid (the one
overwritten, and with frame stacking also the oldest one, which lost its context frames)
drops to 0 in the same ``add``.

Lazy initialisation (paper §3.3)
--------------------------------
A new trace has no priority until the learner has seen it. Its priority is computed once, **at
the moment it becomes valid** (the ``add`` after the one that wrote it, when its last step
exists), rather than when it is written, so that it uses the neighbours' freshest priorities.
For env ``e`` and the slot ``s`` becoming valid, with ``valid`` the valid mask after the add:

* neighbours: the slots ``s - d (mod C)`` for ``d = 1 .. K``, ``K = min(neighbours, C - 1)``,
  that are ``valid`` and ``assigned`` (same env stream, ``d`` traces earlier in time);
  neighbour ``d`` has weight ``w_d = decay ** (d - 1)``;
* if there is at least one: ``p = sum_d w_d * priorities[e, s - d] / sum_d w_d`` over them;
* else, if any valid slot of any env is assigned: the plain mean of the priorities of all
  valid assigned slots;
* else ``1.0``.

The result is clipped to ``[min_priority, max_priority]``; the slot stays ``assigned = False``
until :meth:`~PrioritizedTraceReplay.set_priorities` sets it, and keeps its lazy value
meanwhile (it is not recomputed when neighbours change later). Writing a slot clears its flag
and sets its stored priority to 0. Slots that are no longer valid but not yet overwritten
(frame stacking's oldest slot) keep their stored values but count neither as neighbours nor in
the mean.

Sampling
--------
Each of the ``batch_size`` draws is, with probability ``epsilon``, uniform over the
``num_valid`` valid ``(env, slot)`` pairs and otherwise proportional to priority (sum tree),
so ``P(i) = epsilon / num_valid + (1 - epsilon) * p_i / sum_j p_j``. The importance weight is
``1 / (num_valid * P(i))`` (exponent 1, as in the paper), divided by its maximum over the batch.

``p_i / sum_j p_j`` is computed along the tree path of the draw, so all tree reads happen in
the descent (see :func:`~replay.sum_tree.sum_tree_descend`): a learner step that samples and
updates priorities in one donated ``jit`` then updates the tree in place.

Updates
-------
:meth:`~PrioritizedTraceReplay.set_priorities` identifies traces by ``(env, slot)``. Call
it before the next ``add`` (as in a sample → learn → update loop): an ``add`` in between may
overwrite a sampled slot, and the update would then land on the new trace (or, for a slot that
is no longer valid, be ignored).

Data parallelism
----------------
:meth:`~PrioritizedTraceReplay.partition_specs` splits the priorities, flags and the tree over
devices like the base storage: each device keeps a sum tree over its own envs' slots and
samples from it (the priorities and ``num_valid`` in :class:`SampleInfo` are then those of the
device's share). With equal shards ``1 / (num_valid * P(i))`` is then the weight of the whole
batch's draw against a uniform one over all devices' pairs, and :meth:`sample` given the mesh
axis divides it by the maximum over the whole batch, every device's draws, as on one device:
a maximum per device would scale each device's share of the averaged gradient by its own
factor, and so weight the shards unequally.

Complexity: ``sample`` and ``set_priorities`` are ``O(B log(N C))`` besides building the
traces; ``add`` does ``O(N log(N C))`` tree work plus one ``O(N C)`` masked mean (the fallback
above) next to the base add. Memory: at most ``4 * N * C`` float32 for the tree plus ``N * C``
float32 priorities and ``N * C`` bools, checked against the device's memory together with the
base storage when the replay is constructed.

All functions are pure and jittable: ``jax.jit(r.add, donate_argnums=0)``,
``jax.jit(r.set_priorities, donate_argnums=0)``,
``jax.jit(r.sample, static_argnames="batch_size")``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax import lax

from replay.memory import SizedBuffer, check_fits
from replay.sum_tree import (
    last_occurrence_mask,
    sum_tree_descend,
    sum_tree_init,
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
    check_batch_size,
    check_priority_args,
    data_parallel_spec,
)


@struct.dataclass
class PrioritizedReplayState:
    """State of a :class:`PrioritizedTraceReplay`; a pytree of device arrays.

    Attributes:
      base: the wrapped replay's state (the traces).
      priorities: ``[num_envs, C]`` float32; every slot's stored priority (module docstring).
      tree: ``[2 L]`` float32 sum tree over the ``num_envs * C`` slots (leaf ``env * C + slot``),
        nonzero only at valid slots.
      assigned: ``[num_envs, C]`` bool; True once the learner set the slot's priority.

    :meth:`PrioritizedTraceReplay.partition_specs` returns the same class with PartitionSpec
    leaves.
    """

    base: TraceReplayState
    priorities: jax.Array
    tree: jax.Array
    assigned: jax.Array


def _concrete_float(x: Any) -> float | None:
    """``float(x)`` for a concrete scalar; None for a traced or non-scalar value."""
    try:
        return float(x)
    except (TypeError, jax.errors.ConcretizationTypeError):
        return None


@dataclasses.dataclass(frozen=True, eq=False)
class PrioritizedTraceReplay(SizedBuffer):
    """Prioritized sequence replay over a :class:`TraceReplay`; see the module docstring.

    Args:
      base: the trace replay holding the data.
      epsilon: default probability of a uniform draw (per draw), ``0 <= epsilon <= 1``.
      neighbours: ``K``, how many preceding slots lazy initialisation looks at (``>= 0``).
      decay: weight ratio between neighbours one step apart, ``0 < decay <= 1``.
      min_priority: floor applied to every priority (learner values, NaN ones included, and
        lazy ones), ``> 0`` so a valid slot always keeps a nonzero chance under ``epsilon = 0``.
      max_priority: ceiling applied the same way (also to ``+inf``), to keep the float32 total
        finite and meaningful.
      new_at_max: a slot becoming valid gets the maximum priority of the valid assigned slots
        (1.0 while there is none; Schaul et al. 2016's rule for new transitions) instead of the
        lazy initialisation.
    """

    base: TraceReplay
    epsilon: float = 0.01
    neighbours: int = 8
    decay: float = 0.9
    min_priority: float = 1e-6
    max_priority: float = 1e6
    new_at_max: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.base, TraceReplay):
            raise ValueError(f"base must be a TraceReplay, got {type(self.base).__name__}")
        eps = self.epsilon
        if not (isinstance(eps, int | float) and 0.0 <= eps <= 1.0):
            raise ValueError(f"epsilon must be a number in [0, 1], got {eps!r}")
        k = self.neighbours
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"neighbours must be a non-negative integer, got {k!r}")
        if not (isinstance(self.decay, int | float) and 0.0 < self.decay <= 1.0):
            raise ValueError(f"decay must be in (0, 1], got {self.decay!r}")
        lo, hi = self.min_priority, self.max_priority
        if not (
            isinstance(lo, int | float)
            and isinstance(hi, int | float)
            and math.isfinite(lo)
            and math.isfinite(hi)
            and 0.0 < lo <= hi
        ):
            raise ValueError(
                f"need finite 0 < min_priority <= max_priority, got min_priority={lo!r}, "
                f"max_priority={hi!r}"
            )
        check_fits(
            self.total_bytes,
            device=self.base.device,
            limit_bytes=self.base.memory_limit_bytes,
            what=f"prioritized replay capacity {self.base.capacity:,} transitions",
            note=f"{self.bytes_per_transition:,.0f} B/transition",
        )

    # ------------------------------------------------------------------ sizes and delegates

    @property
    def num_envs(self) -> int:
        """Env streams written by each ``add``."""
        return self.base.num_envs

    @property
    def traces_per_env(self) -> int:
        """``C``: ring slots per env."""
        return self.base.traces_per_env

    @property
    def num_transitions(self) -> int:
        """Transitions stored when full (see :attr:`TraceReplay.num_transitions`)."""
        return self.base.num_transitions

    @property
    def window_len(self) -> int:
        """Transitions in a sample (see :attr:`TraceReplay.window_len`)."""
        return self.base.window_len

    @property
    def num_leaves(self) -> int:
        """Leaves of the sum tree: ``num_envs * C``."""
        return self.num_envs * self.traces_per_env

    def _state_specs(self) -> PrioritizedReplayState:
        """The state's shapes and dtypes, as a state of ShapeDtypeStructs."""
        n, c = self.num_envs, self.traces_per_env
        sds = jax.ShapeDtypeStruct
        return PrioritizedReplayState(
            base=self.base._state_specs(),
            priorities=sds((n, c), np.float32),
            tree=sds((sum_tree_size(self.num_leaves),), np.float32),
            assigned=sds((n, c), np.bool_),
        )

    def partition_specs(self, axis: str) -> PrioritizedReplayState:
        """How the state is laid out for data parallelism over the mesh axis ``axis``.

        The base state as :meth:`TraceReplay.partition_specs` lays it out; ``priorities``,
        ``assigned`` and ``tree`` split ``P(axis)``, so each device keeps the priorities and a
        sum tree of its own envs' slots. Same tree structure as the state.
        """
        return jax.tree.map(lambda s: data_parallel_spec(axis, s), self._state_specs())

    def can_sample(self, state: PrioritizedReplayState) -> jax.Array:
        """Whether at least one trace is valid (see :meth:`TraceReplay.can_sample`)."""
        return self.base.can_sample(state.base)

    def num_valid(self, state: PrioritizedReplayState) -> jax.Array:
        """Valid ``(env, slot)`` pairs."""
        return self.base.num_valid(state.base)

    def valid_mask(self, state: PrioritizedReplayState) -> jax.Array:
        """``[C]`` bool, the same for every env (see :meth:`TraceReplay.valid_mask`)."""
        return self.base.valid_mask(state.base)

    def gather(
        self, state: PrioritizedReplayState, env_index: jax.Array, slot: jax.Array
    ) -> StoredTraces:
        """The traces at ``(env_index[i], slot[i])`` (see :meth:`TraceReplay.gather`)."""
        return self.base.gather(state.base, env_index, slot)

    def _check_state(self, state: Any) -> None:
        if not isinstance(state, PrioritizedReplayState):
            raise ValueError(f"state must be a PrioritizedReplayState, got {type(state).__name__}")
        specs = self._state_specs()
        for name in ("tree", "priorities", "assigned"):
            got, want = getattr(state, name), getattr(specs, name)
            if tuple(np.shape(got)) != want.shape or got.dtype != want.dtype:
                raise ValueError(
                    f"state.{name} has shape {tuple(np.shape(got))} and dtype {got.dtype}, "
                    f"expected {want.shape} and {want.dtype} (does the state belong to this "
                    "replay?)"
                )

    def _first_valid_slot(self, state: PrioritizedReplayState) -> jax.Array:
        # The valid slots are the contiguous block (in ring order) that ends at the slot before
        # the newest one (and before the slots the look-ahead reaches into).
        valid_slots = self.base.num_valid_slots(state.base)
        last = state.base.write_slot - 1 - self.base._slots_ahead
        return (last - valid_slots) % self.traces_per_env

    def _slot_is_valid(self, state: PrioritizedReplayState, slot: jax.Array) -> jax.Array:
        """``valid_mask(state)[slot]`` in ``O(len(slot))`` rather than ``O(C)``."""
        age = (slot - self._first_valid_slot(state)) % self.traces_per_env
        return age < self.base.num_valid_slots(state.base)

    # ------------------------------------------------------------------ state functions

    def init(self) -> PrioritizedReplayState:
        """An empty replay: base zeros, zero priorities, an all-zero tree, nothing assigned."""
        n, c = self.num_envs, self.traces_per_env
        device = self.base.device
        return PrioritizedReplayState(
            base=self.base.init(),
            priorities=jnp.zeros((n, c), jnp.float32, device=device),
            tree=sum_tree_init(self.num_leaves, jnp.float32, device=device),
            assigned=jnp.zeros((n, c), jnp.bool_, device=device),
        )

    def add(
        self,
        state: PrioritizedReplayState,
        obs: jax.Array,
        steps: Mapping[str, Any],
        extras: Any = None,
    ) -> PrioritizedReplayState:
        """Writes one trace per env (:meth:`TraceReplay.add`) and maintains the priorities.

        The written slot ``w`` gets priority 0 and ``assigned = False``; the slot that becomes
        valid (``w - 1``, or ``w - 1 - lookahead // T`` with a look-ahead) gets its lazily
        initialised priority (module docstring); the tree leaves of that slot, of ``w`` and of
        the slot that stops being valid are rewritten from the new valid mask, which covers
        every slot whose validity can change in one add.
        """
        self._check_state(state)
        n, c = self.num_envs, self.traces_per_env
        before = state.base
        base = self.base.add(before, obs, steps, extras)
        w = before.write_slot
        # The slot becoming valid (once enough was written before): the one whose window now
        # ends in the written slot.
        s = (w - 1 - self.base._slots_ahead) % c
        # The slot that stops being valid: the oldest sampleable one, once newer writes reach
        # its context frames (with the ring full, or filling its last ⌈(F − 1) / T⌉ slots).
        lost = (w + self.base._lost_slots + self.base._slots_back) % c
        valid = self.base.valid_mask(base)

        assigned = lax.dynamic_update_slice(state.assigned, jnp.zeros((n, 1), jnp.bool_), (0, w))
        priorities = lax.dynamic_update_slice(
            state.priorities, jnp.zeros((n, 1), state.priorities.dtype), (0, w)
        )
        lazy = self._lazy_priorities(priorities, assigned, valid, s)
        current = lax.dynamic_slice(priorities, (0, s), (n, 1))[:, 0]
        new_s = jnp.where(valid[s], lazy, current)
        priorities = lax.dynamic_update_slice(priorities, new_s[:, None], (0, s))

        # Every slot whose validity can change in one add (a repeat writes the same value).
        slots = jnp.stack([s, w, lost]).astype(jnp.int32)
        leaves = jnp.arange(n, dtype=jnp.int32)[:, None] * c + slots[None, :]
        values = jnp.where(valid[slots][None, :], priorities[:, slots], 0.0)
        tree = sum_tree_set(state.tree, leaves.reshape(-1), values.reshape(-1))
        return PrioritizedReplayState(
            base=base, priorities=priorities, tree=tree, assigned=assigned
        )

    def _lazy_priorities(
        self, priorities: jax.Array, assigned: jax.Array, valid: jax.Array, s: jax.Array
    ) -> jax.Array:
        """``[num_envs]`` lazy priority of slot ``s`` in every env (module docstring)."""
        n, c = self.num_envs, self.traces_per_env
        k = min(self.neighbours, c - 1)
        usable = valid[None, :] & assigned  # [N, C]
        count_all = jnp.sum(usable)
        mean_all = jnp.sum(jnp.where(usable, priorities, 0.0)) / jnp.maximum(count_all, 1)
        fallback = jnp.where(count_all > 0, mean_all, 1.0)
        if self.new_at_max:
            top = jnp.max(jnp.where(usable, priorities, 0.0))
            fallback, k = jnp.where(count_all > 0, top, 1.0), 0
        if k > 0:
            distance = np.arange(1, k + 1)
            weight = jnp.asarray(float(self.decay) ** (distance - 1), jnp.float32)  # [K]
            neighbour = (s - jnp.asarray(distance, jnp.int32)) % c  # [K]
            use = usable[:, neighbour]  # [N, K]
            weight = weight[None, :]  # [1, K], explicit: no rank promotion against [N, K]
            weight_sum = jnp.sum(jnp.where(use, weight, 0.0), axis=1)
            weighted = jnp.sum(jnp.where(use, weight * priorities[:, neighbour], 0.0), axis=1)
            local = weighted / jnp.where(weight_sum > 0, weight_sum, 1.0)
            lazy = jnp.where(jnp.any(use, axis=1), local, fallback)
        else:
            lazy = jnp.broadcast_to(fallback, (n,))
        return jnp.clip(lazy, self.min_priority, self.max_priority).astype(priorities.dtype)

    def sample(
        self,
        state: PrioritizedReplayState,
        key: jax.Array,
        batch_size: int,
        epsilon: float | jax.Array | None = None,
        axis_name: str | None = None,
    ) -> ReplaySample:
        """Draws ``batch_size`` traces with replacement from the ε-mixture (module docstring).

        Args:
          state: the replay state.
          key: a PRNG key.
          batch_size: static number of draws.
          epsilon: probability of a uniform draw; the constructor's ``epsilon`` when None. May
            be a traced scalar.
          axis_name: under ``shard_map``, the data-parallel mesh axis: the weights are then
            divided by their maximum over every device's draws (module docstring, "Data
            parallelism"); None on one device.

        Returns:
          The traces, built by :meth:`TraceReplay.gather`, and their :class:`SampleInfo`:
          ``probability = epsilon / num_valid + (1 - epsilon) * p_i / sum_j p_j`` and
          ``is_weight = 1 / (num_valid * probability)`` over its batch maximum. The caller
          must make sure :meth:`can_sample` holds; otherwise the result is garbage.
        """
        self._check_state(state)
        check_batch_size(batch_size)
        if epsilon is None:
            epsilon = self.epsilon
        if np.ndim(epsilon) != 0:
            raise ValueError(f"epsilon must be a scalar, got shape {np.shape(epsilon)}")
        concrete = _concrete_float(epsilon)
        if concrete is not None and not 0.0 <= concrete <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
        eps = jnp.asarray(epsilon, jnp.float32)
        n, c = self.num_envs, self.traces_per_env
        key_mix, key_uniform, key_tree = jax.random.split(key, 3)

        valid_slots = self.base.num_valid_slots(state.base)
        num_valid = valid_slots * n
        first = self._first_valid_slot(state)
        draw = jax.random.randint(
            key_uniform, (batch_size,), 0, jnp.maximum(num_valid, 1), jnp.int32
        )
        uniform_env, uniform_slot = draw % n, (first + draw // n) % c

        total = sum_tree_total(state.tree)
        u = jax.random.uniform(key_tree, (batch_size,), jnp.float32) * total
        use_uniform = jax.random.uniform(key_mix, (batch_size,), jnp.float32) < eps
        forced = jnp.where(use_uniform, uniform_env * c + uniform_slot, -1)
        # One pass finds the proportional draws and the share p_i / sum_j p_j of every drawn
        # leaf (the uniform draws walk to their leaf), reading the tree nowhere else; see
        # sum_tree_descend on why that keeps a later in-place update from copying the tree.
        leaf, _, share = sum_tree_descend(state.tree, u, forced)
        env_index, slot = leaf // c, leaf % c
        num_valid_f = jnp.maximum(num_valid, 1).astype(jnp.float32)
        probability = eps / num_valid_f + (1.0 - eps) * share
        weight = 1.0 / (num_valid_f * jnp.maximum(probability, jnp.finfo(jnp.float32).tiny))
        top = jnp.max(weight)
        if axis_name is not None:
            top = jax.lax.pmax(top, axis_name)
        is_weight = weight / top
        traces = self.base.gather(state.base, env_index, slot)
        return ReplaySample(traces, SampleInfo(env_index, slot, probability, is_weight))

    def overwrite_steps(
        self, state: PrioritizedReplayState, field: str, env_index, start, values
    ) -> PrioritizedReplayState:
        """:meth:`TraceReplay.overwrite_steps` on the data; priorities stay as they are."""
        return state.replace(
            base=self.base.overwrite_steps(state.base, field, env_index, start, values)
        )

    def overwrite_extras(
        self, state: PrioritizedReplayState, env_index, slot, values
    ) -> PrioritizedReplayState:
        """:meth:`TraceReplay.overwrite_extras` on the data; priorities stay as they are."""
        return state.replace(base=self.base.overwrite_extras(state.base, env_index, slot, values))

    def set_priorities(
        self,
        state: PrioritizedReplayState,
        env_index: jax.Array,
        slot: jax.Array,
        priorities: jax.Array,
    ) -> PrioritizedReplayState:
        """Sets the priorities of sampled traces and marks them assigned.

        Args:
          state: the replay state (may be donated).
          env_index: ``[B]`` integer env streams (``SampleInfo.env_index``).
          slot: ``[B]`` integer slots (``SampleInfo.slot``).
          priorities: ``[B]`` float new priorities (e.g. the learner's TD or total-variation
            signal). NaN and values below ``min_priority`` become ``min_priority``, values above
            ``max_priority`` (``+inf`` too) become ``max_priority``.

        Returns:
          The new state. When a pair repeats, the last one in the batch wins. Pairs that are out
          of range or not valid *now* are ignored: call this before the next :meth:`add`, or a
          slot overwritten in between is skipped once it is no longer valid (and one that
          became valid again with new data would receive the old trace's priority).
        """
        self._check_state(state)
        env_index, slot, priorities = check_priority_args(env_index, slot, priorities)
        n, c = self.num_envs, self.traces_per_env
        lo, hi = self.min_priority, self.max_priority
        value = jnp.nan_to_num(priorities.astype(jnp.float32), nan=lo, posinf=hi, neginf=lo)
        value = jnp.clip(value, lo, hi)

        env_index, slot = env_index.astype(jnp.int32), slot.astype(jnp.int32)
        in_range = (env_index >= 0) & (env_index < n) & (slot >= 0) & (slot < c)
        keep = in_range & self._slot_is_valid(state, slot)
        leaf = jnp.where(keep, env_index * c + slot, -1)
        write = keep & last_occurrence_mask(leaf)
        flat = jnp.where(write, leaf, n * c)  # out of bounds: dropped
        stored = state.priorities.reshape(-1).at[flat].set(value, mode="drop")
        assigned = state.assigned.reshape(-1).at[flat].set(True, mode="drop")
        return PrioritizedReplayState(
            base=state.base,
            priorities=stored.reshape(n, c),
            tree=sum_tree_set(state.tree, leaf, value),
            assigned=assigned.reshape(n, c),
        )
