"""Device-resident replay of fixed-length traces, for ACER (and later Reactor).

Layout
------
Every env stream owns a ring of ``C`` trace slots of ``T`` steps each, stored env-major:
``[num_envs, C * T, ...]``. Trace ``k`` of env ``e`` covers steps ``[k*T, k*T + T]`` (``T + 1``
steps): its last step is the first step of trace ``k + 1``. One :meth:`TraceReplay.add` writes
one slot for every env from a time-major rollout ``[T, num_envs, ...]``.

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
import math
import types
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax import lax

from replay.memory import check_fits

FRAME_RESET = "frame_reset"


@struct.dataclass
class TraceReplayState:
    """The whole replay contents; a pytree of device arrays.

    Attributes:
      frames: ``[num_envs, C*T, *frame_shape]``; the newest frame of each step's observation
        (the full observation when ``frame_stack == 1``).
      steps: per-step fields, each ``[num_envs, C*T, *field_shape]``.
      extras: per-trace fields stored at each trace's first step, each ``[num_envs, C, ...]``.
      priorities: ``[num_envs, C]`` float32; reserved for prioritized replay (1 on add).
      write_slot: int32 scalar; the slot the next ``add`` writes.
      count: int32 scalar; traces written per env, saturating at ``C``.
    """

    frames: jax.Array
    steps: dict[str, jax.Array]
    extras: dict[str, jax.Array]
    priorities: jax.Array
    write_slot: jax.Array
    count: jax.Array


class TraceBatch(NamedTuple):
    """A batch of traces, time-major.

    Attributes:
      obs: ``[T+1, batch, *obs_shape]`` observations (stacks rebuilt), env obs dtype.
      steps: per-step fields, each ``[T+1, batch, ...]``.
      extras: per-trace fields, each ``[batch, ...]``.
      env_index: ``[batch]`` int32 env stream of each trace.
      slot: ``[batch]`` int32 ring slot of each trace.
      num_valid: int32 scalar; number of valid ``(env, slot)`` pairs sampling drew from (each
        trace had probability ``1 / num_valid`` per draw).
    """

    obs: jax.Array
    steps: dict[str, jax.Array]
    extras: dict[str, jax.Array]
    env_index: jax.Array
    slot: jax.Array
    num_valid: jax.Array


def _as_spec(name: str, spec: Any) -> jax.ShapeDtypeStruct:
    try:
        shape = tuple(int(d) for d in spec.shape)
        dtype = np.dtype(spec.dtype)
    except (AttributeError, TypeError) as err:
        raise TypeError(
            f"spec for {name!r} must have .shape and .dtype (e.g. jax.ShapeDtypeStruct); "
            f"got {spec!r}"
        ) from err
    return jax.ShapeDtypeStruct(shape, dtype)


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


def _check_keys(what: str, got: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    missing = sorted(set(spec) - set(got))
    extra = sorted(set(got) - set(spec))
    if missing or extra:
        raise ValueError(
            f"{what} keys do not match the spec: missing {missing}, unexpected {extra}"
        )


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class TraceReplay:
    """Configuration of a trace replay plus pure functions over :class:`TraceReplayState`.

    Args:
      num_envs: env streams written by each ``add``.
      trace_len: ``T``, steps per trace (each sampled trace has ``T + 1`` steps).
      capacity: transitions over all envs; rounded down to ``C = capacity // (num_envs * T)``
        whole traces per env, which must be at least 3.
      obs_shape: shape of one env's observation, e.g. ``(4, 84, 84)``.
      obs_dtype: dtype of the observation.
      frame_stack: ``F``; when ``> 1`` the observation is ``[F, *frame_shape]`` and only its
        newest frame is stored. ``1`` stores the observation as is.
      step_spec: per-step fields other than obs (shapes exclude the env axis). Needs a bool
        scalar ``"frame_reset"`` when ``frame_stack > 1``; every other field is opaque.
      trace_extras_spec: per-trace fields stored once per trace (e.g. an LSTM state).
      device: where the arrays live; the default device when None.
      memory_limit_bytes: maximum storage; default 80% of the memory available on ``device``.
    """

    num_envs: int
    trace_len: int
    capacity: int
    obs_shape: tuple[int, ...]
    obs_dtype: Any
    frame_stack: int
    step_spec: Mapping[str, jax.ShapeDtypeStruct]
    trace_extras_spec: Mapping[str, jax.ShapeDtypeStruct] | None = None
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
        setf("obs_shape", tuple(int(d) for d in self.obs_shape))
        setf("obs_dtype", np.dtype(self.obs_dtype))
        setf(
            "step_spec",
            types.MappingProxyType({k: _as_spec(k, v) for k, v in self.step_spec.items()}),
        )
        setf(
            "trace_extras_spec",
            types.MappingProxyType(
                {k: _as_spec(k, v) for k, v in (self.trace_extras_spec or {}).items()}
            ),
        )

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
            if reset_spec.shape != () or reset_spec.dtype != np.bool_:
                raise ValueError(
                    f"step_spec[{FRAME_RESET!r}] must be a bool scalar, got shape "
                    f"{reset_spec.shape} dtype {reset_spec.dtype}"
                )
            if t < f - 1:
                raise ValueError(
                    f"trace_len={t} is shorter than the {f - 1} context frames of frame_stack={f}"
                )
        c = self.capacity // (n * t)
        if c < 3:
            raise ValueError(
                f"capacity {self.capacity:,} holds only {c} traces per env; need at least 3 "
                f"(capacity >= 3 traces x {t} steps x {n} envs = {3 * t * n:,})"
            )
        self._check_memory()

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
    def frame_shape(self) -> tuple[int, ...]:
        """Shape of one stored frame (the whole obs when ``frame_stack == 1``)."""
        return self.obs_shape[1:] if self.frame_stack > 1 else self.obs_shape

    @property
    def _context(self) -> int:
        return self.frame_stack - 1

    def _storage_specs(self) -> dict[str, jax.ShapeDtypeStruct]:
        n, c, t = self.num_envs, self.traces_per_env, self.trace_len
        specs = {"frames": jax.ShapeDtypeStruct((n, c * t, *self.frame_shape), self.obs_dtype)}
        for k, s in self.step_spec.items():
            specs[f"steps/{k}"] = jax.ShapeDtypeStruct((n, c * t, *s.shape), s.dtype)
        for k, s in self.trace_extras_spec.items():
            specs[f"extras/{k}"] = jax.ShapeDtypeStruct((n, c, *s.shape), s.dtype)
        specs["priorities"] = jax.ShapeDtypeStruct((n, c), np.float32)
        specs["write_slot"] = jax.ShapeDtypeStruct((), np.int32)
        specs["count"] = jax.ShapeDtypeStruct((), np.int32)
        return specs

    @property
    def total_bytes(self) -> int:
        """Bytes of all arrays in the state."""
        return sum(
            math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in self._storage_specs().values()
        )

    @property
    def bytes_per_transition(self) -> float:
        """Storage bytes per stored transition, counting every array."""
        return self.total_bytes / self.num_transitions

    def _check_memory(self) -> None:
        check_fits(
            self.total_bytes,
            device=self.device,
            limit_bytes=self.memory_limit_bytes,
            what=f"replay capacity {self.capacity:,} transitions",
            note=f"{self.bytes_per_transition:,.0f} B/transition",
        )

    # ------------------------------------------------------------------ state functions

    def init(self) -> TraceReplayState:
        """An empty replay: zero arrays on ``device``."""
        specs = self._storage_specs()

        def zeros(name: str) -> jax.Array:
            return jnp.zeros(specs[name].shape, specs[name].dtype, device=self.device)

        return TraceReplayState(
            frames=zeros("frames"),
            steps={k: zeros(f"steps/{k}") for k in self.step_spec},
            extras={k: zeros(f"extras/{k}") for k in self.trace_extras_spec},
            priorities=zeros("priorities"),
            write_slot=zeros("write_slot"),
            count=zeros("count"),
        )

    def add(
        self,
        state: TraceReplayState,
        obs: jax.Array,
        steps: Mapping[str, jax.Array],
        extras: Mapping[str, jax.Array] | None = None,
    ) -> TraceReplayState:
        """Writes one trace slot for every env from a time-major rollout.

        Args:
          state: the replay state (may be donated).
          obs: ``[T, num_envs, *obs_shape]``; ``obs[t]`` is the observation at step ``t``.
          steps: per-step fields, each ``[T, num_envs, *field_shape]``.
          extras: per-trace fields, each ``[num_envs, *field_shape]``; omit when there are none.

        Returns:
          The new state.
        """
        n, t, c, k = self.num_envs, self.trace_len, self.traces_per_env, self._context
        extras = {} if extras is None else extras
        _check_array("obs", obs, (t, n, *self.obs_shape), self.obs_dtype, "[T, num_envs, *obs]")
        _check_keys("steps", steps, self.step_spec)
        for name, s in self.step_spec.items():
            _check_array(
                f"steps[{name!r}]", steps[name], (t, n, *s.shape), s.dtype, "[T, num_envs, ...]"
            )
        _check_keys("extras", extras, self.trace_extras_spec)
        for name, s in self.trace_extras_spec.items():
            _check_array(
                f"extras[{name!r}]", extras[name], (n, *s.shape), s.dtype, "[num_envs, ...]"
            )

        obs = jnp.asarray(obs, self.obs_dtype)
        slot = state.write_slot
        start = slot * t

        def write_steps(buffer: jax.Array, new: jax.Array) -> jax.Array:
            new = jnp.swapaxes(jnp.asarray(new, buffer.dtype), 0, 1)  # [num_envs, T, ...]
            index = (0, start) + (0,) * (buffer.ndim - 2)
            return lax.dynamic_update_slice(buffer, new, index)

        frames = write_steps(state.frames, obs[:, :, -1] if k > 0 else obs)
        if k > 0:
            # Context of slot 0 (the ring's tail). Only on the first add after init, before
            # any real trace has been written there; later adds leave it as it is.
            tail = frames[:, c * t - k :]
            first_context = obs[0, :, :k]  # the older frames of the first stacked obs
            frames = frames.at[:, c * t - k :].set(jnp.where(state.count == 0, first_context, tail))

        new_steps = {name: write_steps(state.steps[name], steps[name]) for name in self.step_spec}
        new_extras = {}
        for name, buffer in state.extras.items():
            value = jnp.asarray(extras[name], buffer.dtype)[:, None]
            index = (0, slot) + (0,) * (buffer.ndim - 2)
            new_extras[name] = lax.dynamic_update_slice(buffer, value, index)
        priorities = lax.dynamic_update_slice(
            state.priorities, jnp.ones((n, 1), state.priorities.dtype), (0, slot)
        )
        return TraceReplayState(
            frames=frames,
            steps=new_steps,
            extras=new_extras,
            priorities=priorities,
            write_slot=(slot + 1) % c,
            count=jnp.minimum(state.count + 1, c),
        )

    def can_sample(self, state: TraceReplayState) -> jax.Array:
        """Whether at least one trace is valid (``count >= 2``)."""
        return state.count >= 2

    def num_valid_slots(self, state: TraceReplayState) -> jax.Array:
        """Valid slots per env (the same for every env)."""
        c = self.traces_per_env
        full_valid = c - 2 if self._context > 0 else c - 1
        return jnp.where(state.count < c, jnp.maximum(state.count - 1, 0), full_valid).astype(
            jnp.int32
        )

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
        c = self.traces_per_env
        skip_oldest = 1 if self._context > 0 else 0
        return jnp.where(state.count < c, 0, (state.write_slot + skip_oldest) % c).astype(jnp.int32)

    def sample(self, state: TraceReplayState, key: jax.Array, batch_size: int) -> TraceBatch:
        """Draws ``batch_size`` traces uniformly, with replacement, from the valid pairs.

        The caller must make sure :meth:`can_sample` holds; otherwise the result is garbage.
        """
        n, c = self.num_envs, self.traces_per_env
        num_valid = self.num_valid(state)
        draw = jax.random.randint(key, (batch_size,), 0, jnp.maximum(num_valid, 1), jnp.int32)
        env_index = draw % n
        slot = (self._first_valid_slot(state) + draw // n) % c
        return self.gather(state, env_index, slot)

    def gather(self, state: TraceReplayState, env_index: jax.Array, slot: jax.Array) -> TraceBatch:
        """The traces at ``(env_index[i], slot[i])``, rebuilt; no validity check.

        ``num_valid`` of the result is that of the state, as for :meth:`sample`.
        """
        t, c, k = self.trace_len, self.traces_per_env, self._context
        ring = c * t
        env_index = jnp.asarray(env_index, jnp.int32)
        slot = jnp.asarray(slot, jnp.int32)
        first_pos = slot * t  # [B]

        steps_t = jnp.arange(t + 1, dtype=jnp.int32)
        positions = (first_pos[None, :] + steps_t[:, None]) % ring  # [T+1, B]
        env_tb = env_index[None, :]
        steps = {
            name: buffer.at[env_tb, positions].get(mode="promise_in_bounds")
            for name, buffer in state.steps.items()
        }
        extras = {
            name: buffer.at[env_index, slot].get(mode="promise_in_bounds")
            for name, buffer in state.extras.items()
        }
        if k == 0:
            obs = state.frames.at[env_tb, positions].get(mode="promise_in_bounds")
        else:
            # Window w = 0 .. T+k covers steps -k .. T of the trace; output step i is the stack
            # of window positions i .. i+k. The frame at stack position j is window i+j, unless
            # a reset at r in that window is more recent, which replaces older frames by r's.
            window = jnp.arange(t + 1 + k, dtype=jnp.int32)
            window_pos = (first_pos[None, :] - k + window[:, None]) % ring  # [T+1+k, B]
            reset = state.steps[FRAME_RESET].at[env_tb, window_pos].get(mode="promise_in_bounds")
            last_reset = lax.cummax(jnp.where(reset, window[:, None], -1), axis=0)  # [T+1+k, B]
            stack_j = jnp.arange(k + 1, dtype=jnp.int32)
            source = jnp.maximum(
                steps_t[:, None, None] + stack_j[None, None, :], last_reset[k:, :, None]
            )  # [T+1, B, k+1] window index of each stacked frame
            frame_pos = (first_pos[None, :, None] - k + source) % ring
            obs = state.frames.at[env_index[None, :, None], frame_pos].get(mode="promise_in_bounds")
        return TraceBatch(
            obs=obs,
            steps=steps,
            extras=extras,
            env_index=env_index,
            slot=slot,
            num_valid=self.num_valid(state),
        )
