"""gymnasium observation spaces as `ArraySpec` pytrees, and the host-side conversion of a
vector env's batched observations into arrays of those specs.

| gymnasium space | `ArraySpec` (per env) | conversion of the batch |
|---|---|---|
| `Box` | its shape; floats become float32, int64 int32 (`obs_dtype_for`) | cast |
| `Discrete(n, start)` | `()` int32, `num_values=n` | `x - start` |
| `MultiDiscrete(nvec, start)` | its shape, int32, `num_values=max(nvec)` | `x - start` |
| `MultiBinary(n)` | its shape, uint8 | cast |
| `Text`, MiniGrid's `MissionSpace` | `(mission_length,)` int32, `tokens=True` (1) | word ids (1) |
| `Dict` | a dict of the above, by key | per key |
| `Tuple` | a tuple of the above | per element |

(1) `num_values=envs.text.MISSION_VOCAB_SIZE`; converted by `envs.text.encode_missions`.

Any other space (Graph, Sequence, OneOf) raises a ValueError naming its path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np

from envs.core import ArraySpec, obs_dtype_for
from envs.text import MISSION_VOCAB_SIZE, encode_missions

Converter = Callable[[Any], Any]


def _is_text_space(space: gymnasium.Space) -> bool:
    if isinstance(space, gymnasium.spaces.Text):
        return True
    try:  # MiniGrid's mission space (a plain Space of strings)
        from minigrid.core.mission import MissionSpace
    except ImportError:
        return False
    return isinstance(space, MissionSpace)


def _leaf(
    space: gymnasium.Space, path: str, mission_length: int, env_id: str
) -> tuple[Any, Converter]:
    if isinstance(space, gymnasium.spaces.Box):
        dtype = obs_dtype_for(space.dtype)
        return ArraySpec(tuple(space.shape), dtype), lambda x: np.asarray(x).astype(dtype)
    if isinstance(space, gymnasium.spaces.Discrete):
        start = int(space.start)
        spec = ArraySpec((), np.int32, num_values=int(space.n))
        return spec, lambda x: (np.asarray(x) - start).astype(np.int32)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        start = np.asarray(space.start)
        spec = ArraySpec(tuple(space.shape), np.int32, num_values=int(np.max(space.nvec)))
        return spec, lambda x: (np.asarray(x) - start).astype(np.int32)
    if isinstance(space, gymnasium.spaces.MultiBinary):
        spec = ArraySpec(tuple(space.shape), np.uint8)
        return spec, lambda x: np.asarray(x).astype(np.uint8)
    if _is_text_space(space):
        spec = ArraySpec((mission_length,), np.int32, num_values=MISSION_VOCAB_SIZE, tokens=True)
        return spec, lambda x: encode_missions(x, mission_length)
    raise ValueError(
        f"{env_id}: unsupported observation space at obs{path}: {space} (supported: Box, "
        "Discrete, MultiDiscrete, MultiBinary, Text/MissionSpace, and Dict/Tuple of them)"
    )


def space_converter(
    space: gymnasium.Space,
    env_id: str,
    *,
    mission_length: int,
    obs_keys: Sequence[str] | None = None,
    _path: str = "",
) -> tuple[Any, Converter]:
    """`(obs_spec, convert)` for a single-env observation space (module docstring).

    `convert(batched_obs)` takes what the vector env returns (leaves with a leading batch
    axis; text as a sequence of strings) and returns numpy arrays shaped like `obs_spec`
    with the batch axis first. `obs_keys` keeps only those top-level keys of a `Dict` space
    (e.g. `("image", "direction")` to drop MiniGrid's mission and its replay memory); an
    unknown key raises a ValueError listing the space's keys.
    """
    if obs_keys is not None and not isinstance(space, gymnasium.spaces.Dict):
        raise ValueError(
            f"{env_id}: obs_keys={list(obs_keys)} needs a Dict observation space, got {space}"
        )
    if isinstance(space, gymnasium.spaces.Dict):
        keys = list(space.spaces)
        if obs_keys is not None:
            unknown = [k for k in obs_keys if k not in space.spaces]
            if unknown or not obs_keys:
                raise ValueError(
                    f"{env_id}: obs_keys {list(obs_keys)} "
                    + (f"names unknown key(s) {unknown}" if unknown else "is empty")
                    + f"; the observation keys are {keys}"
                )
            keys = list(dict.fromkeys(obs_keys))
        parts = {
            k: space_converter(
                space.spaces[k], env_id, mission_length=mission_length, _path=f"{_path}[{k!r}]"
            )
            for k in keys
        }
        spec = {k: s for k, (s, _) in parts.items()}
        convs = {k: c for k, (_, c) in parts.items()}
        return spec, lambda x: {k: c(x[k]) for k, c in convs.items()}
    if isinstance(space, gymnasium.spaces.Tuple):
        parts = [
            space_converter(s, env_id, mission_length=mission_length, _path=f"{_path}[{i}]")
            for i, s in enumerate(space.spaces)
        ]
        spec = tuple(s for s, _ in parts)
        convs = [c for _, c in parts]
        return spec, lambda x: tuple(c(xi) for c, xi in zip(convs, x, strict=True))
    return _leaf(space, _path, mission_length, env_id)
