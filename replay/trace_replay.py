"""Device-resident replay of fixed-length traces, sampled uniformly (ACER).

:class:`TraceReplay` is the storage every buffer shares; it samples uniformly.
:class:`~replay.prioritized.PrioritizedTraceReplay` (Reactor) wraps it and samples by priority.

Interface
---------
As in flashbax, a buffer is a frozen configuration object plus pure functions over a state
pytree: ``init() -> state``, ``add(state, obs, steps, extras) -> state``,
``sample(state, key, batch_size) -> ReplaySample`` and
``set_priorities(state, env_index, slot, priorities) -> state``. Both buffers share these
signatures and the result types (:class:`StoredTraces`, :class:`SampleInfo`,
:class:`ReplaySample`), so an agent switches between them with one flag. For the uniform buffer
``set_priorities`` checks its arguments and returns the state unchanged: uniform sampling
ignores priorities by definition.

Observations are an array (``obs_shape``/``obs_dtype``) or any pytree of arrays (``obs_spec``,
e.g. MiniGrid's ``{"direction", "image", "mission"}``): each leaf is stored as is, once per
step, and sampled back with the same structure. Frame stacking is for array observations.

What a step holds is up to the agent: ``step_spec`` maps each field name to a pytree of
``jax.ShapeDtypeStruct`` (a discrete action and a probability vector, a float action vector,
Gaussian statistics ``{"mean": ..., "log_std": ...}``), and ``extras_spec`` is any pytree stored
once per trace (e.g. an LSTM state ``((c, h),)``).

Layout
------
Every env stream owns a ring of ``C`` trace slots of ``T`` steps each, stored env-major:
``[num_envs, C * T, ...]``. Trace ``k`` of env ``e`` covers steps ``[k*T, k*T + T]`` (``T + 1``
steps): its last step is the first step of trace ``k + 1``. One :meth:`TraceReplay.add` writes
one slot for every env from a time-major rollout ``[T, num_envs, ...]``. Every storage array
has the env axis first, so data parallelism splits it over devices
(:meth:`TraceReplay.partition_specs`), each device holding the streams of its own envs.

Validity
--------
* A trace can be sampled once the first step of the following trace has been written, so the
  newest slot (``write_slot - 1``) never is.
* With frame stacking, the ``frame_stack - 1`` frames before a trace are part of its first
  observations. Once the ring is full the oldest slot (``write_slot``) has lost that context to
  the newest write, so it is not sampleable either. Without frame stacking it is.

So, with ``count`` traces written per env: before the ring is full the valid slots are
``0 .. count - 2``; when full, every slot but the newest and (with frame stacking) the oldest.
Sampling is uniform over the valid ``(env, slot)`` pairs, with replacement.

Windows: look-back and look-ahead
---------------------------------
A sample may extend beyond its slot: ``lookback`` steps before it (a multiple of ``T``, so the
window starts at a slot whose ``extras`` were stored) and ``lookahead`` steps after its
``T + 1``. A sample of slot ``k`` then covers steps ``[k*T - lookback, k*T + T + lookahead]``
(``lookback + T + 1 + lookahead`` steps) and its ``extras`` are those of slot
``k - lookback // T``. Uses: n-step targets for every step of a trace (DQN: ``lookahead =
n - 1``), and a burn-in taken from the previous slots with overlapping sequences (R2D2:
slots of 40, ``lookback = 40`` for the burn-in, ``lookahead = 40 + n - 1`` for a learned
sequence of 80 and its n-step bootstrap; every step is learnt in two sequences). Validity
shrinks accordingly: the newest ``1 + lookahead // T`` slots are not sampleable (their
windows reach unwritten steps), and of the oldest, the first ``lookback // T`` are not either
(their windows start before the oldest stored step); with frame stacking one more, as above.

Traces may cross episode boundaries: the agent stores the flags (``first``, discounts, masks)
its losses need to cut them there.

Frames
------
With ``frame_stack = F > 1`` the observation is ``[F, *frame_shape]`` (oldest frame first) and
only its newest frame is stored per step. A stacked observation is rebuilt from the trace's
``T + 1`` frames and the ``F - 1`` frames before it, following envpool's rule: at a step whose
``frame_reset`` flag is set the stack is ``F`` copies of that frame, and frames older than the
most recent reset inside the ``F``-frame window are replaced by the frame at that reset.

The very first trace has no stored predecessor, so the first :meth:`~TraceReplay.add` after
:meth:`~TraceReplay.init` also stores the older ``F - 1`` frames of its first observation in the
context position of slot 0 (the tail of the ring, unwritten until the ring wraps). The first
observation is then rebuilt exactly even if it was not a reset.

All functions are pure and jittable; ``add`` may donate its state
(``jax.jit(replay.add, donate_argnums=0)``). ``sample`` needs a static ``batch_size``
(``jax.jit(replay.sample, static_argnames="batch_size")``).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax import lax
from jax.sharding import PartitionSpec

from replay.memory import SizedBuffer, check_fits

FRAME_RESET = "frame_reset"


@struct.dataclass
class TraceReplayState:
    """The whole replay contents; a pytree of device arrays.

    Attributes:
      frames: ``[num_envs, C*T, *frame_shape]``; the newest frame of each step's observation
        (the full observation when ``frame_stack == 1``). For a pytree observation a pytree
        of that structure, each leaf ``[num_envs, C*T, *leaf_shape]``.
      steps: per-step fields, a dict shaped like ``step_spec`` whose leaves are
        ``[num_envs, C*T, *leaf_shape]``.
      extras: per-trace fields stored at each trace's first step, a pytree shaped like
        ``extras_spec`` whose leaves are ``[num_envs, C, *leaf_shape]`` (None without extras).
      write_slot: int32 scalar; the slot the next ``add`` writes.
      count: int32 scalar; traces written per env, saturating at ``C``.

    :meth:`TraceReplay.partition_specs` returns the same class with PartitionSpec leaves.
    """

    frames: Any
    steps: dict[str, Any]
    extras: Any
    write_slot: jax.Array
    count: jax.Array


class StoredTraces(NamedTuple):
    """A batch of traces, time-major.

    Attributes:
      obs: ``[T+1, B, *obs_shape]`` observations (stacks rebuilt), env obs dtype; for a
        pytree observation a pytree shaped like ``obs_spec`` with leaves ``[T+1, B, ...]``.
      steps: per-step fields shaped like ``step_spec``, each leaf ``[T+1, B, *leaf_shape]``.
      extras: per-trace fields shaped like ``extras_spec``, each leaf ``[B, *leaf_shape]``.
    """

    obs: Any
    steps: Any
    extras: Any


class SampleInfo(NamedTuple):
    """Which traces a batch holds and how they were drawn.

    Attributes:
      env_index: ``[B]`` int32 env stream of each trace.
      slot: ``[B]`` int32 ring slot of each trace; ``(env_index, slot)`` is what
        ``set_priorities`` takes.
      probability: ``[B]`` float32 probability of drawing that trace in one draw:
        ``1 / num_valid`` for uniform sampling, ``epsilon / num_valid + (1 - epsilon) * p_i /
        sum_j p_j`` for prioritized sampling.
      is_weight: ``[B]`` float32 importance weight ``1 / (num_valid * probability)`` divided by
        its maximum over the batch (so in ``(0, 1]``; under ``shard_map`` with the mesh axis
        given, over every device's draws); all ones for uniform sampling.
    """

    env_index: jax.Array
    slot: jax.Array
    probability: jax.Array
    is_weight: jax.Array


class ReplaySample(NamedTuple):
    """What ``sample`` returns, for every buffer: the traces and how they were drawn."""

    traces: StoredTraces
    info: SampleInfo


# ---------------------------------------------------------------------- argument checks
# (the public ones are shared with replay.prioritized)


def _as_spec(name: str, spec: Any) -> jax.ShapeDtypeStruct:
    try:
        shape = tuple(int(d) for d in spec.shape)
        dtype = np.dtype(spec.dtype)
    except (AttributeError, TypeError) as err:
        raise TypeError(
            f"spec for {name} must have .shape and .dtype (e.g. jax.ShapeDtypeStruct); got {spec!r}"
        ) from err
    return jax.ShapeDtypeStruct(shape, dtype)


def _as_spec_tree(name: str, tree: Any) -> Any:
    """``tree`` with every leaf made a ``jax.ShapeDtypeStruct`` (errors name the leaf's path)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, leaf: _as_spec(f"{name}{jax.tree_util.keystr(path)}", leaf), tree
    )


def _canonical_dtype(x: Any) -> np.dtype:
    dtype = x.dtype if hasattr(x, "dtype") else jnp.asarray(x).dtype
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


def _check_array(name: str, x: Any, shape: tuple[int, ...], dtype: np.dtype, layout: str) -> None:
    got_shape = tuple(np.shape(x))
    got_dtype = _canonical_dtype(x)
    want_dtype = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    if got_shape != shape or got_dtype != want_dtype:
        raise ValueError(
            f"{name} has shape {got_shape} and dtype {got_dtype}, expected shape {shape} "
            f"and dtype {want_dtype} ({layout})"
        )


def _match_structure(name: str, tree: Any, spec: Any) -> Any:
    """``tree``'s leaves arranged in ``spec``'s structure.

    Leaves are matched by path (``['mu']['mean']``, ``[0][1]``, ``.c``), so containers that
    flatten alike (a list for a tuple) are accepted. A missing or unexpected leaf raises a
    ValueError that names its path.
    """
    spec_flat, spec_def = jax.tree_util.tree_flatten_with_path(spec)
    tree_flat, tree_def = jax.tree_util.tree_flatten_with_path(tree)
    if tree_def == spec_def:
        return tree
    spec_paths = [jax.tree_util.keystr(path) for path, _ in spec_flat]
    by_path = {jax.tree_util.keystr(path): leaf for path, leaf in tree_flat}
    missing = [name + p for p in spec_paths if p not in by_path]
    unexpected = [name + p for p in by_path if p not in set(spec_paths)]
    if missing or unexpected:
        raise ValueError(
            f"{name} does not match its spec: missing {', '.join(missing) or 'nothing'}; "
            f"unexpected {', '.join(unexpected) or 'nothing'}"
        )
    return jax.tree.unflatten(spec_def, [by_path[p] for p in spec_paths])


def _check_leaves(name: str, tree: Any, spec: Any, leading: tuple[int, ...], layout: str) -> None:
    """Checks every leaf of ``tree`` (structured like ``spec``) against its spec leaf with the
    ``leading`` axes prepended; errors name the leaf's path, e.g. ``steps['mu']['mean']``."""

    def check(path: Any, x: Any, s: jax.ShapeDtypeStruct) -> None:
        leaf_name = name + jax.tree_util.keystr(path)
        _check_array(leaf_name, x, (*leading, *s.shape), s.dtype, layout)

    jax.tree_util.tree_map_with_path(check, tree, spec)


def check_vector(name: str, x: Any, size: int | None, kind: str) -> jax.Array:
    """``x`` as an array after checking it is 1-D (of ``size`` when given) and of ``kind``
    (``"integer"`` or ``"floating"``); the ValueError names ``name``."""
    x = jnp.asarray(x)
    dtype_ok = jnp.issubdtype(x.dtype, jnp.integer if kind == "integer" else jnp.floating)
    if x.ndim != 1 or (size is not None and x.shape[0] != size) or not dtype_ok:
        want = "[B]" if size is None else f"[{size}]"
        raise ValueError(
            f"{name} must be a 1-D {kind} array {want}; got shape {x.shape} and dtype {x.dtype}"
        )
    return x


def check_priority_args(
    env_index: Any, slot: Any, priorities: Any
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The arguments of ``set_priorities``, checked: ``[B]`` integers, ``[B]`` integers,
    ``[B]`` floats."""
    env_index = check_vector("env_index", env_index, None, "integer")
    size = env_index.shape[0]
    slot = check_vector("slot", slot, size, "integer")
    priorities = check_vector("priorities", priorities, size, "floating")
    return env_index, slot, priorities


def _check_range(name: str, x: Any, stop: int) -> None:
    """Integers given as Python or NumPy values (traced ones are not checked) lie in
    [0, stop)."""
    if isinstance(x, jax.Array):
        return
    v = np.asarray(x)
    bad = (v < 0) | (v >= stop)
    if np.any(bad):
        raise ValueError(f"{name} must lie in [0, {stop}), got {v[bad].flat[0]}")


def check_batch_size(batch_size: Any) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")


def data_parallel_spec(axis: str, spec: jax.ShapeDtypeStruct) -> PartitionSpec:
    """``P(axis)`` for an env-major storage array, ``P()`` for a scalar counter."""
    return PartitionSpec(axis) if len(spec.shape) > 0 else PartitionSpec()


# ---------------------------------------------------------------------- the replay


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class TraceReplay(SizedBuffer):
    """Configuration of a uniform trace replay plus pure functions over
    :class:`TraceReplayState`.

    Args:
      num_envs: env streams written by each ``add`` (per device under data parallelism).
      trace_len: ``T``, steps per trace (each sampled trace has ``T + 1`` steps).
      capacity: transitions over all envs; rounded down to ``C = capacity // (num_envs * T)``
        whole traces per env, which must be at least 3.
      obs_shape: shape of one env's observation, e.g. ``(4, 84, 84)``.
      obs_dtype: dtype of the observation.
      obs_spec: instead of ``obs_shape``/``obs_dtype``: a pytree of ShapeDtypeStruct-like
        leaves (``.shape``, ``.dtype``, e.g. ``envs.ArraySpec``) for structured
        observations; a single leaf is the same as giving its shape and dtype.
      frame_stack: ``F``; when ``> 1`` the observation is ``[F, *frame_shape]`` and only its
        newest frame is stored. ``1`` stores the observation as is (always, for a pytree).
      step_spec: per-step fields other than obs: a mapping from field name to a pytree of
        ``jax.ShapeDtypeStruct`` (shapes exclude the time and env axes). Needs a bool scalar
        ``"frame_reset"`` when ``frame_stack > 1``; every other field is opaque.
      extras_spec: per-trace fields stored once per trace (e.g. an LSTM state): any pytree of
        ``jax.ShapeDtypeStruct`` (shapes exclude the env axis), or None.
      lookback: steps before each sampled trace (module docstring, "Windows"), a multiple of
        ``trace_len``; 0 by default.
      lookahead: steps after each sampled trace's ``T + 1``; 0 by default.
      device: where the arrays live; the default device when None.
      memory_limit_bytes: maximum storage; default 80% of the memory available on ``device``.
    """

    num_envs: int
    trace_len: int
    capacity: int
    obs_shape: tuple[int, ...] | None = None
    obs_dtype: Any = None
    obs_spec: Any = None
    frame_stack: int = 1
    step_spec: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    extras_spec: Any = None
    lookback: int = 0
    lookahead: int = 0
    device: jax.Device | None = None
    memory_limit_bytes: int | None = None

    def __post_init__(self) -> None:
        def setf(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("num_envs", "trace_len", "capacity", "frame_stack"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            setf(name, int(value))
        for name in ("lookback", "lookahead"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
            setf(name, int(value))
        if self.lookback % self.trace_len:
            raise ValueError(
                f"lookback={self.lookback} must be a multiple of trace_len={self.trace_len} "
                "(a window starts where a trace's extras were stored)"
            )
        if self.obs_spec is None:
            if self.obs_shape is None or self.obs_dtype is None:
                raise ValueError("TraceReplay needs obs_shape and obs_dtype, or obs_spec")
            setf("obs_spec", jax.ShapeDtypeStruct(tuple(self.obs_shape), self.obs_dtype))
        elif self.obs_shape is not None or self.obs_dtype is not None:
            # Both are set after __post_init__ for array observations, so dataclasses.replace
            # passes both back: accept them when they describe the same array.
            spec, shape, dtype = self.obs_spec, self.obs_shape, self.obs_dtype
            same = (
                shape is not None
                and dtype is not None
                and hasattr(spec, "shape")
                and hasattr(spec, "dtype")
                and tuple(spec.shape) == tuple(shape)
                and np.dtype(spec.dtype) == np.dtype(dtype)
            )
            if not same:
                raise ValueError(
                    "give TraceReplay either obs_spec or obs_shape/obs_dtype, not both"
                )
        setf("obs_spec", _as_spec_tree("obs_spec", self.obs_spec))
        if not jax.tree.leaves(self.obs_spec):
            raise ValueError(f"obs_spec has no arrays: {self.obs_spec!r}")
        if self.pytree_obs:
            if self.frame_stack != 1:
                raise ValueError(
                    f"frame_stack={self.frame_stack} needs an array observation; obs_spec is a "
                    "pytree (store each of its leaves with frame_stack=1)"
                )
        else:
            setf("obs_shape", tuple(self.obs_spec.shape))
            setf("obs_dtype", np.dtype(self.obs_spec.dtype))
        if not isinstance(self.step_spec, Mapping) or not all(
            isinstance(k, str) for k in self.step_spec
        ):
            raise ValueError(
                f"step_spec must be a mapping from field names (str) to pytrees of "
                f"jax.ShapeDtypeStruct; got {self.step_spec!r}"
            )
        setf(
            "step_spec",
            types.MappingProxyType(
                {k: _as_spec_tree(f"step_spec[{k!r}]", v) for k, v in self.step_spec.items()}
            ),
        )
        setf("extras_spec", _as_spec_tree("extras_spec", self.extras_spec))

        n, t, f = self.num_envs, self.trace_len, self.frame_stack
        if f > 1:
            if len(self.obs_shape) < 1 or self.obs_shape[0] != f:
                raise ValueError(
                    f"frame_stack={f} needs obs_shape (frames, ...) with frames={f}; "
                    f"got obs_shape {self.obs_shape}"
                )
            if FRAME_RESET not in self.step_spec:
                raise ValueError(
                    f"frame_stack={f} needs a {FRAME_RESET!r} field in step_spec (bool scalar: "
                    "True where the env's frame stack was refilled, i.e. at a reset)"
                )
            reset_spec = self.step_spec[FRAME_RESET]
            if (
                not isinstance(reset_spec, jax.ShapeDtypeStruct)
                or reset_spec.shape != ()
                or reset_spec.dtype != np.bool_
            ):
                raise ValueError(
                    f"step_spec[{FRAME_RESET!r}] must be a bool scalar jax.ShapeDtypeStruct, "
                    f"got {reset_spec!r}"
                )
        c = self.capacity // (n * t)
        need = 2 + max(self._lost_slots, 1) + self._slots_back + self._slots_ahead
        if c < need:
            raise ValueError(
                f"capacity {self.capacity:,} holds only {c} traces per env; need at least "
                f"{need} (capacity >= {need} traces x {t} steps x {n} envs = {need * t * n:,})"
            )
        check_fits(
            self.total_bytes,
            device=self.device,
            limit_bytes=self.memory_limit_bytes,
            what=f"replay capacity {self.capacity:,} transitions",
            note=f"{self.bytes_per_transition:,.0f} B/transition",
        )

    # ------------------------------------------------------------------ derived sizes

    @property
    def traces_per_env(self) -> int:
        """``C``: ring slots per env."""
        return self.capacity // (self.num_envs * self.trace_len)

    @property
    def num_transitions(self) -> int:
        """Transitions actually stored when full: ``C * T * num_envs``."""
        return self.traces_per_env * self.trace_len * self.num_envs

    @property
    def pytree_obs(self) -> bool:
        """Whether the observation is a pytree (``obs_shape``/``obs_dtype`` are then None)."""
        return not isinstance(self.obs_spec, jax.ShapeDtypeStruct)

    @property
    def frame_shape(self) -> tuple[int, ...]:
        """Shape of one stored frame (the whole obs when ``frame_stack == 1``)."""
        return self.obs_shape[1:] if self.frame_stack > 1 else self.obs_shape

    @property
    def _context(self) -> int:
        return self.frame_stack - 1

    @property
    def _lost_slots(self) -> int:
        """Oldest slots whose context frames a full ring has overwritten: ⌈(F − 1) / T⌉ (one
        when T >= F − 1; a trace shorter than the context loses it to several newer slots)."""
        return -(-self._context // self.trace_len)

    @property
    def _slots_back(self) -> int:
        """Slots before a sampled one that its window starts in."""
        return self.lookback // self.trace_len

    @property
    def _slots_ahead(self) -> int:
        """Slots after the next one that a sampled window reaches into."""
        return self.lookahead // self.trace_len

    @property
    def window_len(self) -> int:
        """Transitions in a sample: ``lookback + T + lookahead`` (it holds one more step)."""
        return self.lookback + self.trace_len + self.lookahead

    def _state_specs(self) -> TraceReplayState:
        """The state's shapes and dtypes: a :class:`TraceReplayState` of ShapeDtypeStructs."""
        n, c, t = self.num_envs, self.traces_per_env, self.trace_len
        sds = jax.ShapeDtypeStruct
        if self.pytree_obs:
            frames = jax.tree.map(lambda s: sds((n, c * t, *s.shape), s.dtype), self.obs_spec)
        else:
            frames = sds((n, c * t, *self.frame_shape), self.obs_dtype)
        return TraceReplayState(
            frames=frames,
            steps=jax.tree.map(lambda s: sds((n, c * t, *s.shape), s.dtype), dict(self.step_spec)),
            extras=jax.tree.map(lambda s: sds((n, c, *s.shape), s.dtype), self.extras_spec),
            write_slot=sds((), np.int32),
            count=sds((), np.int32),
        )

    def partition_specs(self, axis: str) -> TraceReplayState:
        """How the state is laid out for data parallelism over the mesh axis ``axis``.

        Every storage array is split on its leading env axis (``P(axis)``): each device holds
        the streams of its own ``num_envs`` envs (this replay's sizes are per device).
        ``write_slot`` and ``count`` are replicated (``P()``); they are the same on every
        device since every ``add`` writes one slot for every env. The result has the state's
        tree structure, so it can be given to ``jax.shard_map`` as in/out specs.
        """
        return jax.tree.map(lambda s: data_parallel_spec(axis, s), self._state_specs())

    # ------------------------------------------------------------------ state functions

    def init(self) -> TraceReplayState:
        """An empty replay: zero arrays on ``device``."""
        return jax.tree.map(
            lambda s: jnp.zeros(s.shape, s.dtype, device=self.device), self._state_specs()
        )

    def add(
        self,
        state: TraceReplayState,
        obs: jax.Array,
        steps: Mapping[str, Any],
        extras: Any = None,
    ) -> TraceReplayState:
        """Writes one trace slot for every env from a time-major rollout.

        Args:
          state: the replay state (may be donated).
          obs: ``[T, num_envs, *obs_shape]``; ``obs[t]`` is the observation at step ``t``. For
            a pytree observation a pytree shaped like ``obs_spec``, leaves ``[T, num_envs, ...]``.
          steps: per-step fields shaped like ``step_spec``, each leaf
            ``[T, num_envs, *leaf_shape]``.
          extras: per-trace fields shaped like ``extras_spec``, each leaf
            ``[num_envs, *leaf_shape]``; omit when there are none.

        Returns:
          The new state.

        Raises:
          ValueError: naming the path of a missing, unexpected or wrongly shaped field.
        """
        n, t, c, k = self.num_envs, self.trace_len, self.traces_per_env, self._context
        if self.pytree_obs:
            obs = _match_structure("obs", obs, self.obs_spec)
            _check_leaves("obs", obs, self.obs_spec, (t, n), "[T, num_envs, ...]")
        else:
            _check_array("obs", obs, (t, n, *self.obs_shape), self.obs_dtype, "[T, num_envs, *obs]")
        steps = _match_structure("steps", steps, dict(self.step_spec))
        extras = _match_structure("extras", extras, self.extras_spec)
        _check_leaves("steps", steps, dict(self.step_spec), (t, n), "[T, num_envs, ...]")
        _check_leaves("extras", extras, self.extras_spec, (n,), "[num_envs, ...]")

        obs = jax.tree.map(lambda x, s: jnp.asarray(x, s.dtype), obs, self.obs_spec)
        slot = state.write_slot
        start = slot * t

        def write_steps(buffer: jax.Array, new: jax.Array) -> jax.Array:
            new = jnp.swapaxes(jnp.asarray(new, buffer.dtype), 0, 1)  # [num_envs, T, ...]
            index = (0, start) + (0,) * (buffer.ndim - 2)
            return lax.dynamic_update_slice(buffer, new, index)

        def write_extras(buffer: jax.Array, new: jax.Array) -> jax.Array:
            value = jnp.asarray(new, buffer.dtype)[:, None]  # [num_envs, 1, ...]
            index = (0, slot) + (0,) * (buffer.ndim - 2)
            return lax.dynamic_update_slice(buffer, value, index)

        frames = jax.tree.map(write_steps, state.frames, obs[:, :, -1] if k > 0 else obs)
        if k > 0:
            # Context of slot 0 (the ring's tail). Only on the first add after init, before
            # any real trace has been written there; later adds leave it as it is.
            tail = frames[:, c * t - k :]
            first_context = obs[0, :, :k]  # the older frames of the first stacked obs
            frames = frames.at[:, c * t - k :].set(jnp.where(state.count == 0, first_context, tail))

        return TraceReplayState(
            frames=frames,
            steps=jax.tree.map(write_steps, state.steps, steps),
            extras=jax.tree.map(write_extras, state.extras, extras),
            write_slot=(slot + 1) % c,
            count=jnp.minimum(state.count + 1, c),
        )

    def can_sample(self, state: TraceReplayState) -> jax.Array:
        """Whether at least one trace is valid (``count >= 2`` without look-back/ahead)."""
        return self.num_valid_slots(state) >= 1

    def num_valid_slots(self, state: TraceReplayState) -> jax.Array:
        """Valid slots per env (the same for every env)."""
        c = self.traces_per_env
        unusable = 1 + self._slots_ahead + self._slots_back
        full_valid = c - unusable - self._lost_slots
        filling = jnp.maximum(state.count - unusable - self._lost_while_filling(state), 0)
        return jnp.where(state.count < c, filling, full_valid).astype(jnp.int32)

    def _lost_while_filling(self, state: TraceReplayState) -> jax.Array:
        """Before the ring is full, the first slots whose context frames (slot 0's: the ring's
        tail) newer writes have overwritten: none while T >= F − 1."""
        lost = self._lost_slots
        return jnp.clip(state.count - (self.traces_per_env - lost), 0, lost)

    def num_valid(self, state: TraceReplayState) -> jax.Array:
        """Valid ``(env, slot)`` pairs."""
        return self.num_valid_slots(state) * self.num_envs

    def valid_mask(self, state: TraceReplayState) -> jax.Array:
        """``[C]`` bool: which slots may be sampled (the same for every env)."""
        c = self.traces_per_env
        first = self._first_valid_slot(state)
        age = (jnp.arange(c, dtype=jnp.int32) - first) % c
        return age < self.num_valid_slots(state)

    def _first_valid_slot(self, state: TraceReplayState) -> jax.Array:
        c, back = self.traces_per_env, self._slots_back
        full = (state.write_slot + self._lost_slots + back) % c
        filling = back + self._lost_while_filling(state)
        return jnp.where(state.count < c, filling, full).astype(jnp.int32)

    def sample(
        self, state: TraceReplayState, key: jax.Array, batch_size: int, axis_name: str | None = None
    ) -> ReplaySample:
        """Draws ``batch_size`` traces uniformly, with replacement, from the valid pairs.
        ``axis_name`` (the prioritized replay's normalisation axis) changes nothing here.

        Returns:
          The traces and their :class:`SampleInfo`: ``probability = 1 / num_valid`` and
          ``is_weight = 1`` for every draw. The caller must make sure :meth:`can_sample`
          holds; otherwise the traces are garbage.
        """
        check_batch_size(batch_size)
        n, c = self.num_envs, self.traces_per_env
        num_valid = jnp.maximum(self.num_valid(state), 1)
        draw = jax.random.randint(key, (batch_size,), 0, num_valid, jnp.int32)
        env_index = draw % n
        slot = (self._first_valid_slot(state) + draw // n) % c
        probability = jnp.full((batch_size,), 1.0, jnp.float32) / num_valid.astype(jnp.float32)
        info = SampleInfo(env_index, slot, probability, jnp.ones((batch_size,), jnp.float32))
        return ReplaySample(self.gather(state, env_index, slot), info)

    def set_priorities(
        self,
        state: TraceReplayState,
        env_index: jax.Array,
        slot: jax.Array,
        priorities: jax.Array,
    ) -> TraceReplayState:
        """Returns ``state`` unchanged: uniform sampling ignores priorities by definition.

        It exists so that an agent can switch between this buffer and
        :class:`~replay.prioritized.PrioritizedTraceReplay` with one flag; it checks its
        arguments as that one does (``[B]`` integer ``env_index`` and ``slot``, ``[B]`` float
        ``priorities``, from :class:`SampleInfo`) and raises the same ValueErrors.
        """
        check_priority_args(env_index, slot, priorities)
        return state

    def overwrite_steps(
        self,
        state: TraceReplayState,
        field: str,
        env_index: jax.Array,
        start: jax.Array,
        values: Any,
    ) -> TraceReplayState:
        """Replaces what was stored in the per-step field ``field`` at steps ``start_b ..
        start_b + L - 1`` (positions in env stream ``env_index_b``'s ring of ``C * T`` steps,
        wrapping) with ``values``, a pytree shaped like ``step_spec[field]`` with leaves
        ``[L, B, ...]``. For what a learner finds out about stored steps after they were
        stored (SAC's --overwrite-mu: the updated policy's log-probs of the sampled window
        replace the behaviour's); observations, other fields and extras stay as they are.
        When two of the ``B`` windows write one position, either may win."""
        if field not in self.step_spec:
            raise ValueError(
                f"overwrite_steps: no step field {field!r} (have {sorted(self.step_spec)})"
            )
        ring = self.traces_per_env * self.trace_len
        size = check_vector("env_index", env_index, None, "integer").shape[0]
        check_vector("start", start, size, "integer")
        _check_range("env_index", env_index, self.num_envs)
        _check_range("start", start, ring)
        spec = self.step_spec[field]
        values = _match_structure("values", values, spec)
        lead = np.shape(jax.tree.leaves(values)[0])
        if not lead or not 1 <= lead[0] <= ring:
            raise ValueError(
                f"overwrite_steps: values must lead with 1 to {ring} steps [L, B, ...] (one env "
                f"stream's ring), got leaves of shape {lead}"
            )
        length = lead[0]
        _check_leaves("values", values, spec, (length, size), f"[L, B, ...] as steps[{field!r}]")
        pos = (jnp.asarray(start)[None, :] + jnp.arange(length)[:, None]) % ring  # [L, B]
        env = jnp.broadcast_to(jnp.asarray(env_index)[None, :], pos.shape)
        written = jax.tree.map(
            lambda buf, v: buf.at[env, pos].set(jnp.asarray(v, buf.dtype)),
            state.steps[field],
            values,
        )
        return state.replace(steps={**state.steps, field: written})

    def overwrite_extras(
        self, state: TraceReplayState, env_index: jax.Array, slot: jax.Array, values: Any
    ) -> TraceReplayState:
        """Replaces the per-trace extras (e.g. the recurrent state stored with a trace) of ring
        slots ``slot`` ``[M, B]`` of env streams ``env_index`` ``[B]`` with ``values``, a pytree
        shaped like ``extras_spec`` with leaves ``[M, B, ...]`` (R2D2's stored-state refresh,
        SAC's --refresh-stored-state). Steps and observations stay as they are."""
        if self.extras_spec is None:
            raise ValueError("overwrite_extras: this replay stores no per-trace extras")
        size = check_vector("env_index", env_index, None, "integer").shape[0]
        shape, dtype = np.shape(slot), _canonical_dtype(slot)
        if len(shape) != 2 or shape[1] != size or not np.issubdtype(dtype, np.integer):
            raise ValueError(
                f"slot must be an integer array [M, {size}] (M slots for each of the {size} env "
                f"streams); got shape {shape} and dtype {dtype}"
            )
        _check_range("env_index", env_index, self.num_envs)
        _check_range("slot", slot, self.traces_per_env)
        values = _match_structure("values", values, self.extras_spec)
        _check_leaves("values", values, self.extras_spec, shape, "[M, B, ...] as extras_spec")
        env = jnp.broadcast_to(jnp.asarray(env_index)[None, :], jnp.shape(slot))
        written = jax.tree.map(
            lambda buf, v: buf.at[env, slot].set(jnp.asarray(v, buf.dtype)), state.extras, values
        )
        return state.replace(extras=written)

    def gather(
        self, state: TraceReplayState, env_index: jax.Array, slot: jax.Array
    ) -> StoredTraces:
        """The traces at ``(env_index[i], slot[i])`` with their look-back and look-ahead
        (``window_len + 1`` steps), rebuilt; no validity check."""
        t, c, k = self.trace_len, self.traces_per_env, self._context
        ring = c * t
        env_index = jnp.asarray(env_index, jnp.int32)
        slot = jnp.asarray(slot, jnp.int32)
        first_slot = (slot - self._slots_back) % c  # where the window starts
        first_pos = first_slot * t  # [B]
        w = self.window_len

        steps_t = jnp.arange(w + 1, dtype=jnp.int32)
        positions = (first_pos[None, :] + steps_t[:, None]) % ring  # [T+1, B]
        env_tb = env_index[None, :]
        steps = jax.tree.map(
            lambda buffer: buffer.at[env_tb, positions].get(mode="promise_in_bounds"), state.steps
        )
        extras = jax.tree.map(
            lambda buffer: buffer.at[env_index, first_slot].get(mode="promise_in_bounds"),
            state.extras,
        )
        if k == 0:
            obs = jax.tree.map(
                lambda buffer: buffer.at[env_tb, positions].get(mode="promise_in_bounds"),
                state.frames,
            )
        else:
            # Window positions 0 .. W+k cover steps -k .. W of the sample (W = window_len);
            # output step i is the stack of window positions i .. i+k. The frame at stack
            # position j is window i+j, unless a reset at r in that window is more recent,
            # which replaces older frames by r's.
            window = jnp.arange(w + 1 + k, dtype=jnp.int32)
            window_pos = (first_pos[None, :] - k + window[:, None]) % ring  # [W+1+k, B]
            reset = state.steps[FRAME_RESET].at[env_tb, window_pos].get(mode="promise_in_bounds")
            last_reset = lax.cummax(jnp.where(reset, window[:, None], -1), axis=0)  # [W+1+k, B]
            stack_j = jnp.arange(k + 1, dtype=jnp.int32)
            source = jnp.maximum(
                steps_t[:, None, None] + stack_j[None, None, :], last_reset[k:, :, None]
            )  # [W+1, B, k+1] window index of each stacked frame
            frame_pos = (first_pos[None, :, None] - k + source) % ring
            obs = state.frames.at[env_index[None, :, None], frame_pos].get(mode="promise_in_bounds")
        return StoredTraces(obs=obs, steps=steps, extras=extras)
