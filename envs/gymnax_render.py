"""Frames of gymnax envs for `experiments.evaluate --video`, drawn from the observations the
agent sees (gymnax itself renders nothing here).

- MinAtar (`gymnax/<game>-MinAtar`): the `[10, 10, C]` channels, each cell coloured by the
  last channel set in it (one colour per channel, black where none is), scaled up to
  160×160 pixels. A flattened observation (`--flatten-obs`) is folded back first.
- Classic control (CartPole-v1, Acrobot-v1, MountainCar-v0, MountainCarContinuous-v0,
  Pendulum-v1): gymnasium's own renderer of the same task, its state set from the
  observation (angles recovered from their cos/sin). The picture is gymnasium's; the
  dynamics that produced it are gymnax's.

Other gymnax envs (bsuite, misc) have no renderer: `video_refusal` says so in one line.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from envs.gymnax_env import PREFIX, is_minatar

CELL = 16  # pixels per MinAtar cell


def _angles(cos, sin):
    return np.arctan2(sin, cos)


# gymnax id -> (gymnasium id, observation -> the gymnasium env's `state`)
CLASSIC: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {
    "CartPole-v1": ("CartPole-v1", lambda o: o[:4]),  # x, ẋ, θ, θ̇
    "Acrobot-v1": (  # cos θ1, sin θ1, cos θ2, sin θ2, θ̇1, θ̇2
        "Acrobot-v1",
        lambda o: np.array([_angles(o[0], o[1]), _angles(o[2], o[3]), o[4], o[5]]),
    ),
    "MountainCar-v0": ("MountainCar-v0", lambda o: o[:2]),  # position, velocity
    "MountainCarContinuous-v0": ("MountainCarContinuous-v0", lambda o: o[:2]),
    "Pendulum-v1": ("Pendulum-v1", lambda o: np.array([_angles(o[0], o[1]), o[2]])),
}


def video_refusal(env_id: str) -> str | None:
    """Why `--video` cannot draw `env_id` (a gymnax id), or None where it can."""
    name = env_id.removeprefix(PREFIX)
    if is_minatar(name) or name in CLASSIC:
        return None
    return (
        f"--video: {env_id} has no renderer here (gymnax's MinAtar games and classic control "
        "have one); evaluate it without --video"
    )


def palette(channels: int) -> np.ndarray:
    """`[C, 3]` uint8: one distinct colour per channel (matplotlib's tab10, then tab20)."""
    from matplotlib import colormaps

    colours = [*colormaps["tab10"].colors, *colormaps["tab20"].colors]
    return (np.asarray([colours[c % len(colours)] for c in range(channels)]) * 255).astype(np.uint8)


def minatar_frame(obs: np.ndarray, colours: np.ndarray) -> np.ndarray:
    """`[10·CELL, 10·CELL, 3]` uint8 of one MinAtar observation (`[10, 10, C]` or flat),
    channel c drawn in `colours[c]` (`palette(C)`)."""
    grid = np.asarray(obs, bool).reshape(10, 10, len(colours))
    frame = np.zeros((10, 10, 3), np.uint8)
    for c in range(len(colours)):  # the last channel set wins
        frame[grid[:, :, c]] = colours[c]
    return np.repeat(np.repeat(frame, CELL, 0), CELL, 1)


class FrameRenderer:
    """`renderer(obs)` -> an RGB frame of one env's observation; `close()` when done."""

    def __init__(self, env_id: str, obs_shape: tuple[int, ...]):
        """`obs_shape`: the observations' (`[10, 10, C]`, or `[100·C]` flattened)."""
        reason = video_refusal(env_id)
        if reason is not None:
            raise ValueError(reason)
        self.name, self._gym = env_id.removeprefix(PREFIX), None
        if is_minatar(self.name):
            self.colours = palette(int(np.prod(obs_shape)) // 100)
        else:
            import gymnasium as gym

            gym_id, self._state = CLASSIC[self.name]
            self._gym = gym.make(gym_id, render_mode="rgb_array")
            self._gym.reset(seed=0)

    def __call__(self, obs) -> np.ndarray:
        obs = np.asarray(obs)
        if self._gym is None:
            return minatar_frame(obs, self.colours)
        env = self._gym.unwrapped
        env.state = np.asarray(self._state(obs.astype(np.float64)), np.float64)
        return np.asarray(self._gym.render())

    def close(self) -> None:
        if self._gym is not None:
            self._gym.close()
