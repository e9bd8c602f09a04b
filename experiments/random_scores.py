"""Mean episode return of the uniform random policy on gymnasium envs: the `random` column of
`experiments/references/minatar.csv` (normalised scores need a floor that is measured, not
guessed).

    python -m experiments.random_scores MinAtar/Breakout-v1 MinAtar/Asterix-v1 --episodes 100

Episode k is reset with seed k and its actions drawn from the action space seeded with k, so
the figures are reproducible; the env's own defaults apply (MinAtar: sticky actions p = 0.1,
difficulty ramping).
"""

from __future__ import annotations

import argparse

import gymnasium
import numpy as np

from envs.gymnasium_env import register_optional_envs


def random_returns(env_id: str, episodes: int) -> np.ndarray:
    """Undiscounted returns of `episodes` random-policy episodes of `env_id`."""
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("envs", nargs="+", help="gymnasium env ids")
    parser.add_argument("--episodes", type=int, default=100, help="episodes per env")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    for env_id in args.envs:
        r = random_returns(env_id, args.episodes)
        print(f"{env_id}: mean {r.mean():.3f}, sd {r.std():.3f} over {len(r)} episodes")


if __name__ == "__main__":
    main()
