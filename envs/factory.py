"""`make_env`: resolve an id to a backend and apply the train/eval preprocessing defaults."""

from __future__ import annotations

import difflib
import functools
import operator
from collections.abc import Sequence

from envs.core import VecEnv
from envs.envpool_env import EnvpoolVecEnv, envpool_ids, is_atari_id
from envs.gymnasium_env import GymnasiumVecEnv, gymnasium_ids
from envs.gymnax_env import PREFIX as GYMNAX
from envs.gymnax_env import GymnaxVecEnv, gymnax_ids
from envs.partial import PARTIAL_OBS, FlatObsVecEnv, ObsSubsetVecEnv, PrivilegedObsVecEnv
from envs.text import DEFAULT_MISSION_LENGTH

BACKENDS = ("auto", "envpool", "gymnasium", "gymnax")

# Ids that "auto" gives to gymnasium although envpool 1.2.5 has them too: its MiniGrid/BabyAI
# are a C++ port with a Dict observation (the mission as 96 ASCII bytes) that the envpool
# adapter does not take; the `minigrid` package is the reference implementation (the one
# torch-ac and rl-starter-files use), with dict observations through `envs.spaces`.
GYMNASIUM_FIRST = ("MiniGrid-", "BabyAI-")


@functools.cache
def _envpool_id_set() -> frozenset[str]:
    return frozenset(envpool_ids())


def _known_ids(env_id: str | None = None) -> tuple[frozenset[str], frozenset[str]]:
    """envpool's ids and gymnasium's, the optional packages registered for `env_id` only
    (all of them without it: the close matches of an unknown id). The gymnasium registry can
    grow at run time (gymnasium.register), so it is not cached."""
    return _envpool_id_set(), frozenset(gymnasium_ids(env_id))


def _unknown(env_id: str, candidates: set[str] | frozenset[str], where: str = "") -> ValueError:
    close = difflib.get_close_matches(env_id, sorted(candidates), n=3, cutoff=0.6)
    hint = f"did you mean: {', '.join(close)}?" if close else "see envpool.list_all_envs()"
    return ValueError(f"unknown environment {env_id!r}{where}; {hint}")


def _resolve_backend(env_id: str, backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if env_id.startswith(GYMNAX) or backend == "gymnax":  # JAX-native: asked for by name
        if backend not in ("auto", "gymnax") or env_id not in gymnax_ids():
            where = "" if backend in ("auto", "gymnax") else f" in {backend}"
            raise _unknown(env_id, gymnax_ids(), where or " in gymnax (ids gymnax/<name>)")
        return "gymnax"
    in_envpool, in_gym = _known_ids(env_id)
    if backend == "envpool":
        if env_id not in in_envpool:
            raise _unknown(env_id, in_envpool, " in envpool")
        return "envpool"
    if backend == "gymnasium":
        if env_id not in in_gym:
            raise _unknown(env_id, _known_ids()[1], " in gymnasium")
        return "gymnasium"
    if env_id in in_gym and env_id.startswith(GYMNASIUM_FIRST):
        return "gymnasium"
    if env_id in in_envpool:
        return "envpool"
    if env_id in in_gym:
        return "gymnasium"
    raise _unknown(env_id, frozenset.union(*_known_ids(), gymnax_ids()))


def check_env_id(env_id: str, backend: str = "auto") -> str:
    """The backend that serves `env_id` ("envpool" or "gymnasium"); an unknown id raises
    `ValueError` with close matches. Builds nothing."""
    if env_id in PARTIAL_OBS:
        return _resolve_backend(PARTIAL_OBS[env_id][0], backend)
    return _resolve_backend(env_id, backend)


def run_env_seed(seed: int, num_envs: int, process_index: int = 0, num_processes: int = 1) -> int:
    """The base seed of the training envs of run seed `seed`: `(seed·num_processes +
    process_index)·num_envs` (mod 2³⁰, to stay in envpool's int32). Both backends seed env
    k of a vector env `base + k`, so runs, processes and envs never share an env seed while
    that product is below 2³⁰ (with `seed + k`, seeds 0 and 1 of a 16-env run would share 15
    of their 16 envs), and the P·N envs of one pool seeded `run_env_seed(seed, N)` are exactly
    the envs of runs seed .. seed + P − 1, N each: what lets a population (`--num-seeds P`,
    engine.population) step one pool."""
    return (seed * num_processes + process_index) * num_envs % 2**30


def eval_env_seed(seed: int, num_envs: int) -> int:
    """The base seed of run seed `seed`'s evaluation envs: `2³⁰ + seed·num_envs` (mod 2³⁰),
    apart from every training env seed and from other run seeds' evaluation envs."""
    return 2**30 + seed * num_envs % 2**30


def clips_rewards(is_atari: bool, train: bool, reward_clip: bool | None = None) -> bool:
    """Whether an env clips its rewards to [−1, 1]: as `reward_clip` says, else Atari
    training envs only (`make_env`; evaluation asks it of the run's training env)."""
    return (train and is_atari) if reward_clip is None else bool(reward_clip)


def make_env(
    env_id: str,
    num_envs: int,
    seed: int,
    *,
    train: bool = True,
    reward_clip: bool | None = None,
    episodic_life: bool | None = None,
    num_threads: int = 0,
    max_episode_steps: int | None = None,
    backend: str = "auto",
    obs_keys: Sequence[str] | None = None,
    mission_length: int = DEFAULT_MISSION_LENGTH,
    flatten_obs: bool = False,
    fire_reset: bool | None = None,
    privileged_obs: Sequence[int] = (),
) -> VecEnv:
    """Build a vectorised env with next-step auto-reset.

    Args:
      env_id: an envpool id (Atari `*-v5`, classic control, MuJoCo, ...) or, failing that,
        a gymnasium id, or a partially observed variant of one (`envs.partial.PARTIAL_OBS`,
        e.g. CartPole-P-v1). Unknown ids raise `ValueError` with close matches.
      num_envs: batch size B (>= 1).
      seed: base seed (int32 range); env i is seeded from it deterministically.
      train: Atari only: True turns on episodic life and reward clipping (training
        preprocessing), False (evaluation) turns both off. The rest of the standard Atari
        preprocessing is always on: up to 30 no-op starts, frame skip 4 with max-pooling,
        84x84 gray, a stack of 4 frames.
      reward_clip: override the default (Atari: `train`; others: False). Clipping is
        `clip(raw_reward, -1, 1)` in float32; `TimeStep.raw_reward` is always unclipped.
      episodic_life: override the Atari default (`train`). Forcing True on a non-Atari env
        is an error.
      num_threads: envpool worker threads (0: envpool's default).
      max_episode_steps: time limit override (truncation), in agent steps.
      backend: "auto" (envpool if it has the id, else gymnasium), "envpool" or "gymnasium".
        MiniGrid/BabyAI ids (`MiniGrid-DoorKey-5x5-v0`) come from the `minigrid` package,
        imported when installed; they are gymnasium envs with dict observations.
      obs_keys: for a dict observation space, the keys to keep (e.g. `("image",
        "direction")`); None keeps all. An unknown key is an error that lists the keys.
      mission_length: words of a text observation (MiniGrid's mission), as int32 word ids
        padded with 0 (`envs.text`).
      flatten_obs: hand out each observation array flattened to a vector
        (`envs.partial.FlatObsVecEnv`).
      fire_reset: Atari only: whether envpool presses FIRE after a reset in the games whose
        action set has it (None: envpool's default, on). The Atari 100k protocol turns it off
        (`envs.protocols`), as Dopamine's ALE wrappers never press it for the agent.
      privileged_obs: dimensions of the (vector) observations that are privileged
        (`envs.partial.PrivilegedObsVecEnv`): handed out, but kept from the networks of the
        agents that take them, e.g. CartPole's velocities (1, 3) for SAC's prediction model.
    """
    if privileged_obs:
        inner = make_env(
            env_id, num_envs, seed, train=train, reward_clip=reward_clip,
            episodic_life=episodic_life, num_threads=num_threads,
            max_episode_steps=max_episode_steps, backend=backend, obs_keys=obs_keys,
            mission_length=mission_length, flatten_obs=flatten_obs, fire_reset=fire_reset,
        )  # fmt: skip
        try:
            return PrivilegedObsVecEnv(inner, privileged_obs)
        except ValueError:
            inner.close()
            raise
    if flatten_obs:
        inner = make_env(
            env_id, num_envs, seed, train=train, reward_clip=reward_clip,
            episodic_life=episodic_life, num_threads=num_threads,
            max_episode_steps=max_episode_steps, backend=backend, obs_keys=obs_keys,
            mission_length=mission_length, fire_reset=fire_reset,
        )  # fmt: skip
        try:
            return FlatObsVecEnv(inner)
        except ValueError:
            inner.close()
            raise
    if not isinstance(env_id, str):
        raise ValueError(f"env_id must be a string, got {env_id!r}")
    if env_id in PARTIAL_OBS:
        inner_id, keep = PARTIAL_OBS[env_id]
        inner = make_env(
            inner_id, num_envs, seed, train=train, reward_clip=reward_clip,
            episodic_life=episodic_life, num_threads=num_threads,
            max_episode_steps=max_episode_steps, backend=backend, fire_reset=fire_reset,
        )  # fmt: skip
        return ObsSubsetVecEnv(inner, env_id, keep)
    try:
        num_envs = operator.index(num_envs)
    except TypeError:
        raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}") from None
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    try:
        seed = operator.index(seed)
    except TypeError:
        raise ValueError(f"seed must be an integer, got {seed!r}") from None
    if not -(2**31) <= seed < 2**31:
        raise ValueError(f"seed must fit in int32, got {seed}")
    if max_episode_steps is not None and max_episode_steps < 1:
        raise ValueError(f"max_episode_steps must be >= 1 or None, got {max_episode_steps}")
    if num_threads < 0:
        raise ValueError(f"num_threads must be >= 0, got {num_threads}")
    if isinstance(obs_keys, str):
        raise ValueError(f"obs_keys must be a sequence of keys, got the string {obs_keys!r}")
    if mission_length < 1:
        raise ValueError(f"mission_length must be >= 1, got {mission_length}")

    chosen = _resolve_backend(env_id, backend)
    is_atari = chosen == "envpool" and is_atari_id(env_id)
    clip = clips_rewards(is_atari, train, reward_clip)
    if is_atari:
        life = train if episodic_life is None else bool(episodic_life)
    else:
        if episodic_life:
            raise ValueError(f"episodic_life=True needs an Atari env; {env_id!r} is not one")
        if fire_reset is not None:
            raise ValueError(f"fire_reset applies to Atari envs only; {env_id!r} is not one")
        life = False

    if chosen == "gymnax":
        if obs_keys is not None or num_threads:
            raise ValueError(
                f"{'obs_keys' if obs_keys is not None else 'num_threads'}: {env_id!r} is a "
                "gymnax env (array observations, stepped on the device)"
            )
        return GymnaxVecEnv(
            env_id, num_envs, seed, reward_clip=clip, max_episode_steps=max_episode_steps
        )
    if chosen == "envpool":
        if obs_keys is not None:
            raise ValueError(
                f"obs_keys={list(obs_keys)}: {env_id!r} (envpool) has array observations"
            )
        return EnvpoolVecEnv(
            env_id,
            num_envs,
            seed,
            is_atari=is_atari,
            reward_clip=clip,
            episodic_life=life,
            num_threads=num_threads,
            max_episode_steps=max_episode_steps,
            fire_reset=fire_reset,
        )
    return GymnasiumVecEnv(
        env_id,
        num_envs,
        seed,
        reward_clip=clip,
        max_episode_steps=max_episode_steps,
        obs_keys=obs_keys,
        mission_length=mission_length,
    )


def make_eval_env(env_id: str, num_envs: int, seed: int, **kwargs) -> VecEnv:
    """The env that evaluates a run trained on `env_id`: `make_env(..., train=False)`, so raw
    rewards, with the training's life handling on Atari. Training makes a life loss the end
    of the agent's episode (its recurrent state resets, and envpool's reset serves with FIRE
    and no-ops); an evaluation without it would ask of the agent what it never learnt (to
    serve after a lost life: a greedy Breakout policy then idles to the 27,000-step cap) and
    carry its recurrent state across lives. Its returns still sum whole games: evaluation
    counts episodes by `game_over` (as CleanRL's Atari evaluation, which keeps its training
    wrappers and reports whole-game returns)."""
    try:
        atari = _resolve_backend(env_id, kwargs.get("backend", "auto")) == "envpool"
    except ValueError:  # an id make_env resolves itself (a partial variant), or names as unknown
        atari = False
    atari = atari and is_atari_id(env_id)
    return make_env(env_id, num_envs, seed, train=False, episodic_life=atari or None, **kwargs)
