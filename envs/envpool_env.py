"""envpool backend: host step loop and the XLA step usable inside `jit` / `lax.scan`."""

from __future__ import annotations

import warnings
from typing import Any

import envpool
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from envs.core import (
    Array,
    EnvSpec,
    TimeStep,
    VecEnv,
    XlaEnvState,
    finalize_step,
    obs_dtype_for,
    reorder_rows,
    reset_timestep,
)


def envpool_ids() -> list[str]:
    return list(envpool.list_all_envs())


def is_atari_id(env_id: str) -> bool:
    """Whether envpool builds `env_id` with its Atari (ALE) adapter."""
    registry = getattr(envpool.registration, "registry", None)
    entry = getattr(registry, "specs", {}).get(env_id)
    if entry is not None:
        return str(entry[0]) == "envpool.atari"
    config = envpool.make_spec(env_id).config
    return {"noop_max", "episodic_life", "stack_num", "use_fire_reset"} <= set(config)


def _has_wide_dtypes(pool: Any) -> bool:
    """True if any action or state array of `pool` is 64-bit."""
    specs = [*pool.spec.action_array_spec.values(), *pool.spec.state_array_spec.values()]
    return any(np.dtype(s.dtype).itemsize > 4 for s in specs)


class EnvpoolVecEnv(VecEnv):
    """envpool in sync mode (batch_size == num_envs), gymnasium API, next-step auto-reset.

    Rows may come back from envpool in completion order; every output is scattered by
    `info["env_id"]` so row i is env i, in host and XLA mode alike.

    `has_xla` is False for tasks with 64-bit action/state arrays (envpool MuJoCo uses float64)
    unless `jax_enable_x64` is on: feeding such a task float32 actions through the XLA
    custom call corrupts memory (measured on envpool 1.2.5).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        seed: int,
        *,
        is_atari: bool,
        reward_clip: bool,
        episodic_life: bool,
        num_threads: int,
        max_episode_steps: int | None,
        fire_reset: bool | None = None,
    ):
        kwargs: dict[str, Any] = {
            "num_envs": num_envs,
            "batch_size": num_envs,
            "num_threads": num_threads,
            "seed": seed,
        }
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        if is_atari:
            # Standard preprocessing comes from envpool's *-v5 defaults (noop 30, skip 4 with
            # max-pool, 84x84 gray, stack 4). Reward clipping is done by us on the raw reward.
            kwargs["episodic_life"] = episodic_life
            kwargs["reward_clip"] = False
            if fire_reset is not None:
                kwargs["use_fire_reset"] = bool(fire_reset)
        with warnings.catch_warnings():
            # envpool builds some Box spaces from float64 bounds; gymnasium warns when casting.
            warnings.filterwarnings("ignore", message=r".*precision lowered by casting")
            pool = envpool.make(env_id, env_type="gymnasium", **kwargs)
            obs_space = pool.observation_space
            act_space = pool.action_space
        self._pool = pool
        config = pool.config
        if not isinstance(obs_space, gymnasium.spaces.Box):
            pool.close()
            hint = "use backend='gymnasium'"
            if env_id.startswith(("MiniGrid-", "BabyAI-")):
                hint += " (with the minigrid package installed: pip install minigrid)"
            raise ValueError(
                f"{env_id}: envpool's observation space {obs_space} is not supported by the "
                f"envpool adapter (array observations only); {hint}"
            )
        if isinstance(act_space, gymnasium.spaces.Discrete):
            discrete, num_actions, action_shape = True, int(act_space.n), ()
            low = high = None
        elif isinstance(act_space, gymnasium.spaces.Box):
            discrete, num_actions, action_shape = False, None, tuple(act_space.shape)
            low = np.asarray(act_space.low, dtype=np.float32)
            high = np.asarray(act_space.high, dtype=np.float32)
        else:
            pool.close()
            raise ValueError(f"{env_id}: unsupported action space {act_space}")
        # The dtype envpool's C++ side expects (int32 for discrete, float32/float64 for Box).
        action_spec = pool.spec.action_array_spec.get("action")
        self._action_dtype = np.dtype(act_space.dtype if action_spec is None else action_spec.dtype)
        self._is_atari = is_atari
        self._episodic_life = bool(is_atari and episodic_life)
        limit = config.get("max_episode_steps")
        spec = EnvSpec(
            env_id=env_id,
            num_envs=num_envs,
            obs_shape=tuple(obs_space.shape),
            obs_dtype=obs_dtype_for(obs_space.dtype),
            discrete=discrete,
            num_actions=num_actions,
            action_shape=action_shape,
            action_low=low,
            action_high=high,
            frame_stack=int(config.get("stack_num", 4)) if is_atari else 1,
            is_atari=is_atari,
            backend="envpool",
            max_episode_steps=None if limit is None else int(limit),
            reward_clip=reward_clip,
            episodic_life=self._episodic_life,
        )
        super().__init__(spec)
        self.has_xla = not _has_wide_dtypes(pool) or bool(jax.config.jax_enable_x64)
        self._xla_fns: tuple[Any, Any, Any, Any] | None = None
        self.last_info: dict[str, Any] = {}

    # ----- helpers shared by host and XLA mode ---------------------------------------------
    def _unpack(self, xp: Any, obs: Any, rew: Any, term: Any, trunc: Any, info: dict) -> tuple:
        env_id = info["env_id"]

        def order(x: Any) -> Any:
            return reorder_rows(xp, x, env_id)

        obs = order(xp.asarray(obs).astype(self.spec.obs_dtype, copy=False))
        raw = order(info["reward"] if self._is_atari else rew)
        real_term = order(info["terminated"]) if self._episodic_life else None
        return obs, raw, order(term), order(trunc), real_term

    def _ordered_info(self, info: dict) -> dict:
        env_id = info["env_id"]
        b = self.spec.num_envs

        def order(x: Any) -> Any:
            if isinstance(x, np.ndarray) and x.ndim >= 1 and x.shape[0] == b:
                return reorder_rows(np, x, env_id)
            return x

        return jax.tree.map(order, info)

    # ----- host mode -----------------------------------------------------------------------
    def _raw_reset(self) -> np.ndarray:
        obs, info = self._pool.reset()
        self.last_info = self._ordered_info(info)
        obs = np.asarray(obs).astype(self.spec.obs_dtype, copy=False)
        return reorder_rows(np, obs, info["env_id"])

    def _raw_step(self, actions: np.ndarray) -> tuple:
        actions = np.ascontiguousarray(actions, dtype=self._action_dtype)
        obs, rew, term, trunc, info = self._pool.step(actions)
        self.last_info = self._ordered_info(info)
        return self._unpack(np, obs, rew, term, trunc, info)

    def close(self) -> None:
        self._pool.close()

    # ----- XLA mode ------------------------------------------------------------------------
    def _xla(self) -> tuple[Any, Any, Any, Any]:
        if not self.has_xla:
            raise RuntimeError(
                f"{self.spec.env_id}: this envpool task has 64-bit arrays; its XLA step needs "
                "jax_enable_x64 (has_xla is False). Use reset()/step() on the host."
            )
        if self._xla_fns is None:
            self._xla_fns = self._pool.xla()
        return self._xla_fns

    def xla_reset(self) -> tuple[XlaEnvState, TimeStep]:
        handle, recv, _, _ = self._xla()
        self._pool.async_reset()
        handle, (obs, _rew, _term, _trunc, info) = recv(handle)
        obs = reorder_rows(jnp, jnp.asarray(obs).astype(self.spec.obs_dtype), info["env_id"])
        b = self.spec.num_envs
        state = XlaEnvState(
            handle=handle,
            prev_done=jnp.zeros((b,), dtype=bool),
            prev_game_over=jnp.zeros((b,), dtype=bool),
        )
        # The host-mode flags are meaningless once the XLA path drives the envs.
        self._prev_done = self._prev_game_over = None
        return state, reset_timestep(jnp, obs)

    def split_xla_state(self, state: XlaEnvState, size: int) -> XlaEnvState:
        """The pool's XLA carry as `size` member carries `[P, N]` (engine.population): the
        opaque handle repeated, the flags split by env."""
        handle = jnp.broadcast_to(state.handle, (size, *state.handle.shape))
        split = lambda x: x.reshape((size, -1, *x.shape[1:]))  # noqa: E731
        return XlaEnvState(handle, split(state.prev_done), split(state.prev_game_over))

    def join_xla_state(self, state: XlaEnvState) -> XlaEnvState:
        merge = lambda x: x.reshape((-1, *x.shape[2:]))  # noqa: E731
        return XlaEnvState(state.handle[0], merge(state.prev_done), merge(state.prev_game_over))

    def xla_step(self, state: XlaEnvState, actions: Array) -> tuple[XlaEnvState, TimeStep]:
        _, _, _, step = self._xla()
        spec = self.spec
        actions = jnp.asarray(actions)
        expected = (spec.num_envs, *spec.action_shape)
        if tuple(actions.shape) != expected:
            raise ValueError(
                f"{spec.env_id}: actions must have shape {expected} "
                f"(num_envs, *action_shape), got {tuple(actions.shape)}"
            )
        if spec.discrete and not jnp.issubdtype(actions.dtype, jnp.integer):
            raise ValueError(
                f"{spec.env_id}: discrete actions must be integers, got dtype {actions.dtype}"
            )
        actions = actions.astype(self._action_dtype)
        handle, (obs, rew, term, trunc, info) = step(state.handle, actions)
        obs, raw, term, trunc, real_term = self._unpack(jnp, obs, rew, term, trunc, info)
        ts = finalize_step(
            jnp,
            obs=obs,
            raw_reward=raw,
            terminated=term,
            truncated=trunc,
            real_termination=real_term,
            prev_done=state.prev_done,
            prev_game_over=state.prev_game_over,
            reward_clip=spec.reward_clip,
        )
        new_state = XlaEnvState(
            handle=handle, prev_done=ts.terminated | ts.truncated, prev_game_over=ts.game_over
        )
        return new_state, ts
