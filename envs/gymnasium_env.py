"""gymnasium fallback backend: a synchronous vector env with next-step auto-reset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from envs.core import EnvSpec, VecEnv
from envs.spaces import space_converter
from envs.text import DEFAULT_MISSION_LENGTH


def _register_minigrid() -> None:
    try:
        import minigrid  # noqa: F401  (registers its ids on import)
    except ImportError:
        pass


def _register_minatar() -> None:
    if "MinAtar/Breakout-v1" in gymnasium.registry:
        return
    try:  # minatar registers through a gymnasium plugin hook that gymnasium 1.x never calls
        from minatar.gym import register_envs
    except ImportError:
        return
    register_envs()


# The packages that register more gymnasium ids when installed, by the prefixes of their ids.
# Each is imported only when an id asks for it: minatar imports seaborn, 2.3 s of every
# process start that would not use it.
_OPTIONAL_ENVS = (
    (("MiniGrid-", "BabyAI-"), _register_minigrid),
    (("MinAtar/",), _register_minatar),
)


def register_optional_envs(env_id: str | None = None) -> None:
    """Import the installed packages that register more gymnasium ids: `minigrid`
    (`MiniGrid-*`, `BabyAI-*`) and `minatar` (`MinAtar/<Game>-v0|v1`: Asterix, Breakout,
    Freeway, Seaquest, SpaceInvaders; v1 has the game's minimal action set). With `env_id`,
    only the package whose prefix it has (none for other ids)."""
    for prefixes, register in _OPTIONAL_ENVS:
        if env_id is None or env_id.startswith(prefixes):
            register()


def gymnasium_ids(env_id: str | None = None) -> list[str]:
    """Every registered gymnasium id; with `env_id`, after registering only its package
    (`register_optional_envs`)."""
    register_optional_envs(env_id)
    return list(gymnasium.registry.keys())


class GymnasiumVecEnv(VecEnv):
    """`gymnasium.make_vec(..., vectorization_mode="sync")` with `AutoresetMode.NEXT_STEP`.

    That is envpool's convention: the step that ends an episode returns the final obs with
    terminated/truncated set, the next step ignores its action and returns the reset obs with
    reward 0 and both flags False. The seed is used at the first reset only (env i gets
    seed + i); later resets continue the envs' generators, as envpool does.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        seed: int,
        *,
        reward_clip: bool,
        max_episode_steps: int | None,
        obs_keys: Sequence[str] | None = None,
        mission_length: int = DEFAULT_MISSION_LENGTH,
    ):
        register_optional_envs(env_id)
        make_kwargs: dict[str, Any] = {}
        if max_episode_steps is not None:
            make_kwargs["max_episode_steps"] = max_episode_steps
        venv = gymnasium.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP},
            **make_kwargs,
        )
        self._venv = venv
        mode = venv.metadata.get("autoreset_mode")
        if mode != AutoresetMode.NEXT_STEP:
            venv.close()
            raise RuntimeError(f"{env_id}: expected NEXT_STEP auto-reset, got {mode}")
        obs_space = venv.single_observation_space
        act_space = venv.single_action_space
        try:
            obs_spec, self._convert_obs = space_converter(
                obs_space, env_id, mission_length=mission_length, obs_keys=obs_keys
            )
        except ValueError:
            venv.close()
            raise
        if isinstance(act_space, gymnasium.spaces.Discrete):
            discrete, num_actions, action_shape = True, int(act_space.n), ()
            low = high = None
            self._action_offset = int(act_space.start)
        elif isinstance(act_space, gymnasium.spaces.Box):
            discrete, num_actions, action_shape = False, None, tuple(act_space.shape)
            low = np.asarray(act_space.low, dtype=np.float32)
            high = np.asarray(act_space.high, dtype=np.float32)
            self._action_offset = 0
        else:
            venv.close()
            raise ValueError(f"{env_id}: unsupported action space {act_space}")
        self._action_dtype = np.dtype(act_space.dtype)
        if max_episode_steps is None:
            registered = gymnasium.spec(env_id).max_episode_steps
            if registered is None:  # MiniGrid keeps its own limit (and reports truncation)
                registered = getattr(venv.envs[0].unwrapped, "max_steps", None)
            max_episode_steps = None if registered is None else int(registered)
        spec = EnvSpec(
            env_id=env_id,
            num_envs=num_envs,
            obs_shape=None,
            obs_dtype=None,
            discrete=discrete,
            num_actions=num_actions,
            action_shape=action_shape,
            action_low=low,
            action_high=high,
            frame_stack=1,
            is_atari=False,
            backend="gymnasium",
            max_episode_steps=max_episode_steps,
            reward_clip=reward_clip,
            episodic_life=False,
            obs_spec=obs_spec,
        )
        super().__init__(spec)
        self._seed: int | None = seed
        self.last_info: dict[str, Any] = {}

    def convert_obs(self, obs: Any) -> Any:
        """A batch of raw gymnasium observations (leaves with a leading batch axis) as this
        env's observations (`spec.obs_spec`); e.g. for a separate render env."""
        return self._convert_obs(obs)

    def _raw_reset(self) -> np.ndarray:
        seed, self._seed = self._seed, None
        obs, info = self._venv.reset(seed=seed)
        self.last_info = dict(info)
        return self._convert_obs(obs)

    def _raw_step(self, actions: np.ndarray) -> tuple:
        # Our discrete actions are 0-based indices; gymnasium's Discrete may start elsewhere.
        actions = np.asarray(actions + self._action_offset, dtype=self._action_dtype)
        obs, rew, term, trunc, info = self._venv.step(actions)
        self.last_info = dict(info)
        obs = self._convert_obs(obs)
        return obs, np.asarray(rew, dtype=np.float32), np.asarray(term), np.asarray(trunc), None

    def close(self) -> None:
        self._venv.close()
