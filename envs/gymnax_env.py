"""gymnax backend: JAX-native envs stepped on the device (ids `gymnax/<gymnax id>`).

`GymnaxVecEnv` gives a gymnax env the interface of envpool's XLA step (`has_xla`): a pure
`xla_step(state, actions)` usable inside `jit`, `lax.scan` and `vmap`, with the same
TimeStep and next-step auto-reset as the other backends (`envs.core.finalize_step`): the step
after `terminated | truncated` is the fake auto-reset transition (its action ignored, reward
0, `first` True). Unlike envpool's handle, the whole env lives in the state (`GymnaxState`,
every leaf with the env axis first), so it is a value: it can be split by member, copied and
checkpointed. Env k of a vector env seeded `base` draws from `PRNGKey(base + k)`, as the other
backends seed env k with `base + k`. Host mode (`reset` / `step`, for evaluation and video)
runs the same jitted functions on a state kept here.

Protocol notes, where gymnax differs from the reference packages (docs/environments.md):
- MinAtar ids (`gymnax/Breakout-MinAtar`, ...) use sticky actions with p = 0.1 by default, as
  the `minatar` package and the MinAtar paper (Young & Tian 2019): with probability p the env
  repeats the previous action it executed. After a reset that is the no-op (0) here, where
  `minatar` 1.0.15 keeps the previous episode's last action (its `Environment.reset` leaves
  `last_action` as it was): the two differ on an episode's first step, with probability p.
  gymnax's games have none of their own.
- gymnax caps MinAtar episodes at 1,000 steps (its `max_steps_in_episode`); the `minatar`
  package has no cap. Here that cap is lifted to 100,000 steps by default (a truncation, never
  reached by the paper's agents) unless `max_episode_steps` says otherwise. Freeway keeps
  gymnax's 2,500 steps, its game clock: a truncation here, a termination in `minatar`.
- Observations: MinAtar's channels as bool `[10, 10, C]`, like the `minatar` package; classic
  control as float32 vectors. Difficulty ramping is gymnax's (`ramping=True`, as MinAtar).
- Action sets: `gymnax/<Game>-MinAtar` has the game's minimal action set (3-6 actions, as
  `minatar`'s `-v1` ids), `gymnax/<Game>-MinAtar-full` all 6 of MinAtar's actions (no-op,
  left, up, right, down, fire; those a game ignores are no-ops), as `minatar`'s `-v0` ids and
  the MinAtar paper's runs. The set changes what an agent explores over and what a uniform
  random policy scores, so the two ids are two protocols.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs.core import (
    EnvSpec,
    TimeStep,
    VecEnv,
    finalize_step,
    obs_dtype_for,
    reset_timestep,
    shared_jit,
    spec_key,
)

PREFIX = "gymnax/"
MINATAR_STICKY = 0.1
MINATAR_MAX_STEPS = 100_000
GYMNAX_MINATAR_CAP = 1_000  # gymnax's generic MinAtar episode cap (Freeway has its own 2,500)
FULL_ACTIONS = "-full"  # gymnax/<Game>-MinAtar-full: all 6 MinAtar actions (module docstring)


class GymnaxState(NamedTuple):
    """The carry of `GymnaxVecEnv.xla_step`: leaves `[N, ...]` (one row per env)."""

    env_state: Any  # gymnax's EnvState per env
    key: jax.Array  # [N, 2] each env's RNG
    last_action: jax.Array  # [N] the action last executed (sticky actions)
    prev_done: jax.Array  # [N] the last step's terminated | truncated
    prev_game_over: jax.Array  # [N]


@functools.cache
def gymnax_names() -> tuple[str, ...]:
    """gymnax's registered env names (without the prefix), and each MinAtar game's
    full-action-set name (`<Game>-MinAtar-full`)."""
    import gymnax

    names = tuple(gymnax.registered_envs)
    return names + tuple(name + FULL_ACTIONS for name in names if name.endswith("-MinAtar"))


def gymnax_ids() -> list[str]:
    return [PREFIX + name for name in gymnax_names()]


def is_minatar(env_id: str) -> bool:
    return env_id.removesuffix(FULL_ACTIONS).endswith("-MinAtar")


class GymnaxVecEnv(VecEnv):
    """`num_envs` copies of a gymnax env, vmapped (module docstring)."""

    has_xla = True
    pure_xla = True

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        seed: int,
        *,
        max_episode_steps: int | None = None,
        sticky_action_prob: float | None = None,
        reward_clip: bool = False,
    ):
        import gymnax

        name = env_id.removeprefix(PREFIX)
        if name not in gymnax_names():
            raise ValueError(f"unknown gymnax environment {env_id!r}")
        minatar = is_minatar(name)
        base = name.removesuffix(FULL_ACTIONS) if minatar else name
        kwargs = {"use_minimal_action_set": False} if base != name else {}
        env, params = gymnax.make(base, **kwargs)
        lift = minatar and params.max_steps_in_episode == GYMNAX_MINATAR_CAP
        steps = max_episode_steps or (MINATAR_MAX_STEPS if lift else None)
        if steps is not None:
            params = params.replace(max_steps_in_episode=int(steps))
        default = MINATAR_STICKY if minatar else 0.0
        sticky = default if sticky_action_prob is None else float(sticky_action_prob)
        if not 0.0 <= sticky < 1.0:
            raise ValueError(f"sticky_action_prob must be in [0, 1), got {sticky}")
        self._env, self._params, self.sticky = env, params, sticky
        obs_space, act_space = env.observation_space(params), env.action_space(params)
        obs_dtype = np.dtype(bool) if minatar else obs_dtype_for(np.dtype(obs_space.dtype))
        discrete = hasattr(act_space, "n")
        shape = () if discrete else tuple(act_space.shape or (1,))

        def bound(x):
            return None if discrete else np.broadcast_to(np.asarray(x, np.float32), shape)

        spec = EnvSpec(
            env_id=env_id,
            num_envs=num_envs,
            obs_shape=tuple(obs_space.shape),
            obs_dtype=obs_dtype,
            discrete=discrete,
            num_actions=int(act_space.n) if discrete else None,
            action_shape=shape,
            action_low=bound(getattr(act_space, "low", None)),
            action_high=bound(getattr(act_space, "high", None)),
            frame_stack=1,
            is_atari=False,
            backend="gymnax",
            max_episode_steps=int(params.max_steps_in_episode),
            reward_clip=reward_clip,
        )
        super().__init__(spec)
        self._seed = int(seed)
        self._reset_jit = shared_jit(self, "reset", self.xla_reset_from)
        self._step_jit = shared_jit(self, "step", self.xla_step)
        self._state: GymnaxState | None = None

    @property
    def program_key(self) -> tuple:
        """Equal for gymnax envs whose steps are the same function (`VecEnv.program_key`):
        the game, its step cap and env count (the spec) and the sticky-action probability."""
        return (type(self).__name__, spec_key(self.spec), self.sticky)

    # ----- device mode ---------------------------------------------------------------------
    def _obs(self, obs):
        return obs.astype(self.spec.obs_dtype)

    def xla_reset_from(self, seed) -> tuple[GymnaxState, TimeStep]:
        """Pure: every env reset from the base seed `seed` (env i from `seed + i`)."""
        n = self.spec.num_envs
        keys = jax.vmap(jax.random.PRNGKey)(seed + jnp.arange(n, dtype=jnp.int32))
        split = jax.vmap(jax.random.split)(keys)
        obs, env_state = jax.vmap(self._env.reset_env, in_axes=(0, None))(split[:, 1], self._params)
        false = jnp.zeros((n,), bool)
        action = jnp.zeros((n, *self.spec.action_shape), self._action_dtype)
        # Strongly typed leaves: some gymnax states start weakly typed (Freeway's `pos`), and
        # a step's output state is not, so a jitted step would compile twice.
        env_state = jax.tree.map(lambda x: jax.lax.convert_element_type(x, x.dtype), env_state)
        state = GymnaxState(env_state, split[:, 0], action, false, false)
        return state, reset_timestep(jnp, self._obs(obs))

    def xla_reset(self) -> tuple[GymnaxState, TimeStep]:
        return self._reset_jit(np.int32(self._seed))

    @property
    def _action_dtype(self):
        return jnp.int32 if self.spec.discrete else jnp.float32

    def _one(self, key, env_state, action, last_action, prev_done):
        """One env's raw step: the fake auto-reset transition after an episode end, else a
        (sticky) step. Returns the next key, env state, executed action, obs, reward and the
        terminated / truncated flags."""
        key, k_sticky, k_step, k_reset = jax.random.split(key, 4)
        if self.sticky > 0:
            repeat = jax.random.uniform(k_sticky) < self.sticky
            action = jnp.where(repeat, last_action, action)
        obs_s, state_s, reward, terminated, _ = self._env.step_env(
            k_step, env_state, action, self._params
        )
        truncated = self._env.is_truncated(state_s, self._params) & ~terminated
        obs_r, state_r = self._env.reset_env(k_reset, self._params)

        def pick(reset, stepped):
            return jnp.where(prev_done, reset, stepped)

        env_state = jax.tree.map(pick, state_r, state_s)
        obs = pick(obs_r, obs_s)
        executed = jnp.where(prev_done, jnp.zeros_like(action), action)
        reward = jnp.where(prev_done, 0.0, jnp.asarray(reward, jnp.float32))
        terminated = jnp.where(prev_done, False, terminated)
        truncated = jnp.where(prev_done, False, truncated)
        return key, env_state, executed, obs, reward, terminated, truncated

    def xla_step(self, state: GymnaxState, actions) -> tuple[GymnaxState, TimeStep]:
        """Pure: step every env with `actions` (`[N]` ints or `[N, *action_shape]`)."""
        actions = jnp.asarray(actions).astype(self._action_dtype)
        key, env_state, executed, obs, raw, term, trunc = jax.vmap(self._one)(
            state.key, state.env_state, actions, state.last_action, state.prev_done
        )
        ts = finalize_step(
            jnp,
            obs=self._obs(obs),
            raw_reward=raw,
            terminated=term,
            truncated=trunc,
            real_termination=None,
            prev_done=state.prev_done,
            prev_game_over=state.prev_game_over,
            reward_clip=self.spec.reward_clip,
        )
        done = ts.terminated | ts.truncated
        return GymnaxState(env_state, key, executed, done, ts.game_over), ts

    def split_xla_state(self, state: GymnaxState, size: int) -> GymnaxState:
        """`[P·N, ...]` -> `[P, N, ...]` (a population's members, engine.population)."""
        return jax.tree.map(lambda x: x.reshape((size, -1, *x.shape[1:])), state)

    def join_xla_state(self, state: GymnaxState) -> GymnaxState:
        return jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), state)

    # ----- host mode -----------------------------------------------------------------------
    def reset(self) -> TimeStep:
        self._state, ts = self._reset_jit(np.int32(self._seed))
        return jax.tree.map(np.asarray, ts)

    def step(self, actions) -> TimeStep:
        if self._state is None:
            raise RuntimeError("VecEnv.step() called before reset()")
        actions = self.check_actions(actions)
        self._state, ts = self._step_jit(self._state, actions)
        return jax.tree.map(np.asarray, ts)
