"""Mean episode return of the uniform random policy: the `low` column of
`experiments/references/minatar.csv` (normalised scores need a floor that is measured, not
guessed).

    python -m experiments.random_scores MinAtar/Breakout-v1 gymnax/Breakout-MinAtar --episodes 100

gymnasium ids: episode k is reset with seed k and its actions drawn from the action space
seeded with k. gymnax ids (`gymnax/...`): episode k is the first game of env k of one vector
env seeded 0 (`envs.gymnax_env`), its actions drawn uniformly from a NumPy generator seeded 0.
Either way the figures are reproducible, and the env's own defaults apply (MinAtar: sticky
actions p = 0.1, difficulty ramping).
"""

from __future__ import annotations

import argparse

import gymnasium
import numpy as np

from envs.factory import make_env
from envs.gymnasium_env import register_optional_envs
from envs.gymnax_env import PREFIX as GYMNAX_PREFIX


def random_returns(env_id: str, episodes: int) -> np.ndarray:
    """Undiscounted returns of `episodes` random-policy episodes of `env_id`."""
    if env_id.startswith(GYMNAX_PREFIX):
        return _vector_random_returns(env_id, episodes)
    register_optional_envs(env_id)
    if env_id not in gymnasium.registry:
        raise SystemExit(f"error: unknown gymnasium environment {env_id!r}")
    env = gymnasium.make(env_id)
    returns = []
    for k in range(episodes):
        env.reset(seed=k)
        env.action_space.seed(k)
        done, total = False, 0.0
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return np.asarray(returns)


def _vector_random_returns(env_id: str, episodes: int) -> np.ndarray:
    """The first game's return of each of `episodes` envs stepped side by side."""
    try:
        env = make_env(env_id, episodes, 0, train=False)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    if not env.spec.discrete:
        raise SystemExit(f"error: {env_id}: the random policy here is for discrete actions")
    rng = np.random.default_rng(0)
    totals, done = np.zeros(episodes), np.zeros(episodes, bool)
    env.reset()
    while not done.all():
        step = env.step(rng.integers(env.spec.num_actions, size=episodes))
        totals += np.where(done, 0.0, np.asarray(step.raw_reward, float))
        done |= np.asarray(step.game_over)
    env.close()
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("envs", nargs="+", help="gymnasium or gymnax/ env ids")
    parser.add_argument("--episodes", type=int, default=100, help="episodes per env")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    for env_id in args.envs:
        r = random_returns(env_id, args.episodes)
        print(f"{env_id}: mean {r.mean():.3f}, sd {r.std():.3f} over {len(r)} episodes")


if __name__ == "__main__":
    main()
