"""Backend-independent types and the step post-processing shared by every backend.

Both backends (envpool, gymnasium) reduce one raw env step to the same handful of arrays and
hand them to `finalize_step`, which is written once against an array namespace (`numpy` for
the host loop, `jax.numpy` inside `jit`). That is what makes the host and XLA paths give
bit-identical `TimeStep`s, and the two backends identical semantics.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

import jax
import numpy as np

Array = jax.Array | np.ndarray


class TimeStep(NamedTuple):
    """One batched env transition result, rows ordered by env index (row i is env i).

    Fields (all with leading batch dim B):
      obs: [B, *obs_shape]; uint8 [B, 4, 84, 84] for Atari, float32 for vector envs.
      reward: [B] float32 training reward, `clip(raw_reward, -1, 1)` when reward clipping is on.
      raw_reward: [B] float32 unclipped env reward (Atari: envpool's `info["reward"]`), for
        logging returns.
      terminated: [B] bool, MDP termination. Includes life loss when episodic life is on.
      truncated: [B] bool, time-limit truncation. Never True together with `terminated`.
      first: [B] bool, `obs` starts a (life-)episode: True after `reset()` and on the step
        after any `terminated | truncated`. That step is the fake auto-reset transition: its
        action was ignored, its reward is 0 and both flags are False.
      game_over: [B] bool, a full game ended at this step (a real termination, including the
        loss of the last life, or a truncation). Use it to end return tracking.
      frame_reset: [B] bool, the frame stack was refilled at this obs (a game reset). Measured
        on envpool 1.2.5 Atari: at a game reset all 4 frames are copies of the first frame;
        a life-loss "reset" (episodic life) does NOT refill the stack, it pushes a single new
        frame like an ordinary step (and keeps `elapsed_step` and `lives`). So
        `frame_reset` is True after `reset()` and on the step after `game_over`, but not on
        the step after a life loss; there `first` is True and `frame_reset` is False. For
        non-Atari envs (no frame stack) it equals `first`.
    """

    obs: Array
    reward: Array
    raw_reward: Array
    terminated: Array
    truncated: Array
    first: Array
    game_over: Array
    frame_reset: Array


class XlaEnvState(NamedTuple):
    """Carry of the envpool XLA step (a pytree of jnp arrays).

    `handle` is envpool's opaque handle. The env itself lives on the host, so this state is
    not a value that can be replayed: thread it linearly (each `xla_step` advances the envs).
    `prev_done` is the previous step's `terminated | truncated` (the next obs is `first`),
    `prev_game_over` the previous step's `game_over` (the next obs refills the frame stack).
    """

    handle: Array
    prev_done: Array
    prev_game_over: Array


@dataclass(frozen=True, eq=False)
class EnvSpec:
    """Static description of a vectorised env.

    `eq=False`: specs compare and hash by identity (they hold numpy arrays), so one can be
    closed over or passed as a static argument to `jit` without hashing arrays.
    """

    env_id: str
    num_envs: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    discrete: bool
    num_actions: int | None
    action_shape: tuple[int, ...]  # () for discrete
    action_low: np.ndarray | None
    action_high: np.ndarray | None
    frame_stack: int  # 4 for Atari, 1 otherwise
    is_atari: bool
    backend: str  # "envpool" or "gymnasium"
    max_episode_steps: int | None
    reward_clip: bool = False
    episodic_life: bool = False


def obs_dtype_for(dtype: Any) -> np.dtype:
    """The dtype we hand out for a backend observation dtype (floats become float32)."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return np.dtype(np.float32)
    if np.issubdtype(dtype, np.signedinteger) and dtype.itemsize > 4:
        return np.dtype(np.int32)
    return dtype


def reorder_rows(xp: ModuleType, x: Array, env_id: Array) -> Array:
    """Scatter rows so that row `env_id[k]` of the result is row k of `x`.

    numpy: rows already in order (always the case with envpool in sync mode, so far) are
    returned without a copy; envpool hands out fresh arrays on every step, so this is safe.
    """
    if xp is np:
        env_id = np.asarray(env_id)
        if np.array_equal(env_id, np.arange(env_id.shape[0])):
            return x
        out = np.empty_like(x)
        out[env_id] = x
        return out
    return xp.zeros_like(x).at[env_id].set(x)


def reset_timestep(xp: ModuleType, obs: Array) -> TimeStep:
    """The TimeStep of a full reset: every row is `first` and refills its frame stack."""
    b = obs.shape[0]
    zeros = xp.zeros((b,), dtype=xp.float32)
    false = xp.zeros((b,), dtype=bool)
    true = xp.ones((b,), dtype=bool)
    return TimeStep(
        obs=obs,
        reward=zeros,
        raw_reward=zeros,
        terminated=false,
        truncated=false,
        first=true,
        game_over=false,
        frame_reset=true,
    )


def finalize_step(
    xp: ModuleType,
    *,
    obs: Array,
    raw_reward: Array,
    terminated: Array,
    truncated: Array,
    real_termination: Array | None,
    prev_done: Array,
    prev_game_over: Array,
    reward_clip: bool,
) -> TimeStep:
    """Build a TimeStep from one raw step whose rows are already in env order.

    Args:
      xp: `numpy` or `jax.numpy`.
      obs: observations, already cast to the spec dtype.
      raw_reward: unclipped reward.
      terminated, truncated: the backend's flags.
      real_termination: for episodic-life Atari, whether a termination is a real game over
        (envpool's `info["terminated"]`); None when every termination ends the game.
      prev_done, prev_game_over: the previous step's `terminated | truncated` and `game_over`.
      reward_clip: clip the training reward to [-1, 1].
    """
    terminated = xp.asarray(terminated).astype(bool)
    truncated = xp.asarray(truncated).astype(bool)
    # A real termination wins over a simultaneous time limit (gymnasium can report both).
    truncated = truncated & ~terminated
    first = xp.asarray(prev_done).astype(bool)
    raw = xp.asarray(raw_reward).astype(xp.float32)
    # The auto-reset step is fake: its reward is 0 by construction (envpool already does so).
    raw = xp.where(first, xp.float32(0.0), raw)
    # XLA:CPU runs with subnormals flushed to zero (a reward of 1e-45 compares and clips as 0
    # inside `jit`, but not in NumPy). Flush them here, explicitly, so both paths agree bit for
    # bit; no env reward is that small on purpose.
    raw = xp.where(xp.abs(raw) < xp.float32(np.finfo(np.float32).tiny), xp.float32(0.0), raw)
    reward = xp.clip(raw, xp.float32(-1.0), xp.float32(1.0)) if reward_clip else raw
    if real_termination is None:
        game_over = terminated | truncated
    else:
        game_over = truncated | (terminated & (xp.asarray(real_termination) != 0))
    return TimeStep(
        obs=obs,
        reward=reward,
        raw_reward=raw,
        terminated=terminated,
        truncated=truncated,
        first=first,
        game_over=game_over,
        frame_reset=xp.asarray(prev_game_over).astype(bool),
    )


class VecEnv:
    """A batch of `spec.num_envs` envs with next-step auto-reset, behind one interface.

    Host mode: `reset()` then `step(actions)`, numpy in and out. XLA mode (envpool only,
    `has_xla`): `xla_reset()` on the host, then the pure `xla_step(state, actions)` inside
    `jit` / `lax.scan`. Use one mode per instance: both drive the same underlying envs.
    """

    spec: EnvSpec
    has_xla: bool = False

    def __init__(self, spec: EnvSpec):
        self.spec = spec
        self._prev_done: np.ndarray | None = None
        self._prev_game_over: np.ndarray | None = None

    # ----- backend hooks -------------------------------------------------------------------
    def _raw_reset(self) -> np.ndarray:
        """Reset every env; return obs in env order, cast to the spec dtype."""
        raise NotImplementedError

    def _raw_step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Step every env; return (obs, raw_reward, terminated, truncated, real_termination)
        with rows in env order."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the backend's resources."""

    # ----- host mode -----------------------------------------------------------------------
    def reset(self) -> TimeStep:
        """Reset every env; the returned TimeStep has `first = frame_reset = True`."""
        obs = self._raw_reset()
        b = self.spec.num_envs
        self._prev_done = np.zeros((b,), dtype=bool)
        self._prev_game_over = np.zeros((b,), dtype=bool)
        return reset_timestep(np, obs)

    def step(self, actions: np.ndarray) -> TimeStep:
        """Step every env with `actions` ([B] ints for discrete, [B, *action_shape])."""
        if self._prev_done is None or self._prev_game_over is None:
            raise RuntimeError("VecEnv.step() called before reset()")
        actions = self.check_actions(actions)
        obs, raw, term, trunc, real_term = self._raw_step(actions)
        ts = finalize_step(
            np,
            obs=obs,
            raw_reward=raw,
            terminated=term,
            truncated=trunc,
            real_termination=real_term,
            prev_done=self._prev_done,
            prev_game_over=self._prev_game_over,
            reward_clip=self.spec.reward_clip,
        )
        self._prev_done = ts.terminated | ts.truncated
        self._prev_game_over = ts.game_over
        return ts

    def check_actions(self, actions: Any) -> np.ndarray:
        """Validate a host action batch; return it as a numpy array (dtype not yet cast)."""
        spec = self.spec
        actions = np.asarray(actions)
        expected = (spec.num_envs, *spec.action_shape)
        if actions.shape != expected:
            raise ValueError(
                f"{spec.env_id}: actions must have shape {expected} "
                f"(num_envs, *action_shape), got {actions.shape}"
            )
        if spec.discrete:
            if not np.issubdtype(actions.dtype, np.integer):
                raise ValueError(
                    f"{spec.env_id}: discrete actions must be integers, got dtype {actions.dtype}"
                )
            assert spec.num_actions is not None
            if actions.size and (actions.min() < 0 or actions.max() >= spec.num_actions):
                raise ValueError(
                    f"{spec.env_id}: actions must lie in [0, {spec.num_actions}), "
                    f"got range [{actions.min()}, {actions.max()}]"
                )
        elif not (
            np.issubdtype(actions.dtype, np.floating) or np.issubdtype(actions.dtype, np.integer)
        ):
            raise ValueError(
                f"{spec.env_id}: continuous actions must be numeric, got dtype {actions.dtype}"
            )
        return actions

    # ----- XLA mode ------------------------------------------------------------------------
    def xla_reset(self) -> tuple[XlaEnvState, TimeStep]:
        """Reset on the host and return the XLA carry and the reset TimeStep (jnp arrays)."""
        raise RuntimeError(
            f"{self.spec.env_id}: the {self.spec.backend} backend has no XLA step "
            "(has_xla is False); use reset()/step() on the host"
        )

    def xla_step(self, state: XlaEnvState, actions: Array) -> tuple[XlaEnvState, TimeStep]:
        """Pure, jittable env step (usable inside `lax.scan`)."""
        raise RuntimeError(
            f"{self.spec.env_id}: the {self.spec.backend} backend has no XLA step "
            "(has_xla is False); use reset()/step() on the host"
        )

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        s = self.spec
        return (
            f"{type(self).__name__}({s.env_id!r}, num_envs={s.num_envs}, backend={s.backend!r}, "
            f"reward_clip={s.reward_clip}, episodic_life={s.episodic_life})"
        )
